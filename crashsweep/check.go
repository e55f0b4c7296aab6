package crashsweep

import (
	"errors"
	"fmt"
	"slices"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

func hashBytes(b []byte) [32]byte { return blake3.Sum256(b) }

// postRef is the ref the post-recovery commit creates; scenarios never use it.
const postRef = "crashsweep-post"

type taskResult struct {
	points, states, faults, recoveries, flips int64
	violations                                []Violation
}

// crashTask runs the scenario to crash point t.n and checks every model's
// clone of what the crash left.
func crashTask(ref *reference, t task, ms []modelSeed, cfg *Config) taskResult {
	res := taskResult{points: 1}
	mem, r, cr := ref.runTo(t.n, cfg.Weaken)
	base := Violation{Scenario: ref.sc.Name, File: ref.sc.File, At: t.n, Calls: ref.calls, Trace: ref.traceAround(t.n)}
	add := func(v Violation, ps []problem, prefix string) {
		for _, p := range ps {
			w := v
			w.Claim = string(p.claim)
			w.Detail = prefix + p.detail
			res.violations = append(res.violations, w)
		}
	}
	if err := ref.deterministic(r, cr); err != nil {
		v := base
		v.Claim, v.Detail = "determinism", err.Error()
		res.violations = append(res.violations, v)
		return res
	}
	b := ref.boundsOf(r)
	during := "crash during " + ref.opAt(r) + ": "
	if cfg.RecoverAt == 0 {
		if !slices.ContainsFunc(ms, func(m modelSeed) bool { return m.model == faultfs.ProcessCrash }) {
			// The process model is not swept, but its reader still bounds
			// C4, so a single-model reproduction sees what the sweep saw.
			if seen := ref.instantReader(mem, cfg.Weaken); seen != nil {
				if lo, _, ok := ref.match(seen); ok && lo > b.kread {
					b.kread, b.readBy = lo, "a reader opening the store at the crash instant (process-crash clone)"
				}
			}
		}
		for _, m := range ms {
			v := base
			v.Model, v.Seed = m.model.String(), m.seed
			c := mem.CrashClone(m.model, m.seed)
			res.states++
			ps, seen := ref.checkClone(c, m.model, b, cfg.Weaken)
			add(v, ps, during)
			// The process-crash clone is also a reader that opened the store
			// at the crash instant: what it saw must survive power loss too.
			if seen != nil && seen.exists {
				if lo, _, ok := ref.match(seen); ok && lo > b.kread {
					b.kread, b.readBy = lo, "a reader opening the store at the crash instant (process-crash clone)"
				}
			}
		}
	}
	return res
}

// deterministic checks that every operation the crashed run acknowledged
// produced the reference's id: a scenario that does not replay identically
// cannot be reproduced from its crash point.
func (ref *reference) deterministic(r *run, cr *faultfs.Crashing) error {
	for i, op := range r.ops {
		if i >= len(ref.ops) {
			return fmt.Errorf("the run made more operations (%d) than the reference (%d)", len(r.ops), len(ref.ops))
		}
		if op.acked && op.id != ref.ops[i].id {
			return fmt.Errorf("%s at %s acknowledged id %s, the reference run got %s: the scenario does not replay identically",
				op.step.Kind, op.step.Pos, op.id, ref.ops[i].id)
		}
	}
	if !cr.Crashed() && r.stopped != nil {
		return fmt.Errorf("the run failed without reaching its crash point: %v", r.stopped)
	}
	return nil
}

// checkClone opens a crash clone and checks it against the bounds. For the
// process model it also returns the state it saw right after opening if that
// open wrote nothing (a pure reader), for the C4 bound of the other models.
func (ref *reference) checkClone(c *faultfs.MemFS, model faultfs.Model, b bounds, weaken testknobs.Weakening) ([]problem, *state) {
	var fsys vfs.FS = c
	var cnt *faultfs.Counting
	if model == faultfs.ProcessCrash {
		cnt = faultfs.NewCounting(c)
		cnt.StartTrace()
		fsys = cnt
	}
	s, got, err := ref.openState(fsys, weaken)
	if err != nil {
		if s != nil {
			s.Close()
		}
		claim := scenarios.C1
		if b.kmin == 0 {
			claim = scenarios.C2
		}
		return []problem{{claim, fmt.Sprintf("the store does not open after the crash: %s", errString(err))}}, nil
	}
	var reader *state
	if cnt != nil {
		cnt.StopTrace()
		if pureReader(cnt.Trace(), c) {
			reader = got
		}
	}
	ps := ref.classify(got, b)
	if s == nil {
		// No store: a crash during init. A new init must work.
		s2, err := core.Create(storeDir, storeOptions(ref.sc, c, weaken, fixedNow))
		if err != nil {
			ps = append(ps, problem{scenarios.C2, "an interrupted init left a directory that neither opens as a store nor can be created again: " + errString(err)})
			return ps, reader
		}
		s = s2
	} else {
		sn, err := s.Snapshot()
		if err != nil {
			ps = append(ps, problem{scenarios.C1, "snapshot after recovery: " + errString(err)})
		} else {
			ps = append(ps, ref.contentProblems(sn, got, false)...)
		}
		if ref.sc.Has(scenarios.C6) {
			vr, err := s.Verify(true, nil)
			switch {
			case err != nil:
				ps = append(ps, problem{scenarios.C6, "Verify(deep) failed: " + errString(err)})
			case len(vr.Problems) > 0:
				p := vr.Problems[0]
				ps = append(ps, problem{scenarios.C6, fmt.Sprintf("Verify(deep) found %d problem(s), first: %s in %q at offset %d (object %s)",
					len(vr.Problems), p.Reason, p.File, p.Offset, p.Object)})
			}
		}
		if ref.sc.Has(scenarios.C10) {
			if err := s.Close(); err != nil {
				ps = append(ps, problem{scenarios.C10, "close after recovery: " + errString(err)})
			}
			s2, again, err := ref.openState(c, weaken)
			switch {
			case err != nil:
				ps = append(ps, problem{scenarios.C10, "the second open after the crash failed: " + errString(err)})
				if s2 != nil {
					s2.Close()
				}
				return ps, reader
			case !again.equal(got):
				ps = append(ps, problem{scenarios.C10, fmt.Sprintf("recovering twice gives different states: %s, then %s", got, again)})
			}
			s = s2
		}
	}
	ps = append(ps, ref.postCommit(s, c, weaken)...)
	sortProblems(ps)
	return ps, reader
}

// instantReader opens a process-crash clone as a reader at the crash
// instant and returns what it saw, or nil if that open changed anything.
func (ref *reference) instantReader(mem *faultfs.MemFS, weaken testknobs.Weakening) *state {
	c := mem.CrashClone(faultfs.ProcessCrash, 0)
	cnt := faultfs.NewCounting(c)
	cnt.StartTrace()
	s, got, err := ref.openState(cnt, weaken)
	if s != nil {
		defer s.Close()
	}
	cnt.StopTrace()
	if err != nil || got == nil || !got.exists || !pureReader(cnt.Trace(), c) {
		return nil
	}
	return got
}

// pureReader reports whether an open made only calls that change nothing a
// crash could keep: reads, stats, locks, and creates that opened a file that
// already existed (the store opens its state file with O_CREATE). Only such
// an open is a reader at the crash instant; one that recovered or synced
// changed the state it is compared against.
func pureReader(calls []faultfs.Call, c *faultfs.MemFS) bool {
	for _, call := range calls {
		switch {
		case call.Op == faultfs.OpCreate:
			if _, err := c.Stat(call.Path); err != nil {
				return false
			}
		case call.Op.Is(faultfs.KindWrite | faultfs.KindSync | faultfs.KindDir):
			return false
		}
	}
	return true
}

// postCommit commits once more on the recovered store and checks the commit
// survives a further strict power loss: recovery must leave a store that
// works, not one that merely opens.
func (ref *reference) postCommit(s *core.Store, c *faultfs.MemFS, weaken testknobs.Weakening) []problem {
	id, err := s.Commit(core.CommitRequest{
		Agent: "crashsweep", Message: "after the crash", Time: fixedNow(), Advance: postRef,
		Changes: []core.Change{{Path: "post.txt", Data: []byte("written after recovery\n")}},
	})
	s.Close()
	if err != nil {
		return []problem{{scenarios.C1, "a commit after recovery failed: " + errString(err)}}
	}
	c2 := c.CrashClone(faultfs.Strict, 0)
	s2, err := core.Open(storeDir, storeOptions(ref.sc, c2, weaken, fixedNow))
	if err != nil {
		return []problem{{scenarios.C1, "after a commit following recovery, a power loss leaves a store that does not open: " + errString(err)}}
	}
	defer s2.Close()
	sn, err := s2.Snapshot()
	if err == nil {
		var got core.ID
		got, err = sn.Ref(postRef)
		if err == nil && got != id {
			err = fmt.Errorf("ref %s is %s, want %s", postRef, got.String()[:12], id.String()[:12])
		}
	}
	if err != nil {
		return []problem{{scenarios.C1, "the acknowledged commit after recovery was lost by a later power loss: " + errString(err)}}
	}
	return nil
}

// runTo runs the scenario until crash point n and returns the frozen memory
// filesystem and the run.
func (ref *reference) runTo(n int64, weaken testknobs.Weakening) (*faultfs.MemFS, *run, *faultfs.Crashing) {
	mem := faultfs.NewMem()
	cr := faultfs.NewCrashing(mem, n)
	r := newRun(ref.sc, cr, weaken)
	r.known = ref.known
	r.steps(ref.sc.Steps)
	return mem, r, cr
}

// recoveryCalls counts the filesystem calls of opening (recovering) the
// clone of crash point n under m.
func (ref *reference) recoveryCalls(n int64, m modelSeed, weaken testknobs.Weakening) int64 {
	mem, _, _ := ref.runTo(n, weaken)
	cnt := faultfs.NewCounting(mem.CrashClone(m.model, m.seed))
	s, err := core.Open(storeDir, storeOptions(ref.sc, cnt, weaken, fixedNow))
	total := cnt.Total() // Open's calls only: Close is not recovery
	if err == nil {
		s.Close()
	}
	return total
}

// recoverTask crashes the recovery of crash point t.n's clone under t.model
// at its call t.r, takes a strict clone of what that left, and checks it:
// recovery must itself be crash-safe (C10).
func recoverTask(ref *reference, t task, cfg *Config) taskResult {
	res := taskResult{recoveries: 1, states: 1}
	mem, r, _ := ref.runTo(t.n, cfg.Weaken)
	b := ref.boundsOf(r)
	v := Violation{Scenario: ref.sc.Name, File: ref.sc.File, At: t.n, Calls: ref.calls, Trace: ref.traceAround(t.n),
		Model: t.model.model.String(), Seed: t.model.seed, RecoverAt: t.r, Claim: string(scenarios.C10)}
	prefix := fmt.Sprintf("crash during %s, then a crash at call %d of the recovery: ", ref.opAt(r), t.r)
	c := mem.CrashClone(t.model.model, t.model.seed)
	cr := faultfs.NewCrashing(c, t.r)
	if s, err := core.Open(storeDir, storeOptions(ref.sc, cr, cfg.Weaken, fixedNow)); err == nil {
		s.Close()
	} else if !errors.Is(err, vfs.ErrCrashed) && !isAbsent(err) {
		v.Detail = prefix + "the crashed recovery failed with a non-crash error: " + errString(err)
		res.violations = append(res.violations, v)
		return res
	}
	ps, _ := ref.checkClone(c.CrashClone(faultfs.Strict, 0), faultfs.Strict, b, cfg.Weaken)
	for _, p := range ps {
		w := v
		w.Detail = prefix + "(" + string(p.claim) + ") " + p.detail
		res.violations = append(res.violations, w)
	}
	return res
}
