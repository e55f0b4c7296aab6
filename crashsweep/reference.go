package crashsweep

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// makeReference runs the scenario uncrashed on a counting memory filesystem
// and derives the oracle's expectations.
func makeReference(sc *scenarios.Scenario, weaken testknobs.Weakening) (*reference, error) {
	mem := faultfs.NewMem()
	cnt := faultfs.NewCounting(mem)
	cnt.StartTrace()
	r := newRun(sc, cnt, weaken)
	r.steps(sc.Steps)
	cnt.StopTrace()
	ref := &reference{sc: sc, ops: r.ops, order: r.order, trace: cnt.Trace(), calls: cnt.Total(), counts: cnt.Snapshot()}
	if r.stopped != nil {
		return nil, r.stopped
	}
	if err := checkRaces(sc, r); err != nil {
		return nil, err
	}
	cur := ref.deriveStates(r)
	// Content of every changeset, read back from the uncrashed store.
	s := r.stores[0]
	if s == nil {
		var err error
		if s, err = r.store(0); err != nil {
			return nil, fmt.Errorf("reopen after the reference run: %w", err)
		}
	}
	sn, err := s.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot after the reference run: %w", err)
	}
	got, err := observeSnapshot(sn, ref.known)
	if err != nil {
		return nil, err
	}
	if !got.equal(cur) {
		return nil, &claimError{scenarios.C1, fmt.Errorf("every operation was acknowledged, but a fresh snapshot after the run shows %s; the operations give %s (%s)", got, cur, got.diff(cur))}
	}
	if ref.content, err = readContent(sn, ref.known); err != nil {
		return nil, err
	}
	if err := ref.checkMerged(); err != nil {
		return nil, err
	}
	for _, st := range r.stores {
		if st != nil {
			if err := st.Close(); err != nil {
				return nil, fmt.Errorf("close after the reference run: %w", err)
			}
		}
	}
	return ref, nil
}

// checkRaces makes sure every race of the scenario happened in the
// reference run: a LOCK race's first lander lost at least once, and each
// second side ran.
func checkRaces(sc *scenarios.Scenario, r *run) error {
	for _, st := range racesIn(sc.Steps) {
		for _, op := range r.ops {
			if op.step == st.First && st.At == "LOCK" && op.land != nil && op.land.Attempts < 2 {
				return fmt.Errorf("race (%s): the first lander won in %d attempt(s); the race did not happen (does Land take LOCK before its CAS?)", st.Pos, op.land.Attempts)
			}
			if op.step == st.Second && !op.started {
				return fmt.Errorf("race (%s): the first side never took %s, so the second never ran", st.Pos, st.At)
			}
		}
	}
	return nil
}

// deriveStates fills in each op's position in acknowledgement order, the
// state after each op, and every changeset the run made, and returns the
// final state.
func (ref *reference) deriveStates(r *run) *state {
	ref.pos = make([]int, len(r.ops))
	for p, i := range r.order {
		ref.pos[i] = p
	}
	ref.states = []*state{{}}
	cur := &state{}
	seen := map[core.ID]bool{}
	for _, i := range r.order {
		cur = cur.apply(r.ops[i].effect)
		ref.states = append(ref.states, cur)
		for _, id := range r.ops[i].effect.changesets {
			if !seen[id] {
				seen[id] = true
				ref.known = append(ref.known, id)
			}
		}
	}
	ref.forgetCollected(r)
	return cur
}

// forgetCollected takes the changesets a gc step removed out of every state
// and out of what readers probe. A collection's removals become durable
// with the directory sync after its checkpoint's rename; a reader opening
// in between sees them, and a power loss then brings the garbage back,
// unreachable, for the next collection. The oracle does not hold their
// presence to C1–C4; every other changeset it holds as before, so a
// collection that removes one that is reachable or leased is caught.
func (ref *reference) forgetCollected(r *run) {
	gone := map[core.ID]bool{}
	for _, op := range r.ops {
		for _, id := range op.effect.drop {
			gone[id] = true
		}
	}
	if len(gone) == 0 {
		return
	}
	for _, st := range ref.states {
		for id := range gone {
			delete(st.cs, id)
		}
	}
	ref.known = slices.DeleteFunc(ref.known, func(id core.ID) bool { return gone[id] })
}

// readContent reads the hash of every file of every known changeset.
func readContent(sn *core.Snapshot, known []core.ID) (map[core.ID]map[string][32]byte, error) {
	content := map[core.ID]map[string][32]byte{}
	for _, id := range known {
		files, err := sn.Flatten(id)
		if err != nil {
			return nil, fmt.Errorf("flatten %s: %w", id.String()[:12], err)
		}
		m := map[string][32]byte{}
		for p, e := range files {
			data, err := sn.Blob(e.ID)
			if err != nil {
				return nil, fmt.Errorf("blob %s of %q: %w", e.ID.String()[:12], p, err)
			}
			m[p] = hashBytes(data)
		}
		content[id] = m
	}
	return content, nil
}

// safeReference is makeReference with a panic turned into an error.
func safeReference(sc *scenarios.Scenario, weaken testknobs.Weakening) (ref *reference, err error) {
	defer func() {
		if p := recover(); p != nil {
			ref, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return makeReference(sc, weaken)
}

// claimError is a reference-run failure that is itself a claim violation.
type claimError struct {
	claim scenarios.Claim
	err   error
}

func (e *claimError) Error() string { return e.err.Error() }
func (e *claimError) Unwrap() error { return e.err }

func racesIn(steps []scenarios.Step) []*scenarios.Step {
	var out []*scenarios.Step
	for i := range steps {
		switch steps[i].Kind {
		case scenarios.KindRace:
			out = append(out, &steps[i])
		case scenarios.KindRepeat:
			out = append(out, racesIn(steps[i].Body)...)
		}
	}
	return out
}

// traceAround formats the reference calls near crash point n.
func (ref *reference) traceAround(n int64) []string {
	var out []string
	for _, c := range ref.trace {
		if c.N < n-6 || c.N > n+2 {
			continue
		}
		mark := "  "
		if c.N == n {
			mark = "=>"
		}
		line := fmt.Sprintf("%s #%d %s %s", mark, c.N, c.Op, c.Path)
		if c.To != "" {
			line += " -> " + c.To
		}
		out = append(out, line)
	}
	if n == ref.calls+1 {
		out = append(out, fmt.Sprintf("=> #%d (after the last call: the run completed)", n))
	}
	return out
}

// opAt names the operation that was running at crash point n.
func (ref *reference) opAt(r *run) string {
	for _, op := range r.ops {
		if op.started && !op.acked {
			return fmt.Sprintf("%s at %s", op.step.Kind, op.step.Pos)
		}
	}
	return "none (between operations)"
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// Trace returns the numbered filesystem calls of a scenario's reference run
// (the crash points), one line per call, with the operation each belongs to.
func Trace(sc *scenarios.Scenario, weaken testknobs.Weakening) ([]string, error) {
	ref, err := makeReference(sc, weaken)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range ref.trace {
		line := fmt.Sprintf("#%d %s %s", c.N, c.Op, c.Path)
		if c.To != "" {
			line += " -> " + c.To
		}
		out = append(out, line)
	}
	return out, nil
}

// checkMerged compares each acknowledged land's changeset with the files
// its step says the merge gives (scenarios.Step.Merged). The recovered
// states are compared with ref.content, so after this check a crash state
// that holds such a land holds exactly the merged content written in the
// scenario, and any other content is a C6 problem there.
func (ref *reference) checkMerged() error {
	for _, op := range ref.ops {
		st := op.step
		if st.Kind != scenarios.KindLand || len(st.Merged) == 0 || op.land == nil {
			continue
		}
		have := ref.content[op.land.Changeset]
		for _, f := range st.Merged {
			if h, ok := have[f.Path]; !ok || h != hashBytes(f.Data()) {
				return &claimError{scenarios.C6, fmt.Errorf("land %s (%s): file %q is not the merged content the scenario gives", st.Change, st.Pos, f.Path)}
			}
		}
	}
	return nil
}
