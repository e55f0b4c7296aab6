package core_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// moveText renders moves as "seq ref old>new agent op" lines, ids by
// their first byte, for comparisons a failure message can show.
func moveText(ms []core.RefMove) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%d %s %x>%x %s %s", m.Seq, m.Ref, m.Old[:1], m.New[:1], m.Agent, m.Op)
		if m.Undoes != 0 {
			fmt.Fprintf(&b, " undoes %d", m.Undoes)
		}
		fmt.Fprintf(&b, " %s\n", m.ID())
	}
	return b.String()
}

func moves(t testing.TB, s *core.Store, q core.MoveQuery) []core.RefMove {
	t.Helper()
	ms, err := snap(t, s).Moves(q)
	if err != nil {
		t.Fatalf("Moves(%+v): %v", q, err)
	}
	return ms
}

// TestMovesListEveryOperationWithItsAgent: commit --advance, ref updates,
// a land and an undo each appear with their agent and operation, in
// sequence order, a frame moving two refs named by seq and ref; across
// checkpoints that move the older ones to the reflog file, and a reopen.
func TestMovesListEveryOperationWithItsAgent(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, CheckpointEvery: 3, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "a")}, Agent: "ann", Advance: "main"})
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("g", "b")}, Agent: "bob"})
	if err := s.UpdateRefsAs(core.Origin{Agent: "bob"}, core.RefUpdate{Name: "feat", New: b}, core.RefUpdate{Name: "tmp", New: a}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "tmp", Old: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Land(b, "main", core.LandOptions{Agent: "cy"}); err != nil {
		t.Fatal(err)
	}
	all := moves(t, s, core.MoveQuery{})
	if len(all) != 5 {
		t.Fatalf("moves:\n%s", moveText(all))
	}
	undo, err := s.Undo(all[4].ID(), "dee")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`%d main 00>%x ann commit %d
%d feat 00>%x bob ref-create %d:feat
%d tmp 00>%x bob ref-create %d:tmp
%d tmp %x>00  ref-delete %d
%d main %x>%x cy land %d
%d main %x>%x dee undo undoes %d %d
`, all[0].Seq, a[:1], all[0].Seq, all[1].Seq, b[:1], all[1].Seq, all[1].Seq, a[:1], all[1].Seq,
		all[3].Seq, a[:1], all[3].Seq, all[4].Seq, a[:1], b[:1], all[4].Seq,
		undo.Seq, b[:1], a[:1], all[4].Seq, undo.Seq)
	check := func(when string) {
		t.Helper()
		if got := moveText(moves(t, s, core.MoveQuery{})); got != want {
			t.Fatalf("%s: moves:\n%s\nwant:\n%s", when, got, want)
		}
		if got := moveText(moves(t, s, core.MoveQuery{Refs: []string{"tmp"}})); got != strings.Join(strings.Split(want, "\n")[2:4], "\n")+"\n" {
			t.Fatalf("%s: moves of tmp:\n%s", when, got)
		}
		if got := moves(t, s, core.MoveQuery{Agents: []string{"bob"}, Limit: 1}); len(got) != 1 || got[0].Ref != "tmp" || got[0].Agent != "bob" {
			t.Fatalf("%s: bob's last move:\n%s", when, moveText(got))
		}
		if got := moves(t, s, core.MoveQuery{After: all[3].Seq}); len(got) != 2 || got[0].Op != core.OpLand {
			t.Fatalf("%s: moves after %d:\n%s", when, all[3].Seq, moveText(got))
		}
		if got := moves(t, s, core.MoveQuery{Limit: 2}); moveText(got) != strings.Join(strings.Split(want, "\n")[4:], "\n") {
			t.Fatalf("%s: the last two moves:\n%s", when, moveText(got))
		}
		rep, err := s.Verify(false, nil)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("%s: Verify: %v %+v", when, err, rep)
		}
	}
	check("before a checkpoint holds them all")
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = core.Open("/s", o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("reopened")
}

// readCounter is a memory filesystem that counts the bytes read from one
// file opened read-only.
type readCounter struct {
	*faultfs.MemFS
	path string
	n    atomic.Int64
}

func (c *readCounter) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil || name != c.path || flag != os.O_RDONLY {
		return f, err
	}
	return &countedFile{File: f, n: &c.n}, nil
}

type countedFile struct {
	afero.File
	n *atomic.Int64
}

func (f *countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// TestTheLastMovesOfALongHistoryReadOnlyTheLastChunks: listing the newest
// moves, or those after a recent sequence number, of a store with many
// checkpoints reads a few blocks of the reflog file, not all of it.
func TestTheLastMovesOfALongHistoryReadOnlyTheLastChunks(t *testing.T) {
	c := &readCounter{MemFS: faultfs.NewMem(), path: "/s/reflog"}
	o := core.Options{FS: c, CheckpointEvery: 4, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	advanceN(t, s, "main", 400)
	st, err := c.Stat("/s/reflog")
	if err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	c.n.Store(0)
	last, err := sn.Moves(core.MoveQuery{Limit: 10})
	if err != nil || len(last) != 10 {
		t.Fatalf("the last 10 moves: %d, %v", len(last), err)
	}
	// At most 3 moves a chunk at K=4, 4 chunks and the trailer before.
	if n := c.n.Load(); n > 5*512 {
		t.Fatalf("the last 10 of 400 moves read %d bytes of the %d-byte reflog; want a few chunks", n, st.Size())
	}
	c.n.Store(0)
	after, err := sn.Moves(core.MoveQuery{After: last[0].Seq - 1})
	if err != nil || moveText(after) != moveText(last) {
		t.Fatalf("moves after %d:\n%s, %v; want the same 10", last[0].Seq-1, moveText(after), err)
	}
	if n := c.n.Load(); n > 5*512 {
		t.Fatalf("the moves after a recent frame read %d bytes of the %d-byte reflog", n, st.Size())
	}
	if all, err := sn.Moves(core.MoveQuery{}); err != nil || len(all) != 400 {
		t.Fatalf("every move: %d, %v; want 400", len(all), err)
	}
}

// TestUndoReversesCreateSetAndDelete: undoing a creation deletes the ref,
// undoing a move moves it back, undoing a deletion creates it again, and
// an undo can itself be undone.
func TestUndoReversesCreateSetAndDelete(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "a")}})
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("f", "b")}})
	value := func() core.ID {
		id, err := snap(t, s).Ref("r")
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			t.Fatal(err)
		}
		return id
	}
	// Each move, then its undo, then the move again so the next applies.
	for _, u := range []core.RefUpdate{{Name: "r", New: a}, {Name: "r", Old: a, New: b}, {Name: "r", Old: b}} {
		if err := s.UpdateRefs(u); err != nil {
			t.Fatal(err)
		}
		m := moves(t, s, core.MoveQuery{Limit: 1})[0]
		undo, err := s.Undo(m.ID(), "u")
		if err != nil {
			t.Fatalf("undo %s: %v", m.ID(), err)
		}
		if got := value(); got != u.Old || undo.New != u.Old || undo.Old != u.New || undo.Undoes != m.Seq || undo.Op != core.OpUndo || undo.Agent != "u" {
			t.Fatalf("undo %s: r = %x, undo %+v; want r = %x", m.ID(), got[:2], undo, u.Old[:2])
		}
		if last := moves(t, s, core.MoveQuery{Limit: 1})[0]; last.Seq != undo.Seq || last.Undoes != m.Seq {
			t.Fatalf("the op log's last move %+v is not the undo %+v", last, undo)
		}
		redo, err := s.Undo(core.OpID{Seq: undo.Seq}, "u")
		if err != nil || value() != u.New || redo.Undoes != undo.Seq {
			t.Fatalf("undo of the undo %d: %v, r = %x; want r = %x", undo.Seq, err, value(), u.New[:2])
		}
	}
}

// TestUndoIsRefusedOnceTheRefMoved: an undo of a move that is not the
// ref's last is E_CONFLICT with the current value, also when the ref moved
// away and back to the same value, and writes nothing; ids naming no move,
// or a frame of several moves without the ref, are refused.
func TestUndoIsRefusedOnceTheRefMoved(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "a")}, Advance: "main"})
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("f", "b")}, Advance: "main"})
	first := moves(t, s, core.MoveQuery{})[0]
	var ce *core.ConflictError
	if _, err := s.Undo(first.ID(), ""); !errors.As(err, &ce) || ce.Current != b {
		t.Fatalf("undo of a move followed by another: %v; want a conflict with current %s", err, b)
	}
	second := moves(t, s, core.MoveQuery{Limit: 1})[0]
	for _, u := range []core.RefUpdate{{Name: "main", Old: b, New: a}, {Name: "main", Old: a, New: b}} {
		if err := s.UpdateRefs(u); err != nil {
			t.Fatal(err)
		}
	}
	n := len(moves(t, s, core.MoveQuery{}))
	if _, err := s.Undo(second.ID(), ""); !errors.As(err, &ce) || ce.Current != b || ce.MovedAt == 0 {
		t.Fatalf("undo after main went away and back: %v; want a conflict saying it moved since", err)
	}
	if got := len(moves(t, s, core.MoveQuery{})); got != n {
		t.Fatalf("a refused undo wrote: %d moves, want %d", got, n)
	}
	if _, err := s.Undo(core.OpID{Seq: 999}, ""); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("undo of frame 999: %v; want ErrNotFound", err)
	}
	if _, err := s.Undo(core.OpID{Seq: second.Seq, Ref: "other"}, ""); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("undo of a ref the frame did not move: %v; want ErrNotFound", err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "x", New: a}, core.RefUpdate{Name: "y", New: a}); err != nil {
		t.Fatal(err)
	}
	two := moves(t, s, core.MoveQuery{Limit: 1})[0]
	if _, err := s.Undo(core.OpID{Seq: two.Seq}, ""); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("undo of a two-ref frame without the ref: %v; want ErrInvalid", err)
	}
	u, err := s.Undo(core.OpID{Seq: two.Seq, Ref: "y"}, "")
	if err != nil {
		t.Fatalf("undo of %d:y: %v", two.Seq, err)
	}
	// The same undo again (its first answer lost) says it was done.
	if _, err := s.Undo(core.OpID{Seq: two.Seq, Ref: "y"}, ""); !errors.As(err, &ce) || ce.UndoneBy != u.Seq {
		t.Fatalf("the undo of %d:y again: %v; want a conflict naming the undo at %d", two.Seq, err, u.Seq)
	}
}

// TestOpIDsParse: SEQ and SEQ:REF parse; anything else is ErrInvalid.
func TestOpIDsParse(t *testing.T) {
	for s, want := range map[string]core.OpID{"12": {Seq: 12}, "7:main": {Seq: 7, Ref: "main"}, "3:agent/x": {Seq: 3, Ref: "agent/x"}} {
		if got, err := core.ParseOpID(s); err != nil || got != want || got.String() != s {
			t.Errorf("ParseOpID(%q) = %+v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "0", "-1", "+3", "x", "3:", "3:a b", "3:a:b", "99999999999999999999"} {
		if _, err := core.ParseOpID(s); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ParseOpID(%q): %v, want ErrInvalid", s, err)
		}
	}
}

// TestUndoOfAMoveWhoseOldValueGCRemovedSaysSo: the undo is ErrNotFound,
// naming gc's retention as the reason, and writes nothing.
func TestUndoOfAMoveWhoseOldValueGCRemovedSaysSo(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	x1 := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "one")}, Advance: "r"})
	x2 := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "two")}})
	if err := s.UpdateRefs(core.RefUpdate{Name: "r", Old: x1, New: x2}); err != nil {
		t.Fatal(err)
	}
	move := moves(t, s, core.MoveQuery{Limit: 1})[0]
	if _, err := s.GC(core.GCOptions{Retention: 0}); err != nil {
		t.Fatal(err)
	}
	n := len(moves(t, s, core.MoveQuery{}))
	_, err := s.Undo(move.ID(), "")
	if !errors.Is(err, core.ErrNotFound) || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("undo of a move whose old value gc removed: %v, want ErrNotFound naming the retention", err)
	}
	if got := len(moves(t, s, core.MoveQuery{})); got != n {
		t.Fatalf("a refused undo wrote: %d moves, want %d", got, n)
	}
}
