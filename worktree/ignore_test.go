package worktree_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// ignoreCases are .gitignore files (by directory) and the paths to judge,
// directories marked with a trailing slash. They cover nesting, negation,
// directory-only and anchored patterns, ** forms, escapes and the store's
// exclude file.
var ignoreCases = []struct {
	name    string
	files   map[string]string // directory ("" is the root) -> .gitignore content
	exclude string            // the store's exclude file
	paths   []string
}{
	{"simple globs", map[string]string{"": "*.o\n*.tmp\n# comment\n\nlog\n"},
		"", []string{"a.o", "src/b.o", "x.c", "log", "src/log", "src/log/", "log/x", "a.tmp", "o"}},
	{"directory only", map[string]string{"": "build/\ncache/\n"},
		"", []string{"build/", "build/x", "src/build/", "src/build/y", "cache"}},
	{"anchored", map[string]string{"": "/top\n/docs/*.html\nsrc/gen\n"},
		"", []string{"top", "sub/top", "docs/a.html", "docs/sub/a.html", "src/gen", "x/src/gen", "src/gen/", "src/gen/a"}},
	{"negation", map[string]string{"": "*.log\n!keep.log\nout/\n!out/keep\n"},
		"", []string{"a.log", "keep.log", "dir/keep.log", "out/", "out/keep", "out/x"}},
	{"double star", map[string]string{"": "**/foo\na/**/b\nlogs/**\n"},
		"", []string{"foo", "x/foo", "x/y/foo/", "a/b", "a/x/b", "a/x/y/b", "ab", "logs/x", "logs/x/y"}},
	{"nested files", map[string]string{"": "*.gen\n", "sub": "!keep.gen\nlocal\n/anch\n", "sub/deep": "*.txt\n"},
		"", []string{"a.gen", "sub/a.gen", "sub/keep.gen", "keep.gen", "sub/local", "local", "sub/x/local",
			"sub/anch", "sub/x/anch", "sub/deep/a.txt", "a.txt", "sub/a.txt"}},
	{"escapes and spaces", map[string]string{"": "\\#hash\n\\!bang\ntrail \nesc\\ \n"},
		"", []string{"#hash", "!bang", "trail", "trail ", "esc ", "esc"}},
	{"exclude file under .gitignore", map[string]string{"": "!wanted.bak\n"},
		"*.bak\nsecret/\n", []string{"a.bak", "wanted.bak", "secret/", "secret/x", "b/secret/"}},
}

// TestIgnoreRulesAgreeWithGitCheckIgnore judges each path of each case with
// the work tree's rules and with `git check-ignore` as the oracle (the
// store's exclude file plays git's info/exclude).
func TestIgnoreRulesAgreeWithGitCheckIgnore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: no oracle for the ignore rules")
	}
	for _, c := range ignoreCases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			dir, store := filepath.Join(base, "tree"), filepath.Join(base, "store")
			os.MkdirAll(store, 0o755)
			git := exec.Command("git", "init", "-q", dir)
			if out, err := git.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			for d, content := range c.files {
				write(t, filepath.Join(dir, d, ".gitignore"), content, 0o644)
			}
			write(t, filepath.Join(dir, ".git/info/exclude"), c.exclude, 0o644)
			write(t, filepath.Join(store, worktree.ExcludeFile), c.exclude, 0o644)
			for _, p := range c.paths {
				if strings.HasSuffix(p, "/") {
					os.MkdirAll(filepath.Join(dir, p), 0o755)
				}
			}
			cmd := exec.Command("git", "-C", dir, "check-ignore", "--no-index", "--stdin")
			cmd.Stdin = strings.NewReader(strings.Join(c.paths, "\n") + "\n")
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("git check-ignore: %v", err)
			}
			gitSays := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				gitSays[l] = true
			}
			f := &fixture{t: t, fs: vfs.OS(), dir: store}
			wt, err := worktree.Adopt(nilSource{}, dir, objects.ZeroID, f.opts())
			if err != nil {
				t.Fatal(err)
			}
			defer wt.Close()
			for _, p := range c.paths {
				isDir := strings.HasSuffix(p, "/")
				got, err := wt.Ignored(strings.TrimSuffix(p, "/"), isDir)
				if err != nil {
					t.Fatalf("%q: %v", p, err)
				}
				if want := gitSays[p] || gitSays[strings.TrimSuffix(p, "/")]; got != want {
					t.Errorf("%q: ignored = %v, git check-ignore says %v", p, got, want)
				}
			}
		})
	}
}

// nilSource is a Source with no objects, for trees adopted without a base.
type nilSource struct{}

func (nilSource) Changeset(id objects.ID) (*objects.Changeset, error) { return nil, os.ErrNotExist }
func (nilSource) Tree(id objects.ID) (*objects.Tree, error)           { return nil, os.ErrNotExist }
func (nilSource) Blob(id objects.ID) ([]byte, error)                  { return nil, os.ErrNotExist }

// TestReservedPathsAreAlwaysIgnored checks that .git, the metadata
// directory and the store's directory stay out with the rules off too.
func TestReservedPathsAreAlwaysIgnored(t *testing.T) {
	base := t.TempDir()
	o := worktree.Options{FS: vfs.OS(), StoreDir: filepath.Join(base, ".swarmops"), NoIgnore: true}
	wt, err := worktree.Adopt(nilSource{}, base, objects.ZeroID, o)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	for _, p := range []string{".git", ".GIT/config", "sub/.git/HEAD", worktree.MetaDir + "/index", ".swarmops/state", ".SwarmOps"} {
		if got, err := wt.Ignored(p, false); err != nil || !got {
			t.Errorf("%q: ignored = %v, %v; want true", p, got, err)
		}
	}
}
