package core

import (
	"errors"
	"testing"

	"github.com/swarmops/swarmops/faultfs"
)

// TestOnlyALandMovesAProtectedRef: with main protected, ref set, ref
// delete, a commit's advance and an undo of main are refused with a
// *ProtectedError naming the pattern, and write nothing; a land moves it.
// Cleared, main moves as before.
func TestOnlyALandMovesAProtectedRef(t *testing.T) {
	s, m0 := newLandStore(t)
	m1 := advanceMain(t, s, puts("one", 1))
	if err := s.Protect("main", true); err != nil {
		t.Fatal(err)
	}
	side := commitChanges(t, s, m0, puts("side", 1))
	info0, _ := s.Info()
	refused := func(what string, err error) {
		t.Helper()
		var pe *ProtectedError
		if !errors.As(err, &pe) || !errors.Is(err, ErrProtected) || pe.Ref != "main" || pe.Pattern != "main" {
			t.Errorf("%s of protected main: %v, want a *ProtectedError for main", what, err)
		}
	}
	refused("ref set", s.UpdateRefs(RefUpdate{Name: "main", Old: m1, New: m0}))
	refused("ref delete", s.UpdateRefs(RefUpdate{Name: "main", Old: m1}))
	_, err := s.Commit(CommitRequest{Parents: []ID{m1}, Changes: puts("adv", 1), Advance: "main"})
	refused("commit --advance", err)
	sn, _ := s.Snapshot()
	last, err := sn.Moves(MoveQuery{Limit: 1})
	if err != nil || len(last) != 1 {
		t.Fatal(last, err)
	}
	_, err = s.Undo(last[0].ID(), "")
	refused("undo", err)
	if info, _ := s.Info(); info.DurableSeq != info0.DurableSeq || info.Changesets != info0.Changesets {
		t.Errorf("refused moves wrote frames: %+v, before %+v", info, info0)
	}
	if head := refAt(t, s, "main"); head != m1 {
		t.Fatalf("main is %s, want %s", head, m1)
	}
	r, err := s.Land(side, "main", LandOptions{})
	if err != nil {
		t.Fatalf("land onto protected main: %v", err)
	}
	if head := refAt(t, s, "main"); head != r.Changeset {
		t.Fatalf("main is %s after the land, want %s", head, r.Changeset)
	}
	if err := s.Protect("main", false); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRefs(RefUpdate{Name: "main", Old: r.Changeset, New: m0}); err != nil {
		t.Fatalf("ref set of unprotected main: %v", err)
	}
}

// TestAProtectedPrefixCoversOnlyItsRefsAndAllowsCreation: release/ covers
// release/1 and not release or releases; a covered ref that does not exist
// may be created, and once it exists only a land moves it.
func TestAProtectedPrefixCoversOnlyItsRefsAndAllowsCreation(t *testing.T) {
	s, m0 := newLandStore(t)
	m1 := advanceMain(t, s, puts("one", 1))
	if err := s.Protect("release/", true); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"release/1", "release", "releases"} {
		if err := s.UpdateRefs(RefUpdate{Name: n, New: m0}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	for _, n := range []string{"release", "releases"} {
		if err := s.UpdateRefs(RefUpdate{Name: n, Old: m0, New: m1}); err != nil {
			t.Errorf("set %s (not under release/): %v", n, err)
		}
	}
	if err := s.UpdateRefs(RefUpdate{Name: "release/1", Old: m0, New: m1}); !errors.Is(err, ErrProtected) {
		t.Errorf("set release/1: %v, want ErrProtected", err)
	}
	for _, bad := range []string{"", "/", "a//", "-x/", "a..b"} {
		if err := s.Protect(bad, true); !errors.Is(err, ErrInvalid) {
			t.Errorf("Protect(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestAProtectionSurvivesCheckpointsReopensAndAPowerLoss: an acknowledged
// protect holds after a checkpoint (which drops the frame from the replay)
// and after a strict power loss, in a new process; so does one made after
// the last checkpoint (replayed from the journal).
func TestAProtectionSurvivesCheckpointsReopensAndAPowerLoss(t *testing.T) {
	mem := faultfs.NewMem()
	o := Options{FS: mem, CheckpointEvery: 4, InlineCheckpoint: true}
	s, err := Create("/s", o)
	if err != nil {
		t.Fatal(err)
	}
	m0, err := s.Commit(CommitRequest{Changes: puts("a", 1), Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Protect("main", true); err != nil {
		t.Fatal(err)
	}
	for i := range 6 { // past a checkpoint
		if _, err := s.Commit(CommitRequest{Changes: puts("b", i+1), Advance: "agent/1", Parents: parentsOf(t, s, "agent/1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Protect("agent/", true); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(faultfs.Strict, 1)
	s.Close()
	for name, fs := range map[string]*faultfs.MemFS{"reopened": mem, "after a power loss": crashed} {
		s2, err := Open("/s", Options{FS: fs})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sn, _ := s2.Snapshot()
		ps, _ := sn.Protected()
		if len(ps) != 2 || ps[0].Pattern != "agent/" || ps[1].Pattern != "main" {
			t.Errorf("%s: protected %v, want [agent/ main]", name, ps)
		}
		if err := s2.UpdateRefs(RefUpdate{Name: "agent/1", Old: refAt(t, s2, "agent/1")}); !errors.Is(err, ErrProtected) {
			t.Errorf("%s: delete of agent/1: %v, want ErrProtected", name, err)
		}
		if err := s2.UpdateRefs(RefUpdate{Name: "main", Old: m0}); !errors.Is(err, ErrProtected) {
			t.Errorf("%s: delete of main: %v, want ErrProtected", name, err)
		}
		if rep, err := s2.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
			t.Errorf("%s: verify: %v %+v", name, err, rep)
		}
		s2.Close()
	}
}

func refAt(t *testing.T, s *Store, name string) ID {
	t.Helper()
	_, id := snapRef(t, s, name)
	return id
}

// snapRef takes a snapshot of s and reads ref name in it.
func snapRef(t *testing.T, s *Store, name string) (*Snapshot, ID) {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	id, err := sn.Ref(name)
	if err != nil {
		t.Fatal(err)
	}
	return sn, id
}

func parentsOf(t *testing.T, s *Store, name string) []ID {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if id, err := sn.Ref(name); err == nil {
		return []ID{id}
	}
	return nil
}
