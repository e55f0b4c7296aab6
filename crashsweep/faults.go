package crashsweep

import (
	"errors"
	"fmt"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// faultKinds are the faults injected per op: every call of the op in the
// reference run gets each fault once (thinned by stride in the quick sweep).
var faultKinds = []struct {
	op     faultfs.Op
	faults []string
}{
	{faultfs.OpWrite, []string{"eio", "enospc", "short"}},
	{faultfs.OpDatasync, []string{"syncfail"}},
	{faultfs.OpSync, []string{"syncfail"}},
	{faultfs.OpSyncDir, []string{"syncfail"}},
	{faultfs.OpAllocate, []string{"enospc"}},
	{faultfs.OpCreate, []string{"eio", "enospc"}},
	{faultfs.OpRename, []string{"eio"}},
	{faultfs.OpLink, []string{"eio"}},
	{faultfs.OpTruncate, []string{"eio"}},
	{faultfs.OpRead, []string{"eio"}},
}

// faultRules lists the fault rules of a scenario's C9 sweep.
func faultRules(ref *reference, stride int, seed int64) []string {
	var out []string
	for _, fk := range faultKinds {
		n := ref.counts[fk.op]
		for _, f := range fk.faults {
			for nth := int64(1); nth <= n; nth++ {
				if stride > 1 && nth != 1 && nth != n && (nth+seed)%int64(stride) != 0 {
					continue
				}
				out = append(out, fmt.Sprintf("op=%s,nth=%d,err=%s", fk.op, nth, f))
			}
		}
	}
	return out
}

// faultTask runs the scenario with one injected fault and checks C9: the
// operation hit fails with a typed error and is not acknowledged, no injected
// error is swallowed, nothing acknowledged is lost, and the store reopens,
// both as the same boot (process restart) and after a power loss.
func faultTask(ref *reference, t task, cfg *Config) taskResult {
	res := taskResult{faults: 1}
	rule, err := faultfs.ParseRule(t.rule)
	base := Violation{Scenario: ref.sc.Name, File: ref.sc.File, Fault: t.rule, Calls: ref.calls, Claim: string(scenarios.C9), Seed: cfg.Seed}
	if err != nil {
		base.Detail = "bad fault rule: " + err.Error()
		res.violations = append(res.violations, base)
		return res
	}
	mem := faultfs.NewMem()
	inj := faultfs.NewInjecting(mem, rule)
	r := newRun(ref.sc, inj, cfg.Weaken)
	r.known = ref.known
	r.check = func(err error) { inj.Check(err) }
	r.steps(ref.sc.Steps)
	r.closeAll()
	add := func(format string, a ...any) {
		v := base
		v.Detail = fmt.Sprintf(format, a...)
		res.violations = append(res.violations, v)
	}
	var failed *opRecord
	for _, op := range r.ops {
		if op.started && !op.acked {
			failed = op
			break
		}
	}
	if inj := inj.Injections(); len(inj) > 0 {
		base.Trace = ref.traceAround(inj[0].Err.Call)
	}
	if failed != nil {
		e := failed.err
		if !errors.Is(e, core.ErrIO) && !errors.Is(e, core.ErrNoSpace) && !errors.Is(e, core.ErrClosed) {
			add("%s at %s failed with an untyped error (want ErrIO, ErrNoSpace or ErrClosed): %s", failed.step.Kind, failed.step.Pos, errString(e))
		}
	}
	for _, u := range inj.Unsurfaced() {
		add("the injected %s at call %d (%s %s) never reached the caller: the store swallowed or replaced it", u.Err.Fault, u.Err.Call, u.Op, u.Path)
	}
	b := ref.boundsOf(r)
	for _, m := range []faultfs.Model{faultfs.ProcessCrash, faultfs.Strict} {
		c := mem.CrashClone(m, cfg.Seed)
		res.states++
		ps, _ := ref.checkClone(c, m, b, cfg.Weaken)
		for _, p := range ps {
			add("after the fault, reopened as a %s: (%s) %s", m, p.claim, p.detail)
		}
	}
	return res
}
