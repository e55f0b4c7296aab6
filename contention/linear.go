package contention

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// refInput is one operation on a ref as porcupine sees it.
type refInput struct {
	Kind string // KindRead, KindCAS or KindAdvance
	Old  string // CAS expectation
	New  string // CAS new value (KindCAS; an advance's is only known on return)
}

// refOutput is what the operation returned.
type refOutput struct {
	Unknown bool   // the writer died in flight: it may or may not have happened
	OK      bool   // the CAS won
	New     string // an advance's new changeset
	Cur     string // a read's value, or the current value a conflict reported
}

// RefModel is the sequential specification of one ref (claim C5): a read
// returns the value; a CAS from the current value wins and installs its new
// value; a CAS from any other value loses and reports the current value.
//
// An operation of unknown outcome (its writer was killed) is applied as if it
// happened whenever its expectation holds. That loses nothing: its return
// time is infinite, so the checker may also place it after every other
// operation, which is the same as its never having happened.
func RefModel(initial string) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return initial },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			st, in, out := state.(string), input.(refInput), output.(refOutput)
			switch in.Kind {
			case KindRead:
				// A read whose reader died told nobody anything.
				return out.Unknown || out.Cur == st, st
			case KindCAS, KindAdvance:
				if out.Unknown {
					if in.Kind == KindCAS && st == in.Old {
						return true, in.New
					}
					return true, st
				}
				if out.OK {
					if st != in.Old {
						return false, st
					}
					if in.Kind == KindAdvance {
						return true, out.New
					}
					return true, in.New
				}
				return st != in.Old && st == out.Cur, st
			}
			return false, st
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(refInput), output.(refOutput)
			res := "lost, is " + short(out.Cur)
			switch {
			case out.Unknown:
				res = "unknown"
			case in.Kind == KindRead:
				res = short(out.Cur)
			case out.OK && in.Kind == KindAdvance:
				res = "won → " + short(out.New)
			case out.OK:
				res = "won"
			}
			return fmt.Sprintf("%s(%s→%s) %s", in.Kind, short(in.Old), short(in.New), res)
		},
		DescribeState: func(state interface{}) string { return short(state.(string)) },
	}
}

func short(s string) string {
	if s == "" {
		return "∅"
	}
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// Histories groups the ref operations of a run's records by ref. Busy
// operations are left out: Busy means the lock was never taken, so the
// operation had no effect. A call with no completion becomes an operation
// of unknown outcome returning at infinity. An advance of unknown outcome
// cannot be modelled (its new value is unknown) and is an error.
func Histories(recs []Record) (map[string][]porcupine.Operation, error) {
	type key struct {
		w   int
		seq int64
	}
	calls := map[key]Record{}
	done := map[key]Record{}
	for _, r := range recs {
		if r.Ref == "" || (r.Kind != KindRead && r.Kind != KindCAS && r.Kind != KindAdvance) {
			continue
		}
		k := key{r.W, r.Seq}
		switch r.Ev {
		case EvCall:
			calls[k] = r
		case EvOp:
			done[k] = r
		}
	}
	out := map[string][]porcupine.Operation{}
	for k, c := range calls {
		in := refInput{Kind: c.Kind, Old: c.Old, New: c.New}
		op := porcupine.Operation{ClientId: c.W, Input: in, Call: c.Start}
		d, ok := done[k]
		switch {
		case !ok:
			if c.Kind == KindAdvance {
				return nil, fmt.Errorf("contention: writer %d op %d: an advance of unknown outcome cannot be checked", k.w, k.seq)
			}
			op.Output, op.Return = refOutput{Unknown: true}, math.MaxInt64
		case d.Err == ErrClassBusy:
			continue
		case d.Err == "":
			op.Output, op.Return = refOutput{OK: c.Kind != KindRead, New: d.New, Cur: d.Cur}, d.End
		case d.Err == ErrClassConflict:
			op.Output, op.Return = refOutput{Cur: d.Cur}, d.End
		default:
			return nil, fmt.Errorf("contention: writer %d op %d on %s failed: %s", k.w, k.seq, c.Ref, d.Err)
		}
		out[c.Ref] = append(out[c.Ref], op)
	}
	for _, h := range out {
		sort.Slice(h, func(a, b int) bool { return h[a].Call < h[b].Call })
	}
	return out, nil
}

// FinalRead is a read of ref made after every writer stopped, appended to a
// history so the checker must also explain the value the ref ended with.
func FinalRead(value string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: -1, Input: refInput{Kind: KindRead}, Call: call,
		Output: refOutput{Cur: value}, Return: ret}
}

// CheckRef checks one ref's history. A checker that runs out of time is a
// failure (porcupine.Unknown), never a pass.
func CheckRef(initial string, history []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(RefModel(initial), history, timeout)
}

// DescribeHistory renders a history one operation a line, by call time, in
// microseconds from t0, for reading a failed check by eye.
func DescribeHistory(h []porcupine.Operation, t0 int64) string {
	h = append([]porcupine.Operation(nil), h...)
	sort.Slice(h, func(a, b int) bool { return h[a].Call < h[b].Call })
	m := RefModel("")
	var b strings.Builder
	for _, op := range h {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprint((op.Return - t0) / 1000)
		}
		fmt.Fprintf(&b, "w%-3d %9d %9s  %s\n", op.ClientId, (op.Call-t0)/1000, ret, m.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// SplitConflicts separates the CAS operations that lost (and returned) from
// the rest of a history.
//
// Why: porcupine's search is exponential in the number of state-preserving
// operations pending around one state change. 31 losers queued on the writer
// lock behind each winner are exactly that, and a 32-writer history of a few
// thousand operations on one ref does not finish in minutes. The rest of the
// history (wins, reads, unknowns) checks in milliseconds, and the losers are
// checked by CheckConflicts. Histories with few writers per ref are checked
// whole (CheckRef) by the multi-ref spec.
func SplitConflicts(h []porcupine.Operation) (rest, conflicts []porcupine.Operation) {
	for _, op := range h {
		in, out := op.Input.(refInput), op.Output.(refOutput)
		if in.Kind != KindRead && !out.Unknown && !out.OK {
			conflicts = append(conflicts, op)
		} else {
			rest = append(rest, op)
		}
	}
	return rest, conflicts
}

// CheckConflicts checks every losing CAS against the winners: its
// expectation was not the value it reports, and the value it reports was
// the ref's value at some moment within the operation's interval — written
// by a winner called before the loser returned (or the initial value), and
// not replaced by a winner that returned before the loser was called. These
// are the conditions under which a loser can be placed in a linearization of
// the winners; it returns every violation found.
func CheckConflicts(initial string, h []porcupine.Operation) []string {
	installed := map[string]porcupine.Operation{}
	replaced := map[string]porcupine.Operation{}
	for _, op := range h {
		in, out := op.Input.(refInput), op.Output.(refOutput)
		if in.Kind == KindRead || !(out.OK || out.Unknown) {
			continue
		}
		nv := in.New
		if in.Kind == KindAdvance {
			nv = out.New
		}
		if nv != "" {
			installed[nv] = op
		}
		replaced[in.Old] = op
	}
	var bad []string
	for _, op := range h {
		in, out := op.Input.(refInput), op.Output.(refOutput)
		if in.Kind == KindRead || out.OK || out.Unknown {
			continue
		}
		desc := fmt.Sprintf("writer %d %s(%s→%s) lost reporting %s", op.ClientId, in.Kind, short(in.Old), short(in.New), short(out.Cur))
		if out.Cur == in.Old {
			bad = append(bad, desc+": its own expectation")
			continue
		}
		if out.Cur != initial {
			w, ok := installed[out.Cur]
			if !ok {
				bad = append(bad, desc+": a value no CAS installed")
				continue
			}
			if w.Call > op.Return {
				bad = append(bad, desc+": installed only after the loser returned")
				continue
			}
		}
		if r, ok := replaced[out.Cur]; ok && r.Return < op.Call {
			bad = append(bad, desc+": replaced before the loser was called")
		}
	}
	return bad
}
