package crashsweep

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// GeneratedFile is the File of every generated scenario: violations name
// it, and crashsim adds --generated to their reproduction lines.
const GeneratedFile = "generated"

// genClaims are the claims a generated scenario lists. C9 (the fault sweep)
// is left to the hand-written scenarios: its rules are chosen from the whole
// trace, preamble included, and the preamble's paths are theirs.
const genClaims = "[C1, C2, C3, C4, C6, C10]"

// YAML writes the workload as a scenario file, the form the loader reads:
// crashsim --generated builds every scenario through it, and a failing
// workload can be saved and run as a hand-written one
// (crashsim --scenarios DIR). It fails if the model finds an op that
// cannot run or a land it cannot predict.
func (w Workload) YAML() ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", w.Name())
	fmt.Fprintf(&b, "description: generated workload %s (crashsim --generated); the preamble is swept by the hand-written scenarios\n", strings.Join(strings.Split(strings.TrimPrefix(w.Name(), "gen-"), "-"), " "))
	fmt.Fprintf(&b, "claims: %s\nsteps:\n", genClaims)
	b.WriteString("  - init:\n")
	b.WriteString("  - commit: {id: c1, agent: agent-0, files: {s.txt: \"base\\n\"}, advance: main}\n")
	for a := 1; a <= w.Agents(); a++ {
		fmt.Fprintf(&b, "  - ref_create: {ref: %s, to: c1}\n", agentRef(a))
	}
	b.WriteString("  - checkpoint:\n")
	m := newGenModel(w.Agents())
	for i, o := range w {
		res, ok := m.apply(o, i+1)
		if !ok {
			return nil, fmt.Errorf("%w: workload %s: op %d (%s) cannot run", ErrConfig, w.Name(), i+1, o)
		}
		if res.ambiguous {
			return nil, fmt.Errorf("%w: workload %s: op %d (%s) lands against a tie of merge bases", ErrConfig, w.Name(), i+1, o)
		}
		b.WriteString("  - " + stepYAML(o, i+1, res) + "\n")
	}
	return []byte(b.String()), nil
}

// genPreamble is how many steps the preamble of a workload has.
func (w Workload) genPreamble() int { return 3 + w.Agents() }

// stepYAML is the scenario step of op number i with the model's result.
func stepYAML(o GenOp, i int, res genResult) string {
	own := agentRef(o.Agent)
	writer := 0 // agents 1 and 3, undo of main and ckpt: handle 0; agent 2: handle 1
	if o.Agent > 0 {
		writer = (o.Agent - 1) % 2
	}
	var f []string
	add := func(format string, a ...any) { f = append(f, fmt.Sprintf(format, a...)) }
	kind := ""
	switch o.Kind {
	case GenCommit, GenAdvance, GenAdvanceMain:
		kind = "commit"
		path, parent := "f-"+own+".txt", "@"+own
		if o.Kind == GenAdvanceMain || o.Shared {
			path = "s.txt"
		}
		if o.Kind == GenAdvanceMain {
			parent = "@main"
		}
		add("id: %s", label(res.label))
		add("agent: %s", own)
		add("parents: [%q]", parent)
		add("files: {%s: %q}", path, content(i, o.Agent))
		switch o.Kind {
		case GenAdvance:
			add("advance: %s", own)
		case GenAdvanceMain:
			add("advance: main")
		}
	case GenLand:
		kind = "land"
		add("change: %q", "@"+own)
		add("onto: main")
		if res.label != 0 {
			add("id: %s", label(res.label))
		}
	case GenCAS:
		kind = "ref_set"
		add("ref: main")
		add("to: %q", "@"+own)
		add("expect: %s", res.expect)
	case GenUndo:
		kind = "undo"
		if o.Agent == 0 {
			own = "main"
		}
		add("ref: %s", own)
	case GenCheckpoint:
		return "checkpoint:"
	}
	add("writer: %d", writer)
	if res.outcome != "ok" {
		add("outcome: %s", res.outcome)
	}
	return kind + ": {" + strings.Join(f, ", ") + "}"
}

// Scenario builds the workload's scenario through the YAML loader.
func (w Workload) Scenario() (*scenarios.Scenario, error) {
	data, err := w.YAML()
	if err != nil {
		return nil, err
	}
	sc, err := scenarios.Load(GeneratedFile, data)
	if err != nil {
		return nil, fmt.Errorf("generated workload %s: %w", w.Name(), err)
	}
	sc.Preamble = w.genPreamble()
	return sc, nil
}

// Generated builds the scenarios of every workload Enumerate lists.
func Generated(depth, agents int) ([]*scenarios.Scenario, GenStats, error) {
	ws, st, err := Enumerate(depth, agents)
	if err != nil {
		return nil, st, err
	}
	out := make([]*scenarios.Scenario, 0, len(ws))
	for _, w := range ws {
		sc, err := w.Scenario()
		if err != nil {
			return nil, st, err
		}
		out = append(out, sc)
	}
	return out, st, nil
}

// SampleGenerated picks n of the workloads of exactly depth ops (every
// shorter one is a prefix of some of them) with a seeded draw: the same
// seed picks the same workloads.
func SampleGenerated(depth, agents, n int, seed uint64) ([]*scenarios.Scenario, error) {
	ws, _, err := Enumerate(depth, agents)
	if err != nil {
		return nil, err
	}
	ws = slices.DeleteFunc(ws, func(w Workload) bool { return len(w) != depth })
	r := rand.New(rand.NewPCG(seed, 0x67656e))
	r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	ws = ws[:min(n, len(ws))]
	var out []*scenarios.Scenario
	for _, w := range ws {
		sc, err := w.Scenario()
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// preambleCalls caches the number of filesystem calls of each preamble,
// per weakening (a canary changes the calls).
var preambleCalls struct {
	sync.Mutex
	m map[string]int64
}

// preambleEnd returns the number of calls of sc's preamble (0 without
// one): its first sc.Preamble steps, run alone. They make the same calls
// inside the whole scenario, since the scenario clock gives each op the
// same time in both.
func preambleEnd(sc *scenarios.Scenario, weaken testknobs.Weakening) int64 {
	if sc.Preamble <= 0 || sc.Preamble >= len(sc.Steps) {
		return 0
	}
	key := fmt.Sprintf("%d|%v|%v", weaken, sc.Options, sc.Steps[:sc.Preamble])
	preambleCalls.Lock()
	defer preambleCalls.Unlock()
	if n, ok := preambleCalls.m[key]; ok {
		return n
	}
	pre := *sc
	pre.Steps, pre.Preamble = sc.Steps[:sc.Preamble], 0
	ref, err := safeReference(&pre, weaken)
	if err != nil {
		// The whole scenario's reference run reports the failure; sweep
		// every point meanwhile.
		return 0
	}
	if preambleCalls.m == nil {
		preambleCalls.m = map[string]int64{}
	}
	preambleCalls.m[key] = ref.calls
	return ref.calls
}

// GeneratedConfig is the sweep of the generated workloads
// (crashsim --generated): every crash point after the preamble, under the
// three models (three torn seeds, as the release sweep). The crash-during-recovery sweep,
// bit flips and faults are left to the hand-written scenarios, which
// reach the same files with far fewer runs.
func GeneratedConfig() Config {
	return Config{TornSeeds: 3, RecoveryPoints: 0, Faults: false, Flips: 0, Seed: 1}
}
