package core_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// advanceN commits n changesets onto ref (from its current value, if it
// has one), each advancing it, and returns the ids in order.
func advanceN(t testing.TB, s *core.Store, ref string, n int) []core.ID {
	t.Helper()
	var ids []core.ID
	sn := snap(t, s)
	head, err := sn.Ref(ref)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		req := core.CommitRequest{Changes: []core.Change{put("f", ref+strconv.Itoa(i))}, Advance: ref}
		if !head.IsZero() {
			req.Parents = []core.ID{head}
		}
		head = mustCommit(t, s, req)
		ids = append(ids, head)
	}
	return ids
}

// TestReflogSurvivesCheckpointsAndReopen: every move of a ref is listed,
// in order, after many checkpoints moved the older ones out of the
// checkpoint into the reflog file, both in the process that wrote them and
// in a fresh open; Verify finds the reflog file and the journal agree.
func TestReflogSurvivesCheckpointsAndReopen(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, CheckpointEvery: 8, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	a := advanceN(t, s, "a", 30)
	b := advanceN(t, s, "b", 11)
	check := func(s *core.Store, when string) {
		t.Helper()
		sn := snap(t, s)
		for ref, ids := range map[string][]core.ID{"a": a, "b": b} {
			log, err := sn.RefLog(ref)
			if err != nil {
				t.Fatalf("%s: RefLog(%s): %v", when, ref, err)
			}
			if len(log) != len(ids) {
				t.Fatalf("%s: RefLog(%s) has %d moves, want %d", when, ref, len(log), len(ids))
			}
			for i, e := range log {
				if e.New != ids[i] || (i > 0 && e.Old != ids[i-1]) || (i > 0 && e.Seq <= log[i-1].Seq) {
					t.Fatalf("%s: RefLog(%s)[%d] = %+v, want %s after %s", when, ref, i, e, ids[i], log[max(i-1, 0)].New)
				}
			}
			if id, err := sn.Ref(ref); err != nil || id != ids[len(ids)-1] {
				t.Fatalf("%s: Ref(%s) = %s, %v; want %s", when, ref, id, err, ids[len(ids)-1])
			}
		}
		rep, err := s.Verify(true, nil)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("%s: Verify: %v %+v", when, err, rep)
		}
	}
	check(s, "same process")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := m.Stat("/s/reflog"); err != nil || st.Size() == 0 {
		t.Fatalf("reflog file after 41 moves at K=8: %v, %v; want chunks", st, err)
	}
	s = mustOpen(t, "/s", o)
	check(s, "reopened")
}

// TestOldSnapshotSeesOldRefsAfterCheckpoint: a snapshot taken before a
// checkpoint moved a ref's older moves out of memory still reads the ref's
// value as of its own sequence number (read back from the reflog file).
func TestOldSnapshotSeesOldRefsAfterCheckpoint(t *testing.T) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m, CheckpointEvery: 4, InlineCheckpoint: true})
	ids := advanceN(t, s, "main", 2)
	old := snap(t, s)
	// More moves than two checkpoint intervals: the table is trimmed past
	// the old snapshot's sequence number.
	advanceN(t, s, "main", 10)
	got, err := old.Ref("main")
	if err != nil || got != ids[1] {
		t.Fatalf("old snapshot's Ref(main) = %s, %v; want %s (its value when the snapshot was taken)", got, err, ids[1])
	}
	refs, err := old.Refs()
	if err != nil || len(refs) != 1 || refs[0].ID != ids[1] {
		t.Fatalf("old snapshot's Refs() = %+v, %v; want main at %s", refs, err, ids[1])
	}
	log, err := old.RefLog("main")
	if err != nil || len(log) != 2 {
		t.Fatalf("old snapshot's RefLog(main) = %d moves, %v; want 2", len(log), err)
	}
}

// TestDamagedReflogIsCorrupt: a flipped byte in the reflog file is
// ErrCorrupt naming the file from RefLog, and a Verify problem.
func TestDamagedReflogIsCorrupt(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, CheckpointEvery: 4, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	advanceN(t, s, "main", 9)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipBit(t, m, "/s/reflog", 60)
	s, err := core.Open("/s", o)
	if err != nil {
		t.Fatalf("Open must not read the reflog file: %v", err)
	}
	defer s.Close()
	sn := snap(t, s)
	if _, err := sn.RefLog("main"); !errors.Is(err, core.ErrCorrupt) || !strings.Contains(err.Error(), "/s/reflog") {
		t.Fatalf("RefLog with a damaged reflog: %v; want ErrCorrupt naming /s/reflog", err)
	}
	rep, err := s.Verify(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || p.File == "/s/reflog"
	}
	if !found {
		t.Fatalf("Verify missed a flipped byte in the reflog: %+v", rep.Problems)
	}
}
