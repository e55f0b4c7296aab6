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
	for _, w := range []struct {
		path, data string
		perm       os.FileMode
	}{
		{"README.md", "# hello\n", 0o644},
		{"empty", "", 0o644},
		{"bin/run.sh", "#!/bin/sh\necho hi\n", 0o755},
		{"docs/ünïcödé name.txt", "unicode\n", 0o644},
		{"docs/with space/a b.txt", "spaces\n", 0o644},
		{"a/b/c/d/e/f/g/h/i/j/deep.go", "package deep\n", 0o644},
		{"src/main.c", "int main(){}\n", 0o644},
		{".gitignore", "node_modules/\n*.o\n/build\n!keep.o\n", 0o644},
		{"src/.gitignore", "generated.c\n", 0o644},
		// Ignored junk, and a file a negation keeps.
		{"node_modules/pkg/index.js", "junk\n", 0o644},
		{"src/main.o", "obj\n", 0o644},
		{"src/keep.o", "kept by negation\n", 0o644},
		{"src/generated.c", "gen\n", 0o644},
		{"build/out", "out\n", 0o644},
		{".git/HEAD", "ref: refs/heads/main\n", 0o644},
	} {
		write(t, filepath.Join(dir, w.path), w.data, w.perm)
	}
	for _, l := range [][2]string{ // target, link
		{"README.md", "link-rel"},
		{"/etc/hostname", "link-abs"},
		{"does/not/exist", "link-dangling"},
		{"../docs", "bin/link-dir"},
		{"with space", "docs/link to dir with space"},
	} {
		symlink(t, l[0], filepath.Join(dir, l[1]))
	}
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
	f.checkout(id, dst)
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
		if st := statusOf(t, d, f.opts()); len(st.Changes) != 0 {
			t.Fatalf("status of %s after the round trip: %v", d, kinds(st))
		}
	}
}
