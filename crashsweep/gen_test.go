package crashsweep

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// TestEnumerateCountsSmallDepths pins the enumeration's counts for small
// depths, worked out by hand from the alphabet (8 ops per agent, plus undo
// of main and ckpt):
//
//   - depth 1, two agents: 18 sequences; the 8 ops of agent 2 are
//     renamings of agent 1's; all 10 others can run.
//   - depth 2 adds 18² = 324 sequences. Canonical ones start with an op of
//     agent 1 (8, then any of 18) or with one of no agent (2, then agent
//     1's 8 or another of no agent's 2): 144 + 20 = 164. Four cannot run:
//     undo-land1 (main was deleted), undo1-land1, undo1-cas1 and
//     undo1-cas1x (agent-1 was deleted).
func TestEnumerateCountsSmallDepths(t *testing.T) {
	cases := []struct {
		depth, agents                 int
		seq, mirrors, infeasible, out int
	}{
		{1, 1, 10, 0, 0, 10},
		{1, 2, 18, 8, 0, 10},
		{2, 1, 110, 0, 4, 106},
		{2, 2, 342, 168, 4, 170},
	}
	for _, c := range cases {
		ws, st, err := Enumerate(c.depth, c.agents)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sequences != c.seq || st.Mirrors != c.mirrors || st.Infeasible != c.infeasible || st.Kept != c.out || len(ws) != c.out {
			t.Errorf("depth %d, %d agents: %+v (%d workloads), want %d sequences, %d mirrors, %d infeasible, %d kept",
				c.depth, c.agents, st, len(ws), c.seq, c.mirrors, c.infeasible, c.out)
		}
	}
	ws, _, _ := Enumerate(2, 2)
	var kept []string
	for _, w := range ws {
		kept = append(kept, w.Name())
	}
	for _, name := range []string{"gen-undo-land1", "gen-undo1-land1", "gen-undo1-cas1", "gen-undo1-cas1x"} {
		if slices.Contains(kept, name) {
			t.Errorf("%s cannot run, but was kept", name)
		}
	}
}

// TestEnumerateAgreesWithBruteForce checks the walk's bookkeeping at
// depth 3 against a plain listing of every sequence: each is kept exactly
// when it is canonical and the model runs all its ops.
func TestEnumerateAgreesWithBruteForce(t *testing.T) {
	for _, agents := range []int{2, 3} {
		letters := alphabet(agents)
		want := map[string]bool{}
		var seqs func(w Workload)
		seqs = func(w Workload) {
			if len(w) > 0 && w.canonical() && runs(w) {
				want[w.Name()] = true
			}
			if len(w) == 3 {
				return
			}
			for _, o := range letters {
				seqs(append(w[:len(w):len(w)], o))
			}
		}
		seqs(nil)
		ws, st, err := Enumerate(3, agents)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, w := range ws {
			got[w.Name()] = true
		}
		if len(got) != len(want) || len(ws) != len(want) || st.Kept+st.Mirrors+st.Infeasible+st.Ambiguous != st.Sequences {
			t.Errorf("%d agents: enumerated %d (%d distinct), brute force %d; stats %+v", agents, len(ws), len(got), len(want), st)
		}
		for n := range want {
			if !got[n] {
				t.Errorf("%d agents: %s is missing", agents, n)
			}
		}
	}
}

// runs reports whether the model runs every op of w.
func runs(w Workload) bool {
	m := newGenModel(w.Agents())
	for i, o := range w {
		res, ok := m.apply(o, i+1)
		if !ok || res.ambiguous {
			return false
		}
	}
	return true
}

// parsed is the generated workload name.
func parsed(t *testing.T, name string) Workload {
	t.Helper()
	w, err := ParseWorkload(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// workloadScenario is the scenario of the generated workload name.
func workloadScenario(t *testing.T, name string) *scenarios.Scenario {
	t.Helper()
	sc, err := parsed(t, name).Scenario()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// mustTrace is Trace(sc, 0): the filesystem calls of an uncrashed run.
func mustTrace(t *testing.T, sc *scenarios.Scenario) []string {
	t.Helper()
	lines, err := Trace(sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestGeneratedOutcomesHappen: the alphabet's content choices make every
// kind of land happen, and compare-and-swaps both succeed and conflict.
func TestGeneratedOutcomesHappen(t *testing.T) {
	_, st, err := Enumerate(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if st.LandFastForward == 0 || st.LandMerge == 0 || st.LandConflict == 0 || st.LandNoop == 0 {
		t.Errorf("some kind of land never happens at depth 3: %+v", st)
	}
	for name, want := range map[string]string{
		"gen-adv1-land1":        "land: {change: \"@agent-1\", onto: main, writer: 0}",
		"gen-adv1-main2-land1":  "land: {change: \"@agent-1\", onto: main, id: c4, writer: 0}",
		"gen-adv1s-main2-land1": "outcome: conflict",
		"gen-land1":             "outcome: noop",
		"gen-cas2x":             "expect: none, writer: 1, outcome: conflict",
		"gen-undo-cas1x":        "expect: c1, writer: 0, outcome: conflict",
	} {
		y, err := parsed(t, name).YAML()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(y), want) {
			t.Errorf("%s: the scenario lacks %q:\n%s", name, want, y)
		}
	}
}

// TestGeneratedModelAgreesWithStore runs every workload of up to two ops
// uncrashed: the reference run fails if the store's outcome or a ref's
// value differs from the model's prediction.
func TestGeneratedModelAgreesWithStore(t *testing.T) {
	scs, _, err := Generated(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		if _, err := safeReference(sc, 0); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
}

// TestGeneratedCheckpointCompacts: the preamble leaves one index run, so
// a checkpoint after a write merges two (the compaction path).
func TestGeneratedCheckpointCompacts(t *testing.T) {
	sc := workloadScenario(t, "gen-adv1-ckpt")
	lines := mustTrace(t, sc)
	merged := false
	for _, l := range lines {
		merged = merged || strings.Contains(l, "rename") && strings.HasSuffix(l, "m")
	}
	if !merged {
		t.Errorf("%s: no merged index run is installed:\n%s", sc.Name, strings.Join(lines, "\n"))
	}
}

// TestGeneratedSweepSkipsThePreamble sweeps one workload: its crash points
// are the calls after the preamble, plus the point after the last call.
func TestGeneratedSweepSkipsThePreamble(t *testing.T) {
	sc := workloadScenario(t, "gen-adv1-main2-land1")
	all := mustTrace(t, sc)
	pre := preambleEnd(sc, 0)
	if pre < 20 || pre >= int64(len(all)) {
		t.Fatalf("the preamble makes %d of %d calls", pre, len(all))
	}
	rep, err := Sweep(context.Background(), []*scenarios.Scenario{sc}, Config{TornSeeds: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(all)) + 1 - pre; rep.Points != want || len(rep.Violations) != 0 {
		t.Errorf("%d points (want %d), violations %v", rep.Points, want, rep.Violations)
	}
}

func TestParseWorkload(t *testing.T) {
	for _, bad := range []string{"", "gen-", "adv1", "gen-adv1-fly2", "gen-adv1--land1", "gen-adv4"} {
		if _, err := ParseWorkload(bad); err == nil {
			t.Errorf("ParseWorkload(%q) accepted it", bad)
		}
	}
	ws, _, _ := Enumerate(3, 3)
	for _, w := range ws {
		p, err := ParseWorkload(w.Name())
		if err != nil || !slices.Equal(p, w) {
			t.Fatalf("%s reads back as %v, %v", w.Name(), p, err)
		}
	}
	if _, err := (Workload{{Kind: GenUndo, Agent: 1}, {Kind: GenLand, Agent: 1}}).YAML(); err == nil {
		t.Error("a land of a deleted agent ref was written as a scenario")
	}
}

// TestGeneratedRefsMatchModel runs every workload of up to two ops (and,
// unless -short, three) and compares the store's refs with the model's:
// each ref names the changeset the model says, and changesets the model
// counts as distinct (a merge, not a fast-forward) are distinct.
func TestGeneratedRefsMatchModel(t *testing.T) {
	depth := 3
	if testing.Short() {
		depth = 2
	}
	ws, _, err := Enumerate(depth, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if err := checkAgainstModel(w); err != nil {
			t.Errorf("%s: %v", w.Name(), err)
		}
	}
}

// checkAgainstModel runs w uncrashed and compares the result with the
// model's prediction.
func checkAgainstModel(w Workload) error {
	sc, err := w.Scenario()
	if err != nil {
		return err
	}
	m := newGenModel(w.Agents())
	for i, o := range w {
		m.apply(o, i+1)
	}
	r := newRun(sc, faultfs.NewMem(), 0)
	r.steps(sc.Steps)
	if r.stopped != nil {
		return r.stopped
	}
	defer r.closeAll()
	byID := map[core.ID]string{}
	for l, id := range r.labels {
		if o, dup := byID[id]; dup {
			return fmt.Errorf("the model's changesets %s and %s are one in the store", o, l)
		}
		byID[id] = l
	}
	s, err := r.store(0)
	if err != nil {
		return err
	}
	for _, ref := range append([]string{"main"}, agentRefs(w.Agents())...) {
		got, err := RefOrZero(s, ref)
		if err != nil {
			return err
		}
		if want := label(m.refs[ref]); byID[got] != want && !(got.IsZero() && want == "none") {
			return fmt.Errorf("ref %s names %s (%s), the model says %s", ref, byID[got], got, want)
		}
	}
	return nil
}
