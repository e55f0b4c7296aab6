package props

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
)

// checkerTimeout bounds porcupine. Histories are kept small (at most a few
// dozen operations per ref), so a timeout means something is wrong, and it
// is reported as a failure, never as a pass.
const checkerTimeout = 20 * time.Second

// casRefs are the refs the concurrent property contends on; porcupine
// checks each separately.
var casRefs = []string{"main", "dev"}

// refInput is one operation on a ref: a read, or a compare-and-swap from Old
// to New (zero Old: create; zero New: delete).
type refInput struct {
	Ref      string
	Read     bool
	Old, New core.ID
}

// refOutput is what the operation returned: for a read, the value (zero:
// absent); for a CAS, whether it won and, when it lost, the current value
// the conflict reported.
type refOutput struct {
	OK  bool
	Cur core.ID
}

// refRegisterModel is the sequential specification of one ref: a register
// holding an id (zero: absent) that moves only by compare-and-swap.
var refRegisterModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			r := op.Input.(refInput).Ref
			if _, ok := by[r]; !ok {
				order = append(order, r)
			}
			by[r] = append(by[r], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, r := range order {
			out = append(out, by[r])
		}
		return out
	},
	Init: func() interface{} { return core.ID{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		cur := state.(core.ID)
		in, out := input.(refInput), output.(refOutput)
		if in.Read {
			return out.Cur == cur, cur
		}
		if in.Old == cur {
			return out.OK, in.New
		}
		return !out.OK && out.Cur == cur, cur
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(refInput), output.(refOutput)
		if in.Read {
			return fmt.Sprintf("read %s → %s", in.Ref, short(out.Cur))
		}
		if out.OK {
			return fmt.Sprintf("cas %s %s→%s: ok", in.Ref, short(in.Old), short(in.New))
		}
		return fmt.Sprintf("cas %s %s→%s: conflict (is %s)", in.Ref, short(in.Old), short(in.New), short(out.Cur))
	},
	DescribeState: func(state interface{}) string { return short(state.(core.ID)) },
}

// casFunc performs one CAS and reports it as a refOutput. The correct one is
// Store.UpdateRefs; blindCAS is a deliberately broken one.
type casFunc func(s *core.Store, in refInput) (refOutput, error)

// storeCAS is the store's own compare-and-swap.
func storeCAS(s *core.Store, in refInput) (refOutput, error) {
	err := s.UpdateRefs(core.RefUpdate{Name: in.Ref, Old: in.Old, New: in.New})
	if err == nil {
		return refOutput{OK: true}, nil
	}
	var ce *core.ConflictError
	if errors.As(err, &ce) {
		return refOutput{Cur: ce.Current}, nil
	}
	return refOutput{}, err
}

// blindCAS ignores the caller's expectation: it reads the ref and swaps from
// whatever it found, reporting success. It is the broken variant the
// linearizability check must catch.
func blindCAS(s *core.Store, in refInput) (refOutput, error) {
	for {
		sn, err := s.Snapshot()
		if err != nil {
			return refOutput{}, err
		}
		cur, err := sn.Ref(in.Ref)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return refOutput{}, err
		}
		if cur == in.New {
			return refOutput{OK: true}, nil
		}
		err = s.UpdateRefs(core.RefUpdate{Name: in.Ref, Old: cur, New: in.New})
		if err == nil {
			return refOutput{OK: true}, nil
		}
		if !errors.Is(err, core.ErrConflict) {
			return refOutput{}, err
		}
	}
}

// casPlan is one worker's list of operations, drawn up front so that rapid
// can shrink it. CAS expectations are either the worker's last read value
// (likely to win) or a drawn value (likely to lose).
type casStep struct {
	ref      string
	read     bool
	fromLast bool
	old, new int // indexes into the values; -1 is absence
}

func drawPlans(t *rapid.T) [][]casStep {
	workers := rapid.IntRange(2, 4).Draw(t, "workers")
	plans := make([][]casStep, workers)
	for w := range plans {
		n := rapid.IntRange(1, 8).Draw(t, fmt.Sprintf("ops of worker %d", w))
		for i := 0; i < n; i++ {
			l := fmt.Sprintf("w%d op%d ", w, i)
			st := casStep{
				ref:      rapid.SampledFrom(casRefs).Draw(t, l+"ref"),
				read:     rapid.IntRange(0, 3).Draw(t, l+"kind") == 0,
				fromLast: rapid.Bool().Draw(t, l+"fromLast"),
				old:      rapid.IntRange(-1, 3).Draw(t, l+"old"),
				new:      rapid.IntRange(-1, 3).Draw(t, l+"new"),
			}
			plans[w] = append(plans[w], st)
		}
	}
	return plans
}

// runCASHistory creates a store with four changesets, runs the plans on one
// handle per worker concurrently, and returns the history.
func runCASHistory(t fataler, plans [][]casStep, cas casFunc) []porcupine.Operation {
	return runCASHistoryOn(t, faultfs.NewMem(), storeDir, plans, cas)
}

// runCASHistoryOn is runCASHistory on a given filesystem and directory.
func runCASHistoryOn(t fataler, fs vfs.FS, dir string, plans [][]casStep, cas casFunc) []porcupine.Operation {
	opts := core.Options{FS: fs, LockTimeout: 10 * time.Second, CheckpointEvery: 4, Now: func() time.Time { return epoch }}
	s, err := core.Create(dir, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer s.Close()
	values := casValues(t, s)
	val := func(i int) core.ID {
		if i < 0 {
			return core.ID{}
		}
		return values[i]
	}

	var clock atomic.Int64
	var mu sync.Mutex
	var history []porcupine.Operation
	var failures []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w, plan := range plans {
		h, err := core.Open(dir, opts)
		if err != nil {
			t.Fatalf("Open handle for worker %d: %v", w, err)
		}
		defer h.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			last := map[string]core.ID{}
			var err error
			for i, st := range plan {
				in := refInput{Ref: st.ref, Read: st.read, Old: val(st.old), New: val(st.new)}
				if !st.read && st.fromLast {
					in.Old = last[st.ref]
				}
				if !st.read && in.Old == in.New {
					continue // a move to the same value says nothing
				}
				var out refOutput
				call := clock.Add(1)
				if st.read {
					out.Cur, err = crashsweep.RefOrZero(h, st.ref)
					out.OK = true
				} else {
					out, err = cas(h, in)
				}
				ret := clock.Add(1)
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("worker %d op %d %+v: %v", w, i, in, err))
				} else {
					history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
				}
				mu.Unlock()
				if st.read {
					last[st.ref] = out.Cur
				} else if out.OK {
					last[st.ref] = in.New
				} else {
					last[st.ref] = out.Cur
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("operations failed with errors other than a conflict:\n%s", strings.Join(failures, "\n"))
	}
	return history
}

// casValues commits the four changesets the refs of a CAS history move
// between.
func casValues(t fataler, s *core.Store) []core.ID {
	var values []core.ID
	for i := 0; i < 4; i++ {
		id, err := s.Commit(core.CommitRequest{
			Changes: []core.Change{{Path: "v", Data: []byte{byte(i)}}},
			Agent:   "setup", Message: fmt.Sprint("value ", i), Time: epoch,
		})
		if err != nil {
			t.Fatalf("setup commit %d: %v", i, err)
		}
		values = append(values, id)
	}
	return values
}

// fataler is what runCASHistory needs of *testing.T and *rapid.T alike.
type fataler interface {
	Fatalf(format string, args ...any)
}

// describeHistory prints a history in call order, for failure messages.
func describeHistory(h []porcupine.Operation) string {
	var b strings.Builder
	if lostThenUnseen(h) {
		b.WriteString("  (a CAS lost naming a current value that a read returning after it did not see: the conflict reported a value that was not yet durable, see claims C4 and C5)\n")
	}
	for _, op := range h {
		fmt.Fprintf(&b, "  [%3d,%3d] client %d: %s\n", op.Call, op.Return, op.ClientId, refRegisterModel.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// linearizable checks h with porcupine; a checker timeout is an error.
func linearizable(h []porcupine.Operation) (bool, error) {
	res, _ := porcupine.CheckOperationsVerbose(refRegisterModel, h, checkerTimeout)
	switch res {
	case porcupine.Ok:
		return true, nil
	case porcupine.Illegal:
		return false, nil
	default:
		return false, fmt.Errorf("porcupine gave up after %v on a history of %d operations; a timeout is a failure, not a pass", checkerTimeout, len(h))
	}
}

// TestRefCASIsLinearizablePerRef runs compare-and-swaps and reads from
// several store handles at once (as several processes would) and checks
// each ref's history against a register with porcupine (claim C5).
func TestRefCASIsLinearizablePerRef(t *testing.T) {
	overlaps := 0
	check(t, 100, func(t *rapid.T) {
		h := runCASHistory(t, drawPlans(t), storeCAS)
		overlaps += concurrentPairs(h)
		ok, err := linearizable(h)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("the ref history is not linearizable:\n%s", describeHistory(h))
		}
	})
	// A run in which no two operations of different handles overlapped
	// checked nothing about concurrency.
	if overlaps == 0 {
		t.Fatalf("no two operations of different handles overlapped in any history; the property did not exercise concurrency")
	}
	t.Logf("%d pairs of operations from different handles overlapped in time", overlaps)
}

// TestRefCASIsLinearizablePerRefOnRealFiles is the same property on the
// real filesystem (a temporary directory), where locks are kernel locks
// and syncs are real fdatasyncs.
func TestRefCASIsLinearizablePerRefOnRealFiles(t *testing.T) {
	n := 0
	check(t, 10, func(rt *rapid.T) {
		n++
		dir := path.Join(t.TempDir(), fmt.Sprint("store-", n))
		h := runCASHistoryOn(rt, vfs.OS(), dir, drawPlans(rt), storeCAS)
		ok, err := linearizable(h)
		if err != nil {
			rt.Fatal(err)
		}
		if !ok {
			rt.Fatalf("the ref history is not linearizable:\n%s", describeHistory(h))
		}
	})
}

// TestRefCASIsLinearizablePerRefWithSlowSyncs is the property on the memory
// FS with every fdatasync delayed by 2ms, which widens the window between a
// frame's append and its acknowledgement the way a real disk does.
func TestRefCASIsLinearizablePerRefWithSlowSyncs(t *testing.T) {
	rule := faultfs.MustParseRule("op=datasync,latency=2ms,persistent")
	check(t, 30, func(rt *rapid.T) {
		fs := faultfs.NewInjecting(faultfs.NewMem(), rule)
		h := runCASHistoryOn(rt, fs, storeDir, drawPlans(rt), storeCAS)
		ok, err := linearizable(h)
		if err != nil {
			rt.Fatal(err)
		}
		if !ok {
			rt.Fatalf("the ref history is not linearizable:\n%s", describeHistory(h))
		}
	})
}

// lostThenUnseen reports whether some CAS lost naming a current value v
// and a read of the same ref that started after the loss returned
// something else, with no successful move away from v that could fall in
// between: the pattern of a conflict reported from an undurable frame.
func lostThenUnseen(h []porcupine.Operation) bool {
	for _, a := range h {
		in, out := a.Input.(refInput), a.Output.(refOutput)
		if in.Read || out.OK {
			continue
		}
		for _, b := range h {
			bin, bout := b.Input.(refInput), b.Output.(refOutput)
			if !bin.Read || bin.Ref != in.Ref || b.Call <= a.Return || bout.Cur == out.Cur {
				continue
			}
			moved := false
			for _, c := range h {
				cin, cout := c.Input.(refInput), c.Output.(refOutput)
				if !cin.Read && cout.OK && cin.Ref == in.Ref && cin.New != out.Cur && c.Call < b.Return && c.Return > a.Call {
					moved = true
				}
			}
			if !moved {
				return true
			}
		}
	}
	return false
}

// concurrentPairs counts pairs of operations of different clients whose
// call-return intervals overlap.
func concurrentPairs(h []porcupine.Operation) int {
	n := 0
	for i := range h {
		for j := i + 1; j < len(h); j++ {
			if h[i].ClientId != h[j].ClientId && h[i].Call < h[j].Return && h[j].Call < h[i].Return {
				n++
			}
		}
	}
	return n
}

// TestLinearizabilityCheckCatchesBlindCAS shows the check above can fail: a
// CAS that ignores its expectation produces a history porcupine rejects.
// The first worker creates "main" and then expects it to be absent again,
// which must lose; the blind CAS reports a win.
func TestLinearizabilityCheckCatchesBlindCAS(t *testing.T) {
	plans := [][]casStep{
		{{ref: "main", old: -1, new: 0}, {ref: "main", old: -1, new: 1}},
		{{ref: "main", old: 3, new: 2}, {ref: "dev", old: -1, new: 2}},
	}
	for i := 0; i < 3; i++ {
		h := runCASHistory(t, plans, storeCAS)
		if ok, err := linearizable(h); err != nil || !ok {
			t.Fatalf("the correct CAS gave a history judged not linearizable (%v):\n%s", err, describeHistory(h))
		}
		h = runCASHistory(t, plans, blindCAS)
		ok, err := linearizable(h)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatalf("porcupine accepted the history of a CAS that ignores its expectation; the linearizability check cannot fail:\n%s", describeHistory(h))
		}
	}
}
