package mergequeue

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
)

// startIn starts a long sleep in a process group of its own, working in
// dir, as a check does in its tree.
func startIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sleep", "60")
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
	return c
}

// TestASweepClearsWhatAKilledRunnerLeft: a scratch directory no runner
// holds (its runner was killed) loses its check's process group and goes;
// one a runner holds keeps both.
func TestASweepClearsWhatAKilledRunnerLeft(t *testing.T) {
	tmp := t.TempDir()
	orphan := filepath.Join(tmp, scratchPrefix+"orphan")
	o := startIn(t, filepath.Join(orphan, "tree"))
	notePgid(orphan, o.Process.Pid)
	live, release, err := newScratch(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	l := startIn(t, filepath.Join(live, "tree"))
	notePgid(live, l.Process.Pid)

	sweepScratch(tmp)

	done := make(chan error, 1)
	go func() { done <- o.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the orphaned check still runs after the sweep")
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the orphaned scratch directory is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the held scratch directory went: %v", err)
	}
	if err := syscall.Kill(l.Process.Pid, 0); err != nil {
		t.Fatalf("the held directory's check was killed: %v", err)
	}
}

// treeFiles reads every file under dir but the work tree's metadata.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.IsDir() && d.Name() == ".swarmops-tree" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// TestAKeptCheckTreeHoldsExactlyEachTip: the tree a target's checks share
// holds exactly each tip it is switched to, whatever the last check left
// beside it (untracked files, a build directory), and a check that changed
// a tracked file leaves the next one a fresh checkout.
func TestAKeptCheckTreeHoldsExactlyEachTip(t *testing.T) {
	s, err := core.Create(filepath.Join(t.TempDir(), "store"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(parents []core.ID, cs ...core.Change) core.ID {
		t.Helper()
		id, err := s.Commit(core.CommitRequest{Parents: parents, Changes: cs})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a := commit(nil, core.Change{Path: "a.txt", Data: []byte("a\n")}, core.Change{Path: "d/b.txt", Data: []byte("b\n")},
		core.Change{Path: "same.txt", Data: []byte("s\n")})
	b := commit([]core.ID{a}, core.Change{Path: "a.txt", Data: []byte("A\n")}, core.Change{Path: "d/b.txt", Delete: true},
		core.Change{Path: "c.txt", Data: []byte("c\n")})
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	check := func(tip core.ID, want map[string]string, leave func(tree string)) {
		t.Helper()
		dir, release, ok := keptScratch(tmp, "store\x00main")
		if !ok {
			t.Fatal("the kept directory is held")
		}
		defer release()
		tree, err := readyTree(sn, tip, dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := treeFiles(t, tree); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the check's tree at %s: %v, want %v", tip, got, want)
		}
		leave(tree)
	}
	// A file both tips hold is not written again when the tree is kept:
	// its inode shows that the second check switched, not checked out.
	inode := func(tree string) uint64 {
		fi, err := os.Stat(filepath.Join(tree, "same.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	var first uint64
	check(a, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "same.txt": "s\n"}, func(tree string) {
		first = inode(tree)
		os.WriteFile(filepath.Join(tree, "junk.o"), []byte("x"), 0o644)
		os.MkdirAll(filepath.Join(tree, "build", "out"), 0o755)
		os.WriteFile(filepath.Join(tree, "build", "out", "bin"), []byte("x"), 0o755)
		os.WriteFile(filepath.Join(tree, "d", "tmp"), []byte("x"), 0o644)
	})
	check(b, map[string]string{"a.txt": "A\n", "c.txt": "c\n", "same.txt": "s\n"}, func(tree string) {
		if inode(tree) != first {
			t.Error("the second check's tree was checked out afresh, not switched")
		}
		os.WriteFile(filepath.Join(tree, "same.txt"), []byte("changed by the check\n"), 0o644)
	})
	check(a, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "same.txt": "s\n"}, func(string) {})
}

// releasedKeptScratch makes the kept directory of key in a fresh
// temporary directory, as a check that has run and let it go leaves it:
// tmp holds the kept directories, dir is key's.
func releasedKeptScratch(t *testing.T, key string) (tmp, dir string) {
	t.Helper()
	tmp = t.TempDir()
	dir, release, ok := keptScratch(tmp, key)
	if !ok {
		t.Fatal("the kept directory is held")
	}
	release()
	return tmp, dir
}

// TestASweepKeepsAKeptTreeUntilItIsIdle: a kept directory no runner holds
// stays for the next check, unless no check used it for keptIdle.
func TestASweepKeepsAKeptTreeUntilItIsIdle(t *testing.T) {
	tmp, dir := releasedKeptScratch(t, "k")
	sweepScratch(tmp)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a kept directory used just now went: %v", err)
	}
	old := time.Now().Add(-keptIdle - time.Hour)
	os.Chtimes(filepath.Join(dir, scratchLock), old, old)
	sweepScratch(tmp)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("an idle kept directory stayed: %v", err)
	}
}

// TestAKeptTreeNameSomeoneElsePlantedIsNotTaken: the kept directory's
// name is predictable; a symbolic link or a directory others can write
// in its place is passed over (the check then gets a directory of its
// own).
func TestAKeptTreeNameSomeoneElsePlantedIsNotTaken(t *testing.T) {
	tmp, dir := releasedKeptScratch(t, "k")
	os.RemoveAll(dir)
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := keptScratch(tmp, "k"); ok {
		t.Fatal("a symbolic link was taken as the kept directory")
	}
	os.Remove(dir)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if _, _, ok := keptScratch(tmp, "k"); ok {
		t.Fatal("a directory others can write was taken as the kept directory")
	}
}
