package contention

import (
	"fmt"
	"math"
	"sort"
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
				return out.Cur == st, st
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
