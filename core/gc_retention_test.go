package core

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/faultfs"
)

// retentionClock is a store's clock, moved on by the test so that
// retentions select moves deterministically.
type retentionClock struct{ ns atomic.Int64 }

func (c *retentionClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *retentionClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// retentionStore is the history of the report: main holds a; b was
// committed on main and main set back to a (b only in main's reflog); ref
// x was made from main, given c on top and deleted. The clock then moves
// on an hour, so that a gc with no retention takes b and c and one of a
// day would keep them.
func retentionStore(t *testing.T) (s *Store, clock *retentionClock, a, b, c ID) {
	t.Helper()
	clock = &retentionClock{}
	clock.ns.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	s, err := Create("/s", Options{FS: faultfs.NewMem(), Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	commit := func(req CommitRequest) ID {
		t.Helper()
		id, err := s.Commit(req)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	update := func(u RefUpdate) {
		t.Helper()
		if err := s.UpdateRefs(u); err != nil {
			t.Fatal(err)
		}
	}
	a = commit(CommitRequest{Changes: []Change{{Path: "a", Data: []byte("1")}}, Advance: "main"})
	b = commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "b", Data: []byte("2")}}, Advance: "main"})
	update(RefUpdate{Name: "main", Old: b, New: a})
	update(RefUpdate{Name: "x", New: a})
	c = commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "c", Data: []byte("3")}}, Advance: "x"})
	update(RefUpdate{Name: "x", Old: c})
	clock.advance(time.Hour)
	return s, clock, a, b, c
}

// retentionHas reports whether the store holds changeset id.
func retentionHas(t *testing.T, s *Store, id ID) bool {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, err = sn.Changeset(id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestGCAfterAShorterRetentionSkipsWhatItCollected: a gc with no
// retention takes b and c, which only reflog moves an hour old name; a gc
// of a day then finds those moves inside its retention and their
// changesets gone. They are no roots any more, so it succeeds (it failed
// with ErrNotFound for c until the moves aged past a day), keeps what the
// refs and the other moves reach, and keeps a changeset a move after the
// first gc names.
func TestGCAfterAShorterRetentionSkipsWhatItCollected(t *testing.T) {
	s, clock, a, b, c := retentionStore(t)
	if _, err := s.GC(GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if retentionHas(t, s, b) || retentionHas(t, s, c) {
		t.Fatal("a gc with no retention kept changesets only hour-old moves name")
	}
	d := commitChanges(t, s, a, []Change{{Path: "d", Data: []byte("4")}})
	for _, u := range []RefUpdate{{Name: "z", New: d}, {Name: "z", Old: d}} {
		if err := s.UpdateRefs(u); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(time.Minute)
	rep, err := s.GC(GCOptions{Retention: 24 * time.Hour})
	if err != nil {
		t.Fatalf("gc of a day after one with no retention: %v", err)
	}
	if !retentionHas(t, s, a) || !retentionHas(t, s, d) {
		t.Fatalf("gc of a day lost a or the retained d: %+v", rep)
	}
	// a: main's two moves to it and one from it, x's to it and from it;
	// d: z's two.
	if rep.ReflogRoots != 7 {
		t.Errorf("reflog roots %d, want 7 (the gone b and c not counted)", rep.ReflogRoots)
	}
	DeepClean(t, s)
	if _, err := s.GC(GCOptions{Retention: 24 * time.Hour}); err != nil {
		t.Fatalf("a second gc of a day: %v", err)
	}
	DeepClean(t, s)
}

// TestGCStillReportsAMissingChangesetARootNames: after the gc with no
// retention, ref y is made to name c, which the store no longer holds (the
// move is appended without the check a ref update makes, as if c's record
// had been lost). c is also named by x's moves from before that gc, which
// may be missing; but a live ref, and once y is deleted y's own moves
// inside the retention, must reach it, so gc fails with ErrNotFound.
func TestGCStillReportsAMissingChangesetARootNames(t *testing.T) {
	s, clock, _, _, c := retentionStore(t)
	if _, err := s.GC(GCOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := &txn.Txn{Time: clock.now(), Moves: []refs.Move{{Name: "y", New: c}}, Origin: Origin{Op: OpRefCreate}}
	if err := s.pipe.Commit(lost, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{Retention: 24 * time.Hour}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("gc with a live ref naming a missing changeset: %v, want ErrNotFound", err)
	}
	if err := s.UpdateRefs(RefUpdate{Name: "y", Old: c}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{Retention: 24 * time.Hour}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("gc with a retained move after the last gc naming a missing changeset: %v, want ErrNotFound", err)
	}
}

// TestGCKeepsAChangesetMadeInsideTheRetentionThatNothingReaches: a
// commit made without a ref (to be landed or set on one next) survives a
// gc while it is younger than the retention, and goes once it is older,
// with what only it reached.
func TestGCKeepsAChangesetMadeInsideTheRetentionThatNothingReaches(t *testing.T) {
	s, clock, a, _, _ := retentionStore(t)
	bare := commitChanges(t, s, a, []Change{{Path: "bare", Data: []byte("only here")}})
	rep, err := s.GC(GCOptions{Retention: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !retentionHas(t, s, bare) || rep.FreshRoots != 1 {
		t.Fatalf("a bare commit a moment old after gc: held %v, fresh roots %d; want it kept as 1", retentionHas(t, s, bare), rep.FreshRoots)
	}
	clock.advance(time.Hour)
	if _, err := s.GC(GCOptions{Retention: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if retentionHas(t, s, bare) {
		t.Fatal("a bare commit an hour old survived a gc with a retention of 30 minutes")
	}
	if !retentionHas(t, s, a) {
		t.Fatal("main's changeset went with the bare commit")
	}
}
