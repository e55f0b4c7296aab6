package crashsweep

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// genModel is what the generator knows of the store a workload builds:
// changesets (by number, 1 the preamble's base), refs and their moves. It
// follows core's documented semantics (Land's contract in core/land.go,
// Undo's in core/oplog.go, the compare-and-swap of UpdateRefs), not its
// code, so that a disagreement shows in the reference run.
type genModel struct {
	cs    []genCS // cs[0] is unused: 0 means absent
	refs  map[string]int
	moves map[string][]genMove
}

// genCS is one changeset: its parents, full tree (path → content) and
// generation, and its delta (the changes against its first parent, in a
// canonical form).
type genCS struct {
	parents []int
	files   map[string]string
	gen     int
	delta   string
}

type genMove struct{ old, new int }

// genResult is what the model predicts for one op and what its scenario
// step needs.
type genResult struct {
	outcome   string // ok, conflict or noop
	ff        bool   // a land that fast-forwards
	label     int    // the changeset the step makes (its id: c<label>), 0 none
	expect    string // a compare-and-swap's expected value as written: c<N> or none
	ambiguous bool   // a land whose merge base the model cannot pick
}

// newGenModel is the state after the preamble: base (1) on main and on
// every agent's ref.
func newGenModel(agents int) *genModel {
	m := &genModel{refs: map[string]int{}, moves: map[string][]genMove{}}
	m.cs = []genCS{{}, {files: map[string]string{"s.txt": "base\n"}, gen: 1, delta: "s.txt=base\n;"}}
	for _, r := range append([]string{"main"}, agentRefs(agents)...) {
		m.refs[r] = 1
		m.moves[r] = []genMove{{0, 1}}
	}
	return m
}

func agentRef(a int) string { return fmt.Sprintf("agent-%d", a) }

func agentRefs(n int) []string {
	var out []string
	for a := 1; a <= n; a++ {
		out = append(out, agentRef(a))
	}
	return out
}

// clone copies the model; changesets are never changed once made, so
// they are shared.
func (m *genModel) clone() *genModel {
	n := &genModel{cs: slices.Clip(m.cs), refs: maps.Clone(m.refs), moves: map[string][]genMove{}}
	for k, v := range m.moves {
		n.moves[k] = slices.Clip(v)
	}
	return n
}

// content is what op number i (1-based) of agent a writes.
func content(i, a int) string { return fmt.Sprintf("op %d by agent-%d\n", i, a) }

// apply runs op number i of a workload on the model. ok is false when the
// op cannot run: a land onto an absent main or of an absent agent-X, a
// compare-and-swap to an absent agent-X, an undo of a ref that never
// moved.
func (m *genModel) apply(o GenOp, i int) (res genResult, ok bool) {
	res.outcome = "ok"
	own := agentRef(o.Agent)
	switch o.Kind {
	case GenCommit:
		res.label = m.commit(m.refs[own], "f-"+own+".txt", content(i, o.Agent))
	case GenAdvance:
		path := "f-" + own + ".txt"
		if o.Shared {
			path = "s.txt"
		}
		res.label = m.commit(m.refs[own], path, content(i, o.Agent))
		m.move(own, res.label)
	case GenAdvanceMain:
		res.label = m.commit(m.refs["main"], "s.txt", content(i, o.Agent))
		m.move("main", res.label)
	case GenLand:
		if m.refs[own] == 0 || m.refs["main"] == 0 {
			return res, false
		}
		res = m.land(m.refs[own], m.refs["main"])
	case GenCAS:
		if m.refs[own] == 0 {
			return res, false
		}
		return m.cas(own, o.Wrong), true
	case GenUndo:
		ref := "main"
		if o.Agent > 0 {
			ref = own
		}
		ms := m.moves[ref]
		if len(ms) == 0 {
			return res, false
		}
		last := ms[len(ms)-1]
		m.move(ref, last.old)
	case GenCheckpoint:
	}
	return res, true
}

// cas predicts a compare-and-swap of main to agent-X's value: right
// expects main's value (none when absent); wrong expects none when main
// exists and base when it does not.
func (m *genModel) cas(own string, wrong bool) genResult {
	res := genResult{outcome: "ok", expect: label(m.refs["main"])}
	if wrong {
		res.outcome, res.expect = "conflict", "none"
		if m.refs["main"] == 0 {
			res.expect = label(1)
		}
		return res
	}
	m.move("main", m.refs[own])
	return res
}

// label is how a scenario names changeset n ("none" for absence).
func label(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("c%d", n)
}

// move records a move of ref to value (0: delete).
func (m *genModel) move(ref string, value int) {
	m.moves[ref] = append(m.moves[ref], genMove{m.refs[ref], value})
	if value == 0 {
		delete(m.refs, ref)
		return
	}
	m.refs[ref] = value
}

// commit makes a changeset on parent (0: a root) writing one file.
func (m *genModel) commit(parent int, path, data string) int {
	c := genCS{files: map[string]string{}, gen: 1, delta: path + "=" + data + ";"}
	if parent != 0 {
		p := m.cs[parent]
		c.parents, c.files, c.gen = []int{parent}, maps.Clone(p.files), p.gen+1
	}
	c.files[path] = data
	m.cs = append(m.cs, c)
	return len(m.cs) - 1
}

// land predicts Land(change, main) by its contract: a no-op if head is
// change or head's first-parent history holds change's delta; a
// fast-forward if head is on change's first-parent history; otherwise a
// three-way
// merge against the nearest common ancestor, which conflicts on a path
// both sides changed differently, is a no-op if every path already has
// change's value, and else makes a merge changeset [head, change].
func (m *genModel) land(change, head int) genResult {
	res := genResult{outcome: "noop"}
	c := m.cs[change]
	if head == change {
		return res
	}
	for id := head; id != 0; {
		h := m.cs[id]
		if id != change && h.delta == c.delta {
			return res
		}
		if len(h.parents) == 0 {
			break
		}
		id = h.parents[0]
	}
	for id := change; len(m.cs[id].parents) > 0; {
		if id = m.cs[id].parents[0]; id == head {
			m.move("main", change)
			res.outcome, res.ff = "ok", true
			return res
		}
	}
	bases := m.mergeBases(head, change)
	if len(bases) > 1 {
		res.ambiguous = true
		return res
	}
	var base map[string]string
	if len(bases) == 1 {
		base = m.cs[bases[0]].files
	}
	h := m.cs[head]
	applied, conflict := threeWay(base, h.files, c.files)
	switch {
	case conflict:
		res.outcome = "conflict"
	case len(applied) > 0:
		res.outcome = "ok"
		files := maps.Clone(h.files)
		var delta strings.Builder
		for _, p := range slices.Sorted(maps.Keys(applied)) {
			files[p] = applied[p]
			fmt.Fprintf(&delta, "%s=%s;", p, applied[p])
		}
		m.cs = append(m.cs, genCS{parents: []int{head, change}, files: files,
			gen: max(h.gen, c.gen) + 1, delta: delta.String()})
		res.label = len(m.cs) - 1
		m.move("main", res.label)
	}
	return res
}

// threeWay applies every path change from base to theirs onto ours:
// applied holds the paths ours lacks the change of; conflict is a path
// both sides changed differently. The shipped alphabet never deletes.
func threeWay(base, ours, theirs map[string]string) (applied map[string]string, conflict bool) {
	applied = map[string]string{}
	for p, t := range theirs {
		b, inBase := base[p]
		if inBase && b == t {
			continue
		}
		o, inOurs := ours[p]
		switch {
		case inOurs && o == t:
		case inOurs == inBase && o == b:
			applied[p] = t
		default:
			return nil, true
		}
	}
	return applied, false
}

// mergeBases returns the common ancestors of a and b with the highest
// generation: one, none, or a tie that core breaks by id, which the model
// cannot predict.
func (m *genModel) mergeBases(a, b int) []int {
	anc := func(x int) map[int]bool {
		seen, _ := Reachable([]int{x}, func(n int) ([]int, error) { return m.cs[n].parents, nil })
		return seen
	}
	aa, bb := anc(a), anc(b)
	var best []int
	top := 0
	for n := range aa {
		if !bb[n] {
			continue
		}
		switch g := m.cs[n].gen; {
		case g > top:
			best, top = []int{n}, g
		case g == top:
			best = append(best, n)
		}
	}
	return best
}
