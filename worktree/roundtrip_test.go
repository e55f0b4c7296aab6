package worktree_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// makeRealTree fills dir with what real repositories hold: links of every
// kind, executables, empty files, Unicode and spaces in names, a deep path,
// and junk the ignore rules keep out (node_modules/, *.o, .git/).
func makeRealTree(t *testing.T, dir string) {
	write(t, filepath.Join(dir, "README.md"), "# hello\n", 0o644)
	write(t, filepath.Join(dir, "empty"), "", 0o644)
	write(t, filepath.Join(dir, "bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	write(t, filepath.Join(dir, "docs/ünïcödé name.txt"), "unicode\n", 0o644)
	write(t, filepath.Join(dir, "docs/with space/a b.txt"), "spaces\n", 0o644)
	write(t, filepath.Join(dir, "a/b/c/d/e/f/g/h/i/j/deep.go"), "package deep\n", 0o644)
	write(t, filepath.Join(dir, "src/main.c"), "int main(){}\n", 0o644)
	write(t, filepath.Join(dir, ".gitignore"), "node_modules/\n*.o\n/build\n!keep.o\n", 0o644)
	write(t, filepath.Join(dir, "src/.gitignore"), "generated.c\n", 0o644)
	symlink(t, "README.md", filepath.Join(dir, "link-rel"))
	symlink(t, "/etc/hostname", filepath.Join(dir, "link-abs"))
	symlink(t, "does/not/exist", filepath.Join(dir, "link-dangling"))
	symlink(t, "../docs", filepath.Join(dir, "bin/link-dir"))
	symlink(t, "with space", filepath.Join(dir, "docs/link to dir with space"))
	// Ignored junk.
	write(t, filepath.Join(dir, "node_modules/pkg/index.js"), "junk\n", 0o644)
	write(t, filepath.Join(dir, "src/main.o"), "obj\n", 0o644)
	write(t, filepath.Join(dir, "src/keep.o"), "kept by negation\n", 0o644)
	write(t, filepath.Join(dir, "src/generated.c"), "gen\n", 0o644)
	write(t, filepath.Join(dir, "build/out"), "out\n", 0o644)
	write(t, filepath.Join(dir, ".git/HEAD"), "ref: refs/heads/main\n", 0o644)
}

// ignoredPaths are what the rules of makeRealTree keep out.
var ignoredPaths = []string{"node_modules", "src/main.o", "src/generated.c", "build", ".git"}

// TestRoundTripOnTheRealOS commits a real directory through a store,
// checks it out elsewhere and compares the two without following links:
// every file, mode and link target is the same, except what the rules
// ignore. It compares with `diff -r --no-dereference` too where diff is
// installed.
func TestRoundTripOnTheRealOS(t *testing.T) {
	base := t.TempDir()
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	makeRealTree(t, src)
	f := newFixture(t, vfs.OS(), filepath.Join(base, "store"))
	id := f.commitDir(src, f.opts())
	if _, err := worktree.Checkout(f.snap(), id, dst, f.opts()); err != nil {
		t.Fatal(err)
	}
	skip := append([]string{worktree.MetaDir}, ignoredPaths...)
	want, got := listing(t, src, skip...), listing(t, dst, worktree.MetaDir)
	if d := diffListings(want, got); len(d) > 0 {
		t.Fatalf("checkout differs from the committed directory:\n%s", strings.Join(d, "\n"))
	}
	if got["link-dangling"] != "l does/not/exist" || got["bin/run.sh"][2] != 'x' || got["src/keep.o"] == "" {
		t.Fatalf("link, exec bit or negated ignore lost: %v", got)
	}
	for _, p := range ignoredPaths {
		if _, ok := got[p]; ok {
			t.Errorf("ignored path %q was committed", p)
		}
	}
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("diff is not installed; the walk comparison above stands")
	}
	for _, p := range ignoredPaths {
		os.RemoveAll(filepath.Join(src, p))
	}
	cmd := exec.Command("diff", "-r", "--no-dereference", "-x", worktree.MetaDir, src, dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("diff -r --no-dereference: %v\n%s", err, out)
	}
	for _, d := range []string{src, dst} {
		wt, err := worktree.Open(d, f.opts())
		if err != nil {
			t.Fatal(err)
		}
		st, err := wt.Status()
		wt.Close()
		if err != nil || len(st.Changes) != 0 {
			t.Fatalf("status of %s after the round trip: %v, %v", d, kinds(st), err)
		}
	}
}
