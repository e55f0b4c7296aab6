package worktree_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/worktree"
)

// The escape tests: each plants what a hostile tree or target could hold
// and checks that nothing outside the target is created, written or
// removed, and that the checkout refuses or replaces what it must.

// outsideUntouched checks that the directory out still holds exactly what
// it held (a listing taken before).
func outsideUntouched(t *testing.T, out string, before map[string]string) {
	t.Helper()
	if d := diffListings(before, listing(t, out)); len(d) > 0 {
		t.Fatalf("the checkout changed a directory outside its target:\n%s", strings.Join(d, "\n"))
	}
}

// realDirectory fails unless p is a directory itself, not a link to one.
func realDirectory(t *testing.T, p string) {
	t.Helper()
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		t.Fatalf("%s is not a real directory: %v %v", p, fi, err)
	}
}

// forcedCheckout checks id out into dst over whatever is there (Force),
// failing the test if it fails.
func (f *fixture) forcedCheckout(id objects.ID, dst string) {
	f.t.Helper()
	o := f.opts()
	o.Force = true
	f.checkoutWith(id, dst, o)
}

// adoptedSnapshot adopts dir as a work tree with no base, closed when the
// test ends, and takes a snapshot of it.
func (f *fixture) adoptedSnapshot(dir string) (*worktree.Tree, *worktree.Snapshot) {
	f.t.Helper()
	wt, err := worktree.Adopt(f.snap(), dir, objects.ZeroID, f.opts())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { wt.Close() })
	s, err := wt.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	return wt, s
}

func osFixture(t *testing.T) (f *fixture, dst, out string) {
	base := t.TempDir()
	dst, out = filepath.Join(base, "dst"), filepath.Join(base, "outside")
	write(t, filepath.Join(out, "secret"), "outside data\n", 0o644)
	return newFixture(t, vfs.OS(), filepath.Join(base, "store")), dst, out
}

// TestCheckoutReplacesAPlantedLinkInsteadOfWritingThroughIt: a forced
// checkout into a directory whose "sub" is a link to elsewhere, of a tree
// with sub/file, removes the link and makes a directory.
func TestCheckoutReplacesAPlantedLinkInsteadOfWritingThroughIt(t *testing.T) {
	f, dst, out := osFixture(t)
	id := f.commit(objects.ZeroID, put("sub/file", "mine"), put("sub/secret", "overwritten?"))
	symlink(t, out, filepath.Join(dst, "sub"))
	before := listing(t, out)
	if _, err := worktree.Checkout(f.snap(), id, dst, f.opts()); !errors.Is(err, worktree.ErrNotEmpty) {
		t.Fatalf("unforced checkout into the planted directory: %v, want ErrNotEmpty", err)
	}
	f.forcedCheckout(id, dst)
	outsideUntouched(t, out, before)
	realDirectory(t, filepath.Join(dst, "sub"))
}

// TestSwitchNeverWritesThroughALinkFromAnEarlierCommit: revision A has a
// link "d" to a directory outside, revision B a directory "d" with files;
// switching A to B removes the link before writing d/file.
func TestSwitchNeverWritesThroughALinkFromAnEarlierCommit(t *testing.T) {
	f, dst, out := osFixture(t)
	a := f.commit(objects.ZeroID, link("d", out), put("x", "1"))
	b := f.commit(a, del("d"), put("d/secret", "through the link?"), put("d/new", "n"))
	f.checkout(a, dst)
	before := listing(t, out)
	if _, err := mustOpen(t, dst, f.opts()).Switch(f.snap(), b); err != nil {
		t.Fatal(err)
	}
	outsideUntouched(t, out, before)
	realDirectory(t, filepath.Join(dst, "d"))
}

// TestSwitchRefusesATrackedDirectoryReplacedByALink: the user replaced the
// tracked directory "d" by a link to elsewhere; a switch that changes d/f
// and deletes d/g refuses, and forced, replaces the link: the files behind
// it are neither written nor removed.
func TestSwitchRefusesATrackedDirectoryReplacedByALink(t *testing.T) {
	f, dst, out := osFixture(t)
	write(t, filepath.Join(out, "f"), "outside f\n", 0o644)
	write(t, filepath.Join(out, "g"), "outside g\n", 0o644)
	a := f.commit(objects.ZeroID, put("d/f", "1"), put("d/g", "g"))
	b := f.commit(a, put("d/f", "2"), del("d/g"))
	f.checkout(a, dst)
	os.RemoveAll(filepath.Join(dst, "d"))
	symlink(t, out, filepath.Join(dst, "d"))
	before := listing(t, out)
	_, err := mustOpen(t, dst, f.opts()).Switch(f.snap(), b)
	var lc *worktree.LocalChangesError
	if !errors.As(err, &lc) || strings.Join(lc.Paths, ",") != "d,d/f,d/g" {
		t.Fatalf("switch through a replaced directory: %v, want local changes at d,d/f,d/g", err)
	}
	outsideUntouched(t, out, before)
	o := f.opts()
	o.Force = true
	if _, err := mustOpen(t, dst, o).Switch(f.snap(), b); err != nil {
		t.Fatal(err)
	}
	outsideUntouched(t, out, before)
	if got, _ := os.ReadFile(filepath.Join(dst, "d/f")); string(got) != "2" {
		t.Fatalf("d/f holds %q after the forced switch", got)
	}
}

// craftedSource serves hand-encoded trees, decoded without validation, as
// a store with a bug (or a future format) might: checkout's own checks are
// all that stands between such a tree and the disk.
type craftedSource struct {
	trees map[objects.ID][]byte
	blobs map[objects.ID][]byte
	cs    map[objects.ID]*objects.Changeset
}

func (c *craftedSource) Changeset(id objects.ID) (*objects.Changeset, error) { return c.cs[id], nil }
func (c *craftedSource) Blob(id objects.ID) ([]byte, error)                  { return c.blobs[id], nil }
func (c *craftedSource) Tree(id objects.ID) (*objects.Tree, error) {
	b := c.trees[id]
	tr := &objects.Tree{}
	n := binary.BigEndian.Uint32(b[1:5])
	off := 5
	for i := uint32(0); i < n; i++ {
		var e objects.Entry
		e.Mode = objects.Mode(binary.BigEndian.Uint32(b[off:]))
		copy(e.ID[:], b[off+4:off+36])
		l := int(b[off+36])
		e.Name = string(b[off+37 : off+37+l])
		off += 37 + l
		tr.Entries = append(tr.Entries, e)
	}
	return tr, nil
}

// encodeTree builds a tree encoding by hand, names unchecked.
func encodeTree(es []objects.Entry) []byte {
	b := []byte{objects.FormatVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(len(es)))
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Mode))
		b = append(b, e.ID[:]...)
		b = append(b, byte(len(e.Name)))
		b = append(b, e.Name...)
	}
	return b
}

// crafted returns a source whose changeset's root holds one file named
// name (inside a directory "sub" when nested).
func crafted(name string, nested bool) (*craftedSource, objects.ID) {
	c := &craftedSource{trees: map[objects.ID][]byte{}, blobs: map[objects.ID][]byte{}, cs: map[objects.ID]*objects.Changeset{}}
	blob := []byte("payload")
	bid := objects.BlobID(blob)
	c.blobs[bid] = blob
	enc := encodeTree([]objects.Entry{{Name: name, Mode: objects.ModeFile, ID: bid}})
	root := objects.IDOf(objects.KindTree, enc)
	c.trees[root] = enc
	if nested {
		enc = encodeTree([]objects.Entry{{Name: "sub", Mode: objects.ModeDir, ID: root}})
		root = objects.IDOf(objects.KindTree, enc)
		c.trees[root] = enc
	}
	cs := objects.BlobID([]byte("changeset " + name))
	c.cs[cs] = &objects.Changeset{Root: root, Generation: 1}
	return c, cs
}

// TestCheckoutRefusesCraftedNames hand-encodes trees with names no tree may
// hold (the objects decoder rejects them, which the test checks too) and
// feeds them to checkout through a source that does not: each is refused
// with ErrUnsafeTree before anything is written.
func TestCheckoutRefusesCraftedNames(t *testing.T) {
	for _, name := range []string{"..", ".", "a/b", "../../escape", "/abs", "x\x00y", "", ".git", ".GIT", ".Git",
		worktree.MetaDir, ".SWARMOPS-TREE"} {
		for _, nested := range []bool{false, true} {
			src, id := crafted(name, nested)
			leaf := encodeTree([]objects.Entry{{Name: name, Mode: objects.ModeFile, ID: objects.BlobID(nil)}})
			if _, err := objects.DecodeTree(leaf); objects.ValidName(name) != nil && err == nil {
				t.Errorf("%q: the objects decoder accepts the crafted tree", name)
			}
			base := t.TempDir()
			dst := filepath.Join(base, "a", "dst")
			before := listing(t, base)
			_, err := worktree.Checkout(src, id, dst, worktree.Options{})
			if !errors.Is(err, worktree.ErrUnsafeTree) {
				t.Errorf("name %q (nested %v): checkout error %v, want ErrUnsafeTree", name, nested, err)
			}
			after := listing(t, base, "a/dst/"+worktree.MetaDir)
			delete(after, "a")
			delete(after, "a/dst")
			delete(after, "a/dst/"+worktree.MetaDir)
			if d := diffListings(before, after); len(d) > 0 {
				t.Errorf("name %q: the refused checkout wrote: %v", name, d)
			}
		}
	}
}

// TestCheckoutRefusesTheStoreDirectory is the reported attack: a change
// list commits .swarmops/checkpoint, and a forced checkout into the
// directory holding the store at .swarmops would overwrite it. The
// checkout refuses, the store still works, and ValidatePath refuses the
// path for the change list.
func TestCheckoutRefusesTheStoreDirectory(t *testing.T) {
	dst := t.TempDir()
	f := newFixture(t, vfs.OS(), filepath.Join(dst, ".swarmops"))
	id := f.commit(objects.ZeroID, put(".swarmops/checkpoint", "garbage"), put("ok", "fine"))
	o := f.opts()
	o.Force = true
	if _, err := worktree.Checkout(f.snap(), id, dst, o); !errors.Is(err, worktree.ErrUnsafeTree) {
		t.Fatalf("checkout over the store: %v, want ErrUnsafeTree", err)
	}
	f.store.Close()
	s, err := core.Open(f.dir, core.Options{})
	if err != nil {
		t.Fatalf("the store no longer opens: %v", err)
	}
	s.Close()
	if err := worktree.ValidatePath(".swarmops/checkpoint", ".swarmops"); !errors.Is(err, worktree.ErrReservedPath) {
		t.Fatalf("ValidatePath of a store path: %v", err)
	}
}

// TestCheckoutRefusesTheStoreDirectoryUnderAnotherName: the store is
// reached through a link, so its name relative to the target is unknown;
// its inode gives it away.
func TestCheckoutRefusesTheStoreDirectoryUnderAnotherName(t *testing.T) {
	dst := t.TempDir()
	real := filepath.Join(dst, "data")
	f := newFixture(t, vfs.OS(), real)
	alias := filepath.Join(t.TempDir(), "alias")
	symlink(t, real, alias)
	id := f.commit(objects.ZeroID, put("data/checkpoint", "garbage"))
	o := worktree.Options{StoreDir: alias, Force: true}
	if _, err := worktree.Checkout(f.snap(), id, dst, o); !errors.Is(err, worktree.ErrUnsafeTree) {
		t.Fatalf("checkout over the store named through a link: %v, want ErrUnsafeTree", err)
	}
}

// foldFS is a case-insensitive filesystem: every name is folded to lower
// case before it reaches MemFS.
type foldFS struct{ *faultfs.MemFS }

func lc(s string) string { return strings.ToLower(s) }

func (f foldFS) Create(n string) (afero.File, error) { return f.MemFS.Create(lc(n)) }
func (f foldFS) Open(n string) (afero.File, error)   { return f.MemFS.Open(lc(n)) }
func (f foldFS) OpenFile(n string, fl int, p os.FileMode) (afero.File, error) {
	return f.MemFS.OpenFile(lc(n), fl, p)
}
func (f foldFS) Mkdir(n string, p os.FileMode) error    { return f.MemFS.Mkdir(lc(n), p) }
func (f foldFS) MkdirAll(n string, p os.FileMode) error { return f.MemFS.MkdirAll(lc(n), p) }
func (f foldFS) Remove(n string) error                  { return f.MemFS.Remove(lc(n)) }
func (f foldFS) RemoveAll(n string) error               { return f.MemFS.RemoveAll(lc(n)) }
func (f foldFS) Rename(o, n string) error               { return f.MemFS.Rename(lc(o), lc(n)) }
func (f foldFS) Stat(n string) (os.FileInfo, error)     { return f.MemFS.Stat(lc(n)) }
func (f foldFS) SyncDir(n string) error                 { return f.MemFS.SyncDir(lc(n)) }
func (f foldFS) Link(o, n string) error                 { return f.MemFS.Link(lc(o), lc(n)) }
func (f foldFS) Chmod(n string, m os.FileMode) error    { return f.MemFS.Chmod(lc(n), m) }
func (f foldFS) Chtimes(n string, a, m time.Time) error { return f.MemFS.Chtimes(lc(n), a, m) }
func (f foldFS) Lock(n string, d time.Duration) (vfs.Locked, error) {
	return f.MemFS.Lock(lc(n), d)
}
func (f foldFS) LstatIfPossible(n string) (os.FileInfo, bool, error) {
	return f.MemFS.LstatIfPossible(lc(n))
}
func (f foldFS) SymlinkIfPossible(t, n string) error { return f.MemFS.SymlinkIfPossible(t, lc(n)) }
func (f foldFS) ReadlinkIfPossible(n string) (string, error) {
	return f.MemFS.ReadlinkIfPossible(lc(n))
}

// TestCheckoutRefusesCaseCollisionsOnACaseInsensitiveFilesystem: README
// and readme are one file there; the checkout refuses the tree. On a
// case-sensitive filesystem the same tree checks out.
func TestCheckoutRefusesCaseCollisionsOnACaseInsensitiveFilesystem(t *testing.T) {
	f, m := memFixture(t)
	id := f.commit(objects.ZeroID, put("README", "upper"), put("readme", "lower"), put("Dir/x", "1"), link("dir", "/etc"))
	o := f.opts()
	o.FS = foldFS{m}
	if _, err := worktree.Checkout(f.snap(), id, "/ci", o); !errors.Is(err, worktree.ErrUnsafeTree) {
		t.Fatalf("checkout of colliding names on a case-insensitive filesystem: %v, want ErrUnsafeTree", err)
	}
	if _, err := worktree.Checkout(f.snap(), id, "/cs", f.opts()); err != nil {
		t.Fatalf("the same tree on a case-sensitive filesystem: %v", err)
	}
}

// TestCheckoutReplacesPlantedLinksAndHardLinksAtFilePaths: a forced
// checkout over a file that is a hard link to a file outside, and over a
// link to a file outside, replaces the names; the outside files keep
// their content.
func TestCheckoutReplacesPlantedLinksAndHardLinksAtFilePaths(t *testing.T) {
	f, dst, out := osFixture(t)
	write(t, filepath.Join(out, "hard"), "outside hard\n", 0o644)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(out, "hard"), filepath.Join(dst, "h")); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(out, "secret"), filepath.Join(dst, "s"))
	id := f.commit(objects.ZeroID, put("h", "new h"), put("s", "new s"))
	before := listing(t, out)
	f.forcedCheckout(id, dst)
	outsideUntouched(t, out, before)
	if got, _ := os.ReadFile(filepath.Join(dst, "s")); string(got) != "new s" {
		t.Fatalf("s holds %q", got)
	}
}

// TestCheckoutReplacesAPlantedMetadataLink: a forced checkout into a
// directory whose .swarmops-tree is a link to elsewhere writes its index
// and temporary files in a real directory of its own.
func TestCheckoutReplacesAPlantedMetadataLink(t *testing.T) {
	f, dst, out := osFixture(t)
	symlink(t, out, filepath.Join(dst, worktree.MetaDir))
	id := f.commit(objects.ZeroID, put("a", "1"))
	before := listing(t, out)
	f.forcedCheckout(id, dst)
	outsideUntouched(t, out, before)
	if fi, err := os.Lstat(filepath.Join(dst, worktree.MetaDir)); err != nil || !fi.IsDir() {
		t.Fatalf("metadata directory: %v %v", fi, err)
	}
}

// TestSnapshotRecordsLinksWithoutFollowingThem: a link to a directory
// outside is committed as a link; nothing behind it is read.
func TestSnapshotRecordsLinksWithoutFollowingThem(t *testing.T) {
	f, dst, out := osFixture(t)
	write(t, filepath.Join(dst, "a"), "1", 0o644)
	symlink(t, out, filepath.Join(dst, "l"))
	symlink(t, filepath.Join(out, "secret"), filepath.Join(dst, "lf"))
	_, s := f.adoptedSnapshot(dst)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, fmt.Sprintf("%s %s %o", c.Path, c.Data, c.Mode))
	}
	want := []string{"a 1 100644", "l " + out + " 120000", "lf " + filepath.Join(out, "secret") + " 120000"}
	if !eq(got, want) {
		t.Fatalf("snapshot changes:\n%v\nwant\n%v", got, want)
	}
}

// TestCommitPathsNeverNameReservedDirectories is ValidatePath's table.
func TestCommitPathsNeverNameReservedDirectories(t *testing.T) {
	for _, p := range []string{".git", ".git/config", "a/.git/HEAD", ".GIT/x", "a/.Git", worktree.MetaDir + "/index",
		"x/" + worktree.MetaDir, ".swarmops", ".swarmops/checkpoint", ".SwarmOps/state"} {
		if err := worktree.ValidatePath(p, ".swarmops"); !errors.Is(err, worktree.ErrReservedPath) {
			t.Errorf("ValidatePath(%q): %v, want ErrReservedPath", p, err)
		}
	}
	for _, p := range []string{"../x", "/abs", "a//b", "a/./b", ""} {
		if err := worktree.ValidatePath(p); !errors.Is(err, objects.ErrBadPath) {
			t.Errorf("ValidatePath(%q): %v, want objects.ErrBadPath", p, err)
		}
	}
	for _, p := range []string{".gitignore", "a/.github/x", "swarmops", ".swarmops2/x", "a/.swarmops/x"} {
		if err := worktree.ValidatePath(p, ".swarmops"); err != nil {
			t.Errorf("ValidatePath(%q): %v, want nil", p, err)
		}
	}
}

// TestSnapshotLeavesFileContentToTheCommit: a snapshot holds the stat data
// of the files it will commit, not their bytes: each file's change has no
// Data, only Open, so a commit of a big tree holds one chunk of it at a
// time (core.Options.CommitChunkBytes). The commit reads them, and the
// record that follows knows each file's id, so a status right after finds
// nothing changed.
func TestSnapshotLeavesFileContentToTheCommit(t *testing.T) {
	f, dst, _ := osFixture(t)
	write(t, filepath.Join(dst, "a"), "1", 0o644)
	write(t, filepath.Join(dst, "d/b"), "22", 0o755)
	wt, s := f.adoptedSnapshot(dst)
	for _, c := range s.Changes {
		if c.Data != nil || c.Open == nil {
			t.Fatalf("snapshot change %s holds %d bytes (Open set: %v); want none, read by the commit", c.Path, len(c.Data), c.Open != nil)
		}
	}
	id, err := f.store.Commit(core.CommitRequest{Changes: s.Changes})
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Record(f.snap(), id, s); err != nil {
		t.Fatal(err)
	}
	st, err := wt.Status()
	if err != nil || len(st.Changes) != 0 {
		t.Fatalf("status after the commit: %v, %v; want nothing changed", st, err)
	}
}
