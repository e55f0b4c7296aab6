package props

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
)

// protectPatterns and protectRefs are what the protect machine protects and
// moves: release/ covers release/1 but not releasex, agent/x is a name.
var (
	protectPatterns = []string{"main", "release/", "agent/x"}
	protectRefs     = []string{"main", "release/1", "releasex", "agent/x"}
)

// protectModel is the protect machine's model: each ref's value, the
// protected patterns, and the store's newest move (what an undo reverses).
type protectModel struct {
	refs      map[string]core.ID
	protected map[string]bool
	last      struct {
		ref      string
		old, new core.ID
		ok       bool
	}
}

// covers is the model's rule for which refs a pattern protects; exactOnly
// is the canary's weaker rule, which ignores prefixes.
func (m *protectModel) covers(ref string, exactOnly bool) bool {
	for p := range m.protected {
		if p == ref || (!exactOnly && strings.HasSuffix(p, "/") && strings.HasPrefix(ref, p)) {
			return true
		}
	}
	return false
}

// protectMachine moves refs by every command that moves one (ref set,
// create and delete, a commit's advance, undo, land) on two handles of one
// store, protects and clears patterns, and checkpoints and reopens. The
// model's rule: a move of an existing, protected ref by anything but a
// land is refused with ErrProtected and changes nothing; everything else
// moves as it would unprotected.
type protectMachine struct {
	twoHandles
	m         protectModel
	exactOnly bool
	steps     int
}

// step numbers the changes the machine makes, so no two are the same.
func (pm *protectMachine) step() int { pm.steps++; return pm.steps }

func newProtectMachine(t *rapid.T, exactOnly bool) *protectMachine {
	return &protectMachine{twoHandles: newTwoHandles(t), m: protectModel{refs: map[string]core.ID{}, protected: map[string]bool{}}, exactOnly: exactOnly}
}

// result holds a move's outcome against the model: refused when the ref
// exists and is protected (and the mover is not land), applied otherwise.
func (pm *protectMachine) result(t *rapid.T, what, ref string, land bool, old, new core.ID, err error) {
	if !land && !old.IsZero() && pm.m.covers(ref, pm.exactOnly) {
		if !errors.Is(err, core.ErrProtected) {
			t.Fatalf("%s of protected %s: %v, want ErrProtected", what, ref, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s of %s: %v", what, ref, err)
	}
	if new.IsZero() {
		delete(pm.m.refs, ref)
	} else {
		pm.m.refs[ref] = new
	}
	pm.m.last.ref, pm.m.last.old, pm.m.last.new, pm.m.last.ok = ref, old, new, true
}

func (pm *protectMachine) protect(t *rapid.T) {
	p := rapid.SampledFrom(protectPatterns).Draw(t, "pattern")
	on := rapid.Bool().Draw(t, "on")
	if err := pm.handle(t).Protect(p, on); err != nil {
		t.Fatalf("Protect(%s, %v): %v", p, on, err)
	}
	if on {
		pm.m.protected[p] = true
	} else {
		delete(pm.m.protected, p)
	}
}

// refMove is ref create, set or delete from the model's value.
func (pm *protectMachine) refMove(t *rapid.T) {
	ref := rapid.SampledFrom(protectRefs).Draw(t, "ref")
	cur := pm.m.refs[ref]
	u := core.RefUpdate{Name: ref, Old: cur, New: rapid.SampledFrom(pm.values).Draw(t, "new")}
	if !cur.IsZero() && rapid.Bool().Draw(t, "delete") {
		u.New = core.ID{}
	}
	pm.result(t, "ref update", ref, false, u.Old, u.New, pm.handle(t).UpdateRefs(u))
}

// commitAdvance is commit --advance from the ref's value (or absence).
func (pm *protectMachine) commitAdvance(t *rapid.T) {
	ref := rapid.SampledFrom(protectRefs).Draw(t, "ref")
	cur := pm.m.refs[ref]
	req := core.CommitRequest{Changes: []core.Change{{Path: "a/" + ref, Data: fmt.Appendf(nil, "%d", pm.step())}}, Advance: ref}
	if !cur.IsZero() {
		req.Parents = []core.ID{cur}
	}
	id, err := pm.handle(t).Commit(req)
	pm.result(t, "commit advance", ref, false, cur, id, err)
}

// undo reverses the store's newest move.
func (pm *protectMachine) undo(t *rapid.T) {
	if !pm.m.last.ok {
		t.Skip("no move to undo")
	}
	s := pm.handle(t)
	l := pm.m.last
	_, err := s.Undo(newest(t, s).ID(), "undoer")
	pm.result(t, "undo", l.ref, false, l.new, l.old, err)
}

// land lands a change made on the ref's value: a fast-forward, or a merge
// when the change's parent is an older value.
func (pm *protectMachine) land(t *rapid.T) {
	ref := rapid.SampledFrom(protectRefs).Draw(t, "ref")
	cur := pm.m.refs[ref]
	if cur.IsZero() {
		t.Skip("land needs its target to exist")
	}
	s := pm.handle(t)
	base := cur
	if rapid.Bool().Draw(t, "fromOlder") {
		base = rapid.SampledFrom(pm.values).Draw(t, "base")
	}
	ch, err := s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{{Path: fmt.Sprintf("l/%d", pm.step()), Data: []byte(ref)}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Land(ch, ref, core.LandOptions{})
	var mc *core.MergeConflictError
	if errors.As(err, &mc) {
		return // the values share no history; a conflict moves nothing
	}
	if err != nil {
		t.Fatalf("land onto %s: %v", ref, err)
	}
	pm.result(t, "land", ref, true, cur, r.Changeset, nil)
}

// checkpoint writes a checkpoint, or reopens the second handle.
func (pm *protectMachine) checkpoint(t *rapid.T) { pm.checkpointOrReopen(t, 1) }

// check: on both handles every ref has the model's value and the
// protected patterns are the model's.
func (pm *protectMachine) check(t *rapid.T) {
	var want []string
	for p := range pm.m.protected {
		want = append(want, p)
	}
	slices.Sort(want)
	for h, s := range pm.handles {
		sn, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		refsAsModel(t, h, sn, protectRefs, pm.m.refs)
		ps, err := sn.Protected()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.Pattern)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("handle %d: protected %v; the model has %v", h, got, want)
		}
	}
}

func (pm *protectMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"protect":       pm.protect,
		"refMove":       pm.refMove,
		"commitAdvance": pm.commitAdvance,
		"undo":          pm.undo,
		"land":          pm.land,
		"checkpoint":    pm.checkpoint,
		"":              pm.check,
	}
}

// TestOnlyALandMovesAProtectedRefAgainstAModel: random protects and clears
// of names and prefixes, and every command that moves a ref, on two
// handles with checkpoints and reopens between them: no command but land
// moves an existing protected ref, and every other move goes through.
func TestOnlyALandMovesAProtectedRefAgainstAModel(t *testing.T) {
	checkSteps(t, 60, 60, machineProp(newProtectMachine, false))
}

// TestCanaryProtectPropertyCatchesAModelWithoutPrefixes runs the property
// with a model in which release/ protects no ref (only exact names): the
// store refuses moves of release/1, so the property must fail.
func TestCanaryProtectPropertyCatchesAModelWithoutPrefixes(t *testing.T) {
	expectFailure(t, 40, "a model whose protections ignore prefixes", machineProp(newProtectMachine, true))
}
