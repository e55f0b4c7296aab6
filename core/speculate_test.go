package core_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// specFixture is a store whose main holds f.txt, and a change a on it.
func specFixture(t *testing.T) (*core.Store, core.ID, core.ID) {
	t.Helper()
	s := mustCreate(t, filepath.Join(t.TempDir(), "store"), core.Options{})
	t.Cleanup(func() { s.Close() })
	base, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "f.txt", Data: []byte("1\n2\n3\n")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{{Path: "a.txt", Data: []byte("a\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	return s, base, a
}

func mainOf(t *testing.T, s *core.Store) core.ID {
	t.Helper()
	_, id := snapRef(t, s, "main")
	return id
}

// TestMergeOntoStacksLandsWithoutMovingTheRef: a fast-forward, a merge
// onto that, and a no-op, each against the tip before it, while main
// stays where it was; a conflict writes nothing.
func TestMergeOntoStacksLandsWithoutMovingTheRef(t *testing.T) {
	s, base, a := specFixture(t)
	b, err := s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{{Path: "f.txt", Data: []byte("1\n2\nB\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.MergeOnto(a, base, "main", core.LandOptions{})
	if err != nil || r.Changeset != a || r.NoOp {
		t.Fatalf("fast-forward: %+v, %v", r, err)
	}
	r, err = s.MergeOnto(b, a, "main", core.LandOptions{})
	if err != nil || r.NoOp {
		t.Fatalf("merge: %+v, %v", r, err)
	}
	tip := r.Changeset
	sn, _ := s.Snapshot()
	cs, err := sn.Changeset(tip)
	if err != nil || len(cs.Parents) != 2 || cs.Parents[0] != a || cs.Parents[1] != b {
		t.Fatalf("the merge %v has parents %v, want [a b] (%v)", tip, cs.Parents, err)
	}
	if r, err = s.MergeOnto(a, tip, "main", core.LandOptions{}); err != nil || !r.NoOp || r.Changeset != tip {
		t.Fatalf("a land already on the tip: %+v, %v", r, err)
	}
	if got := mainOf(t, s); got != base {
		t.Fatalf("main moved to %v", got)
	}
	c, err := s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{{Path: "f.txt", Data: []byte("1\n2\nC\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info()
	var mc *core.MergeConflictError
	if _, err := s.MergeOnto(c, tip, "main", core.LandOptions{}); !errors.As(err, &mc) || mc.Paths[0] != "f.txt" {
		t.Fatalf("conflict: %v", err)
	}
	if after, _ := s.Info(); after.Changesets != info.Changesets {
		t.Fatalf("a conflicting merge wrote %d changesets", after.Changesets-info.Changesets)
	}
	if _, err := s.MergeOnto(a, core.ID{}, "main", core.LandOptions{}); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("onto the zero id: %v, want ErrInvalid", err)
	}
}

// TestLockQueueExcludesASecondRunner: the second taker of a target's
// runner lock waits, then gets ErrBusy; another target's lock is free.
func TestLockQueueExcludesASecondRunner(t *testing.T) {
	s, _, _ := specFixture(t)
	unlock, err := s.LockQueue("main", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LockQueue("main", 0); !errors.Is(err, core.ErrBusy) {
		t.Fatalf("second runner: %v, want ErrBusy", err)
	}
	other, err := s.LockQueue("release", 0)
	if err != nil {
		t.Fatalf("another target's runner: %v", err)
	}
	other()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := s.LockQueue("main", 0)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
	if _, err := s.LockQueue("bad name", 0); err == nil {
		t.Fatal("an invalid target name was taken")
	}
}
