package props

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
)

// undoRefs and undoAgents are the refs the undo machine moves and the
// agents that move them.
var (
	undoRefs   = []string{"main", "feature", "agent/x"}
	undoAgents = []string{"agent-1", "agent-2", "agent-3"}
)

// modelMove is one entry of the model's operation log.
type modelMove struct {
	seq      uint64
	ref      string
	old, new core.ID
	origin   core.Origin
}

func (m modelMove) String() string {
	s := fmt.Sprintf("%d %s %s>%s %q %s", m.seq, m.ref, short(m.old), short(m.new), m.origin.Agent, m.origin.Op)
	if m.origin.Undoes != 0 {
		s += fmt.Sprintf(" undoes %d", m.origin.Undoes)
	}
	return s
}

// undoModel is the model of the undo machine: each ref's value (a map) and
// the operation log (a list).
type undoModel struct {
	refs  map[string]core.ID
	moves []modelMove
}

// last returns the index in the log of ref's last move, or -1.
func (m *undoModel) last(ref string) int {
	for i := len(m.moves) - 1; i >= 0; i-- {
		if m.moves[i].ref == ref {
			return i
		}
	}
	return -1
}

// undoMachine moves refs by compare-and-swap as several agents, on two
// handles of one store (two processes), undoes random moves of the log,
// and checkpoints and reopens, holding the refs and the operation log
// against the model after every step.
type undoMachine struct {
	twoHandles
	m *undoModel
	// valueOnly mutates the model's rule for the canary: an undo succeeds
	// whenever the ref holds the move's new value.
	valueOnly bool
}

func newUndoMachine(t *rapid.T, valueOnly bool) *undoMachine {
	return &undoMachine{twoHandles: newTwoHandles(t), m: &undoModel{refs: map[string]core.ID{}}, valueOnly: valueOnly}
}

// newest returns the store's newest move.
func newest(t *rapid.T, s *core.Store) core.RefMove {
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sn.Moves(core.MoveQuery{Limit: 1})
	if err != nil || len(ms) != 1 {
		t.Fatalf("the newest move: %v, %v", ms, err)
	}
	return ms[0]
}

// move makes one compare-and-swap of a ref as an agent: a creation, a set
// or a deletion from the model's value, or one from a stale value, which
// must conflict and change nothing.
func (um *undoMachine) move(t *rapid.T) {
	ref := rapid.SampledFrom(undoRefs).Draw(t, "ref")
	agent := rapid.SampledFrom(undoAgents).Draw(t, "agent")
	cur := um.m.refs[ref]
	u := core.RefUpdate{Name: ref, Old: cur, New: rapid.SampledFrom(um.values).Draw(t, "new")}
	if !cur.IsZero() && rapid.Bool().Draw(t, "delete") {
		u.New = core.ID{}
	}
	stale := rapid.IntRange(0, 4).Draw(t, "stale") == 0
	if stale {
		if u.Old = rapid.SampledFrom(um.values).Draw(t, "staleOld"); u.Old == cur {
			u.Old = core.ID{}
		}
		if u.Old == cur || (u.Old.IsZero() && u.New.IsZero()) {
			t.Skip("no stale value differs from the ref's")
		}
	}
	if u.Old.IsZero() && u.New.IsZero() {
		t.Skip("a move from absence to absence")
	}
	s := um.handle(t)
	err := s.UpdateRefsAs(core.Origin{Agent: agent}, u)
	if stale {
		var ce *core.ConflictError
		if !errors.As(err, &ce) || ce.Current != cur {
			t.Fatalf("a move of %s from stale %s: %v; want a conflict with current %s", ref, short(u.Old), err, short(cur))
		}
		return
	}
	if err != nil {
		t.Fatalf("move %s %s>%s: %v", ref, short(u.Old), short(u.New), err)
	}
	op := core.OpRefSet
	switch {
	case u.Old.IsZero():
		op = core.OpRefCreate
	case u.New.IsZero():
		op = core.OpRefDelete
	}
	um.apply(modelMove{seq: newest(t, s).Seq, ref: ref, old: u.Old, new: u.New, origin: core.Origin{Agent: agent, Op: op}})
}

func (um *undoMachine) apply(mv modelMove) {
	if mv.new.IsZero() {
		delete(um.m.refs, mv.ref)
	} else {
		um.m.refs[mv.ref] = mv.new
	}
	um.m.moves = append(um.m.moves, mv)
}

// undo undoes a random move of the log. The model's rule: it succeeds if
// and only if the move is its ref's last; otherwise it conflicts with the
// ref's value and writes nothing.
func (um *undoMachine) undo(t *rapid.T) {
	if len(um.m.moves) == 0 {
		t.Skip("no move to undo")
	}
	i := rapid.IntRange(0, len(um.m.moves)-1).Draw(t, "undo")
	um.undoAt(t, um.handle(t), i, rapid.SampledFrom(undoAgents).Draw(t, "agent"))
}

func (um *undoMachine) undoAt(t *rapid.T, s *core.Store, i int, agent string) {
	mv := um.m.moves[i]
	got, err := s.Undo(core.OpID{Seq: mv.seq, Ref: mv.ref}, agent)
	refused := um.m.last(mv.ref) != i
	if um.valueOnly {
		refused = um.m.refs[mv.ref] != mv.new
	}
	if refused {
		var ce *core.ConflictError
		if !errors.As(err, &ce) || ce.Current != um.m.refs[mv.ref] {
			t.Fatalf("undo of %s, which is not %s's last move: %v; want a conflict with current %s", mv, mv.ref, err, short(um.m.refs[mv.ref]))
		}
		return
	}
	if err != nil {
		t.Fatalf("undo of %s, %s's last move: %v", mv, mv.ref, err)
	}
	want := modelMove{seq: got.Seq, ref: mv.ref, old: mv.new, new: mv.old, origin: core.Origin{Agent: agent, Op: core.OpUndo, Undoes: mv.seq}}
	if g := (modelMove{seq: got.Seq, ref: got.Ref, old: got.Old, new: got.New, origin: got.Origin}); g != want {
		t.Fatalf("undo of %s returned %s; want %s", mv, g, want)
	}
	um.apply(want)
}

// raceUndo is the refused undo after a concurrent move: an agent reads a
// ref's last move, another agent on the other handle moves the ref (away,
// or away and back to the same value), then the first's undo of what it
// read must conflict.
func (um *undoMachine) raceUndo(t *rapid.T) {
	ref := rapid.SampledFrom(undoRefs).Draw(t, "ref")
	i := um.m.last(ref)
	cur := um.m.refs[ref]
	if i < 0 || cur.IsZero() {
		t.Skip("the ref has no move, or does not exist")
	}
	other := rapid.SampledFrom(um.values).Draw(t, "other")
	if other == cur {
		t.Skip("no other value drawn")
	}
	h := rapid.IntRange(0, 1).Draw(t, "undoer")
	mover := um.handles[1-h]
	hops := []core.ID{other}
	if rapid.Bool().Draw(t, "andBack") {
		hops = append(hops, cur)
	}
	from := cur
	for _, to := range hops {
		if err := mover.UpdateRefsAs(core.Origin{Agent: "mover"}, core.RefUpdate{Name: ref, Old: from, New: to}); err != nil {
			t.Fatalf("the concurrent move of %s: %v", ref, err)
		}
		um.apply(modelMove{seq: newest(t, mover).Seq, ref: ref, old: from, new: to, origin: core.Origin{Agent: "mover", Op: core.OpRefSet}})
		from = to
	}
	um.undoAt(t, um.handles[h], i, "undoer")
}

// checkpoint writes a checkpoint, so the log's older moves go to the
// reflog file, or closes and reopens both handles.
func (um *undoMachine) checkpoint(t *rapid.T) { um.checkpointOrReopen(t, 0) }

// check: on both handles, every ref has the model's value, and the
// operation log is the model's, move for move.
func (um *undoMachine) check(t *rapid.T) {
	var want []string
	for _, mv := range um.m.moves {
		want = append(want, mv.String())
	}
	for h, s := range um.handles {
		sn, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		refsAsModel(t, h, sn, undoRefs, um.m.refs)
		ms, err := sn.Moves(core.MoveQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, modelMove{seq: m.Seq, ref: m.Ref, old: m.Old, new: m.New, origin: m.Origin}.String())
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("handle %d: the operation log is\n%s\nthe model's is\n%s", h, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestUndoMatchesAModelOfRefsAndTheOperationLog: random ref moves by
// several agents on two handles, undos of random moves (refused unless the
// move is its ref's last), undos refused after another agent's move, also
// one back to the same value, checkpoints and reopens, against a map of
// refs and the list of moves.
func TestUndoMatchesAModelOfRefsAndTheOperationLog(t *testing.T) {
	checkSteps(t, 60, 60, machineProp(newUndoMachine, false))
}

func (um *undoMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"move":       um.move,
		"undo":       um.undo,
		"raceUndo":   um.raceUndo,
		"checkpoint": um.checkpoint,
		"":           um.check,
	}
}

// TestCanaryUndoPropertyCatchesAValueOnlyModel runs the undo property
// with a model that lets an undo through whenever the ref holds the
// move's new value: the store refuses an undo after the ref went away and
// back, so the property must fail.
func TestCanaryUndoPropertyCatchesAValueOnlyModel(t *testing.T) {
	expectFailure(t, 40, "a model whose undo ignores moves away and back to the same value", machineProp(newUndoMachine, true))
}
