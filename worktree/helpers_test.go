package worktree_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// fixture is a store and the filesystem it and its work trees live on.
type fixture struct {
	t     testing.TB
	fs    vfs.FS
	dir   string // store directory
	store *core.Store
}

func newFixture(t testing.TB, fsys vfs.FS, storeDir string) *fixture {
	t.Helper()
	s, err := core.Create(storeDir, core.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{t: t, fs: fsys, dir: storeDir, store: s}
}

func (f *fixture) snap() *core.Snapshot {
	f.t.Helper()
	sn, err := f.store.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	return sn
}

func (f *fixture) opts() worktree.Options {
	return worktree.Options{FS: f.fs, StoreDir: f.dir}
}

// syncOpts are the fixture's options with Sync.
func (f *fixture) syncOpts() worktree.Options {
	o := f.opts()
	o.Sync = true
	return o
}

// checkout checks id out into dst with the fixture's options, failing the
// test if it fails.
func (f *fixture) checkout(id objects.ID, dst string) {
	f.t.Helper()
	f.checkoutWith(id, dst, f.opts())
}

func (f *fixture) checkoutWith(id objects.ID, dst string, o worktree.Options) {
	f.t.Helper()
	if _, err := worktree.Checkout(f.snap(), id, dst, o); err != nil {
		f.t.Fatal(err)
	}
}

// onTree opens the work tree at dir with o, runs do on it and closes it.
func onTree(dir string, o worktree.Options, do func(*worktree.Tree) error) error {
	wt, err := worktree.Open(dir, o)
	if err != nil {
		return err
	}
	defer wt.Close()
	return do(wt)
}

// statusOf is the status of the work tree at dir opened with o, failing
// the test on an error.
func statusOf(t testing.TB, dir string, o worktree.Options) *worktree.Status {
	t.Helper()
	return mustStatus(t, mustOpen(t, dir, o))
}

// mustStatus is wt's status, failing the test on an error.
func mustStatus(t testing.TB, wt *worktree.Tree) *worktree.Status {
	t.Helper()
	st, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// commit records changes on parent (zero: a root changeset).
func (f *fixture) commit(parent objects.ID, changes ...core.Change) objects.ID {
	f.t.Helper()
	var ps []core.ID
	if !parent.IsZero() {
		ps = []core.ID{parent}
	}
	id, err := f.store.Commit(core.CommitRequest{Parents: ps, Changes: changes})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// commitDir commits the directory dir as a work tree would: adopted if it
// is not one yet, snapshot, commit on its base, record.
func (f *fixture) commitDir(dir string, o worktree.Options) objects.ID {
	f.t.Helper()
	t, err := worktree.Open(dir, o)
	if errors.Is(err, worktree.ErrNotWorkTree) {
		t, err = worktree.Adopt(f.snap(), dir, objects.ZeroID, o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	defer t.Close()
	s, err := t.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	id := f.commit(s.Parent, s.Changes...)
	if err := t.Record(f.snap(), id, s); err != nil {
		f.t.Fatal(err)
	}
	return id
}

func put(p, data string) core.Change { return core.Change{Path: p, Data: []byte(data)} }
func exe(p, data string) core.Change {
	return core.Change{Path: p, Data: []byte(data), Mode: objects.ModeExec}
}
func link(p, target string) core.Change {
	return core.Change{Path: p, Data: []byte(target), Mode: objects.ModeSymlink}
}
func del(p string) core.Change { return core.Change{Path: p, Delete: true} }

// listing describes every entry below dir on the real OS (links not
// followed), skipping the names in skip: "d" for directories, "f MODE
// SIZE sha" for files, "l TARGET" for links.
func listing(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l " + target
		case fi.IsDir():
			out[rel] = "d"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "f " + map[bool]string{true: "x", false: "-"}[fi.Mode()&0o100 != 0] + " " + objects.BlobID(data).String()[:12]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffListings(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k+": "+v+" vs "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+": missing vs "+v)
		}
	}
	sort.Strings(out)
	return out
}

// write makes a file (and its directories) on the real OS.
func write(t testing.TB, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// kinds renders a status's changes as "path:kind" strings.
func kinds(st *worktree.Status) []string {
	var out []string
	for _, c := range st.Changes {
		out = append(out, c.Path+":"+c.Kind.String())
	}
	return out
}

func eq(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

var _ = bytes.Equal
