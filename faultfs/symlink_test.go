package faultfs_test

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestASymlinkIsDurableOnlyAfterItsDirectoryIsSynced checks the crash
// semantics of a link: it is a directory entry, so a power loss drops it
// unless its directory was synced, and a process crash keeps it.
func TestASymlinkIsDurableOnlyAfterItsDirectoryIsSynced(t *testing.T) {
	m := faultfs.NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.Symlink(m, "../target", "/d/l"); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.Lstat(m.CrashClone(faultfs.Strict, 1), "/d/l"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("unsynced link after a power loss: Lstat error %v, want ErrNotExist", err)
	}
	if got, err := vfs.Readlink(m.CrashClone(faultfs.ProcessCrash, 1), "/d/l"); err != nil || got != "../target" {
		t.Errorf("unsynced link after a process crash: Readlink = %q, %v; want ../target", got, err)
	}
	for seed := int64(0); seed < 8; seed++ {
		c := m.CrashClone(faultfs.Torn, seed)
		if got, err := vfs.Readlink(c, "/d/l"); err == nil && got != "../target" {
			t.Errorf("torn seed %d: a kept link holds %q", seed, got)
		}
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	for _, model := range faultfs.Models() {
		got, err := vfs.Readlink(m.CrashClone(model, 3), "/d/l")
		if err != nil || got != "../target" {
			t.Errorf("%s clone of a synced link: Readlink = %q, %v; want ../target", model, got, err)
		}
	}
}

// TestMemFSFollowsLinksAsTheKernelDoes checks resolution details the
// conformance suite does not: a relative target resolves from the link's
// directory, a loop fails with ELOOP, and creating through a dangling link
// creates its target.
func TestMemFSFollowsLinksAsTheKernelDoes(t *testing.T) {
	m := faultfs.NewMem()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.MkdirAll("/a/b", 0o755))
	must(vfs.Symlink(m, "../b2", "/a/b/up"))
	must(m.MkdirAll("/a/b2", 0o755))
	f, err := m.Create("/a/b/up/x")
	must(err)
	must(f.Close())
	if _, err := m.Stat("/a/b2/x"); err != nil {
		t.Errorf("a file created through a relative link is not at its target: %v", err)
	}
	must(vfs.Symlink(m, "loop2", "/loop1"))
	must(vfs.Symlink(m, "loop1", "/loop2"))
	if _, err := m.Stat("/loop1"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Stat of a link loop: %v, want ELOOP", err)
	}
	must(vfs.Symlink(m, "/made", "/dangling"))
	f, err = m.Create("/dangling")
	must(err)
	must(f.Close())
	if _, err := m.Stat("/made"); err != nil {
		t.Errorf("creating through a dangling absolute link did not create its target: %v", err)
	}
}

// TestMemFSTimesMoveWithChanges checks that a write moves mtime and ctime,
// a rename moves ctime only, and a coarse clock set by SetClock is used.
func TestMemFSTimesMoveWithChanges(t *testing.T) {
	m := faultfs.NewMem()
	stat := func(name string) (time.Time, vfs.Inode) {
		t.Helper()
		fi, err := vfs.Lstat(m, name)
		if err != nil {
			t.Fatal(err)
		}
		in, ok := vfs.InodeOf(fi)
		if !ok {
			t.Fatalf("no inode data for %s", name)
		}
		return fi.ModTime(), in
	}
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	m1, i1 := stat("/f")
	f.Write([]byte("x"))
	f.Close()
	m2, i2 := stat("/f")
	if !m2.After(m1) || !i2.Ctime.After(i1.Ctime) {
		t.Errorf("a write did not move mtime/ctime: %v/%v -> %v/%v", m1, i1.Ctime, m2, i2.Ctime)
	}
	if err := m.Rename("/f", "/g"); err != nil {
		t.Fatal(err)
	}
	m3, i3 := stat("/g")
	if !m3.Equal(m2) || !i3.Ctime.After(i2.Ctime) || i3.Ino != i2.Ino {
		t.Errorf("rename: mtime %v -> %v, ctime %v -> %v, ino %d -> %d; want mtime kept, ctime moved, ino kept",
			m2, m3, i2.Ctime, i3.Ctime, i2.Ino, i3.Ino)
	}
	tick := time.Unix(100, 0)
	m.SetClock(func() time.Time { return tick })
	g, _ := m.OpenFile("/g", 1, 0)
	g.Write([]byte("y"))
	g.Close()
	if m4, _ := stat("/g"); !m4.Equal(tick) {
		t.Errorf("mtime under a set clock: %v, want %v", m4, tick)
	}
}

// TestWrappersSeeSymlinkCalls checks that the symlink abilities pass
// through every wrapper as calls it counts, crashes and fails.
func TestWrappersSeeSymlinkCalls(t *testing.T) {
	m := faultfs.NewMem()
	c := faultfs.NewCounting(m)
	if err := vfs.Symlink(c, "t", "/l"); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.Readlink(c, "/l"); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.Lstat(c, "/l"); err != nil {
		t.Fatal(err)
	}
	if c.Count(faultfs.OpSymlink) != 1 || c.Count(faultfs.OpReadlink) != 1 || c.Count(faultfs.OpStat) != 1 {
		t.Errorf("counts: %v, want one symlink, one readlink, one stat", c.Snapshot())
	}
	cr := faultfs.NewCrashing(m, 1)
	if err := vfs.Symlink(cr, "t", "/l2"); !errors.Is(err, vfs.ErrCrashed) {
		t.Errorf("Symlink through a crashed wrapper: %v, want ErrCrashed", err)
	}
	if _, err := vfs.Lstat(m, "/l2"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a crashed Symlink reached the inner FS: %v", err)
	}
	in := faultfs.NewInjecting(m, faultfs.Rule{Op: faultfs.OpSymlink, Err: faultfs.FaultEIO})
	if err := vfs.Symlink(in, "t", "/l3"); !errors.Is(err, syscall.EIO) {
		t.Errorf("Symlink with an injected EIO: %v", err)
	}
}
