package crashsweep

import (
	"fmt"
	"strconv"
	"strings"
)

// Generated workloads (crashsim --generated): every sequence of up to
// depth operations by a few agents over a small alphabet, each swept like
// a hand-written scenario. The alphabet, for agent X (ref agent-X, store
// handle mod 2):
//
//	commitX   commit on agent-X's head, ref unmoved          own file f-X.txt
//	advX      commit --advance agent-X                       own file f-X.txt
//	advXs     commit --advance agent-X                       shared file s.txt
//	mainX     commit --advance main                          shared file s.txt
//	landX     land @agent-X onto main (fast-forward, clean merge, conflict or no-op)
//	casX      ref_set main to @agent-X, expecting main's value (as the model knows it)
//	casXx     the same with a wrong expectation: must conflict
//	undoX     undo agent-X's newest move
//
// and, for no agent (handle 0): undo (main's newest move) and ckpt (an
// explicit checkpoint, which also compacts: the preamble leaves one index
// run, so a checkpoint after a write makes a second and merges the two).
//
// Every workload starts from the same preamble: init, a base commit on
// main, agent-X created at it for each agent the workload uses, and a
// checkpoint. The preamble is swept by the hand-written scenarios, so a
// generated scenario's crash points start after it (Scenario.FirstPoint).
//
// A small model of the store (genModel) runs beside the enumeration. It
// decides which operations can run (a land or a compare-and-swap needs
// agent-X to exist, an undo a move to undo) and predicts each outcome: the
// land's merge base, fast-forward, no-op and conflicts included. The
// scenario states the predicted outcome, and names the expected values by
// label, so the uncrashed reference run also checks the model against the
// store: a store that lands, merges or compares wrongly fails the
// reference run even without a crash.

// GenKind is an operation of the generated alphabet.
type GenKind uint8

// The alphabet.
const (
	GenCommit      GenKind = iota // commit on agent-X's head, ref unmoved
	GenAdvance                    // commit --advance agent-X
	GenAdvanceMain                // commit --advance main (shared file)
	GenLand                       // land @agent-X onto main
	GenCAS                        // ref_set main to @agent-X
	GenUndo                       // undo agent-X's (Agent 0: main's) newest move
	GenCheckpoint                 // explicit checkpoint (and compaction)
)

// GenOp is one operation of a generated workload. Agent is 1-based (0 for
// undo of main and for a checkpoint).
type GenOp struct {
	Kind   GenKind
	Agent  int
	Shared bool // GenAdvance: write the shared file s.txt instead of f-X.txt
	Wrong  bool // GenCAS: expect a value main does not have
}

// genTokens are the kinds' tokens (see the alphabet above), the agent
// number following.
var genTokens = map[GenKind]string{GenCommit: "commit", GenAdvance: "adv", GenAdvanceMain: "main",
	GenLand: "land", GenCAS: "cas", GenUndo: "undo", GenCheckpoint: "ckpt"}

// String is the op's token in a workload name (see the alphabet above).
func (o GenOp) String() string {
	tok, ok := genTokens[o.Kind]
	switch {
	case !ok:
		return fmt.Sprintf("op%d", o.Kind)
	case o.Kind == GenCheckpoint, o.Kind == GenUndo && o.Agent == 0:
		return tok
	case o.Kind == GenAdvance && o.Shared:
		return tok + strconv.Itoa(o.Agent) + "s"
	case o.Kind == GenCAS && o.Wrong:
		return tok + strconv.Itoa(o.Agent) + "x"
	}
	return tok + strconv.Itoa(o.Agent)
}

// alphabet lists every operation for agents 1..agents, in enumeration
// order.
func alphabet(agents int) []GenOp {
	var out []GenOp
	for a := 1; a <= agents; a++ {
		out = append(out,
			GenOp{Kind: GenCommit, Agent: a},
			GenOp{Kind: GenAdvance, Agent: a},
			GenOp{Kind: GenAdvance, Agent: a, Shared: true},
			GenOp{Kind: GenAdvanceMain, Agent: a},
			GenOp{Kind: GenLand, Agent: a},
			GenOp{Kind: GenCAS, Agent: a},
			GenOp{Kind: GenCAS, Agent: a, Wrong: true},
			GenOp{Kind: GenUndo, Agent: a})
	}
	return append(out, GenOp{Kind: GenUndo}, GenOp{Kind: GenCheckpoint})
}

// Workload is a generated sequence of operations.
type Workload []GenOp

// Name is the scenario name: "gen-" and the ops' tokens.
func (w Workload) Name() string {
	t := make([]string, len(w))
	for i, o := range w {
		t[i] = o.String()
	}
	return "gen-" + strings.Join(t, "-")
}

// Agents is the highest agent the workload uses.
func (w Workload) Agents() int {
	n := 0
	for _, o := range w {
		n = max(n, o.Agent)
	}
	return n
}

// canonical reports whether the agents appear in the order 1, 2, 3 (by
// first use). Renaming the agents of any workload this way gives exactly
// one canonical workload, so keeping only those drops every mirror image.
func (w Workload) canonical() bool {
	next := 1
	for _, o := range w {
		switch {
		case o.Agent == 0 || o.Agent < next:
		case o.Agent == next:
			next++
		default:
			return false
		}
	}
	return true
}

// ParseWorkload reads a workload back from its name (Workload.Name), so a
// reproduction line needs no enumeration. It checks only the syntax; the
// model decides whether the ops can run.
func ParseWorkload(name string) (Workload, error) {
	rest, ok := strings.CutPrefix(name, "gen-")
	if !ok || rest == "" {
		return nil, fmt.Errorf("%w: %q is not a generated workload name (gen-OP-OP-...)", ErrConfig, name)
	}
	tokens := map[string]GenOp{}
	for _, o := range alphabet(3) {
		tokens[o.String()] = o
	}
	var w Workload
	for _, t := range strings.Split(rest, "-") {
		o, ok := tokens[t]
		if !ok {
			return nil, fmt.Errorf("%w: %q: unknown operation %q", ErrConfig, name, t)
		}
		w = append(w, o)
	}
	return w, nil
}

// GenStats counts what an enumeration kept and left out.
type GenStats struct {
	Sequences  int // every sequence of 1..depth ops over the alphabet
	Mirrors    int // left out: an agent renaming of a kept workload
	Infeasible int // left out: an op that cannot run (see genModel.feasible)
	Ambiguous  int // left out: a land whose merge base is a tie the model cannot break
	Kept       int
	// How the kept workloads that end with a land end: each land counted
	// once, in the shortest workload that ends with it.
	LandFastForward, LandMerge, LandConflict, LandNoop int
}

// Enumerate lists every canonical, feasible workload of 1..depth
// operations by up to agents agents, shortest first, then in alphabet
// order, with its predicted outcomes.
func Enumerate(depth, agents int) ([]Workload, GenStats, error) {
	var st GenStats
	if depth < 1 || agents < 1 || agents > 3 {
		return nil, st, fmt.Errorf("%w: generated workloads need depth >= 1 and 1 to 3 agents (got depth %d, %d agents)", ErrConfig, depth, agents)
	}
	letters := alphabet(agents)
	var out []Workload
	var walk func(w Workload, m *genModel)
	walk = func(w Workload, m *genModel) {
		for _, o := range letters {
			nw := append(w[:len(w):len(w)], o)
			if !nw.canonical() {
				st.Mirrors += subtree(len(letters), depth-len(nw))
				continue
			}
			nm := m.clone()
			res, ok := nm.apply(o, len(nw))
			if !ok {
				st.Infeasible += subtree(len(letters), depth-len(nw))
				continue
			}
			if res.ambiguous {
				st.Ambiguous += subtree(len(letters), depth-len(nw))
				continue
			}
			st.count(o, res)
			out = append(out, nw)
			if len(nw) < depth {
				walk(nw, nm)
			}
		}
	}
	walk(nil, newGenModel(agents))
	st.Sequences = subtree(len(letters), depth) - 1
	st.Kept = len(out)
	sortWorkloads(out)
	return out, st, nil
}

// count adds one kept workload's last op to the outcome tallies.
func (st *GenStats) count(o GenOp, r genResult) {
	switch {
	case o.Kind == GenLand && r.outcome == "conflict":
		st.LandConflict++
	case o.Kind == GenLand && r.outcome == "noop":
		st.LandNoop++
	case o.Kind == GenLand && r.ff:
		st.LandFastForward++
	case o.Kind == GenLand:
		st.LandMerge++
	}
}

// subtree is how many sequences of 1..d more ops start with a given
// prefix, plus the prefix itself: 1 + n + n^2 + ... + n^d.
func subtree(n, d int) int {
	t, p := 0, 1
	for i := 0; i <= d; i++ {
		t += p
		p *= n
	}
	return t
}

// sortWorkloads orders workloads shortest first (stable: alphabet order
// within a length, as the walk produced them).
func sortWorkloads(ws []Workload) {
	byLen := map[int][]Workload{}
	maxLen := 0
	for _, w := range ws {
		byLen[len(w)] = append(byLen[len(w)], w)
		maxLen = max(maxLen, len(w))
	}
	ws = ws[:0]
	for n := 1; n <= maxLen; n++ {
		ws = append(ws, byLen[n]...)
	}
}
