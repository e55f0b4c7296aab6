package mergequeue

import (
	"errors"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// runner runs target's queue while its process holds the runner lock.
type runner struct {
	s      *core.Store
	target string
	o      Options
	checks int
}

// run decides every entry pending when it starts, as one batch.
func (r *runner) run() error {
	sn, err := r.s.Snapshot()
	if err != nil {
		return err
	}
	es, _, err := pending(sn, r.target)
	if err != nil || len(es) == 0 {
		return err
	}
	return r.batch(es)
}

// batch stacks es onto the target's head and checks the tip; a tip that
// passes is published. When it fails, a binary search over the prefixes
// of the stack (each prefix's tip is a merge stack already made) finds
// the first entry whose prefix fails: the prefix before it passed and is
// published, the entry is ejected with that failing check's output, and
// the entries after it are stacked and checked again as a batch. k
// breakers among n cost about k·(log2(n)+1) + 1 checks. When the target
// moved under the batch (a land outside the queue), the batch is stacked
// and checked again onto the new head.
func (r *runner) batch(es []entry) error {
	for len(es) > 0 {
		sn, err := r.s.Snapshot()
		if err != nil {
			return err
		}
		head, err := sn.Ref(r.target)
		if err != nil {
			return err
		}
		var tip core.ID
		if tip, es, err = r.stack(head, es); err != nil || len(es) == 0 {
			return err
		}
		if sn, err = r.s.Snapshot(); err != nil {
			return err
		}
		res, err := r.checkTip(sn, head, tip)
		if err != nil {
			return err
		}
		if res.pass {
			err = r.publish(head, tip, es)
			if _, lost := lostRace(err, r.target); lost {
				continue
			}
			return err
		}
		// Prefix lo passes (lo 0: the head, taken to pass); prefix hi fails.
		lo, hi := 0, len(es)
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			r2, err := r.checkTip(sn, head, es[mid-1].merged)
			if err != nil {
				return err
			}
			if r2.pass {
				lo = mid
			} else {
				hi, res = mid, r2
			}
		}
		if lo > 0 {
			err := r.publish(head, es[lo-1].merged, es[:lo])
			if _, lost := lostRace(err, r.target); lost {
				continue
			}
			if err != nil {
				return err
			}
		}
		o := r.outcome(es[hi-1])
		o.Reason, o.Exit, o.TimedOut, o.Output = "check", res.exit, res.timedOut, res.output
		if err := r.decide(nil, o); err != nil {
			return err
		}
		es = es[hi:]
	}
	return nil
}

// checkTip is the check's result on tip: a pass, with no check run, when
// tip is the head (every entry a no-op).
func (r *runner) checkTip(sn *core.Snapshot, head, tip core.ID) (checkResult, error) {
	if tip == head {
		return checkResult{pass: true}, nil
	}
	return r.runCheck(sn, tip)
}

// stack merges es in order onto head (nothing published) and returns the
// tip and the entries it holds; one that conflicts is ejected at once.
func (r *runner) stack(head core.ID, es []entry) (core.ID, []entry, error) {
	tip := head
	var kept []entry
	for _, e := range es {
		res, err := r.s.MergeOnto(e.change, tip, r.target, core.LandOptions{Agent: r.o.Agent})
		var mc *core.MergeConflictError
		if errors.As(err, &mc) {
			o := r.outcome(e)
			o.Reason, o.Paths, o.Hunks = "conflict", mc.Paths, mc.Hunks
			if err := r.decide(nil, o); err != nil {
				return core.ID{}, nil, err
			}
			continue
		}
		if err != nil {
			return core.ID{}, nil, err
		}
		e.merged, e.noop = res.Changeset, res.NoOp
		tip = res.Changeset
		kept = append(kept, e)
	}
	return tip, kept, nil
}

// publish moves the target from head to tip and decides every entry of es
// landed, in one frame.
func (r *runner) publish(head, tip core.ID, es []entry) error {
	outs := make([]*Outcome, len(es))
	for i, e := range es {
		o := r.outcome(e)
		o.Landed, o.NoOp, o.Changeset, o.Head, o.Batch = true, e.noop, e.merged, tip, len(es)
		outs[i] = o
	}
	var move []core.RefUpdate
	if tip != head {
		move = append(move, core.RefUpdate{Name: r.target, Old: head, New: tip})
	}
	return r.decide(move, outs...)
}

// outcome is the start of e's outcome.
func (r *runner) outcome(e entry) *Outcome {
	return &Outcome{Change: e.change, Target: r.target, Entry: e.n, Checks: r.checks}
}

// decide records outs and, in one frame with the moves, replaces each
// one's queue entry by its queue-done ref.
func (r *runner) decide(moves []core.RefUpdate, outs ...*Outcome) error {
	rec, err := record(r.s, r.o.Agent, outs)
	if err != nil {
		return err
	}
	var entries []core.RefUpdate
	for _, o := range outs {
		entries = append(entries,
			core.RefUpdate{Name: entryName(PendingPrefix, r.target, o.Entry), Old: o.Change},
			core.RefUpdate{Name: entryName(DonePrefix, r.target, o.Entry), New: rec})
	}
	agent, err := r.moveAgent(outs)
	if err != nil {
		return err
	}
	origin := core.Origin{Agent: agent, Op: core.OpLand}
	if r.o.weaken&testknobs.QueueTwoFrames != 0 && len(moves) > 0 {
		// The canary: the outcomes are published before the move that
		// makes them true, in a frame of their own.
		if err := r.s.UpdateRefsAs(origin, entries...); err != nil {
			return err
		}
		return r.s.UpdateRefsAs(origin, moves...)
	}
	return r.s.UpdateRefsAs(origin, append(moves, entries...)...)
}

// moveAgent is the agent a frame deciding outs records: Options.Agent,
// else the one agent whose changes it decides, as a plain land records
// its change's agent, else "merge-queue" for a batch of several agents'.
func (r *runner) moveAgent(outs []*Outcome) (string, error) {
	if r.o.Agent != "" {
		return r.o.Agent, nil
	}
	sn, err := r.s.Snapshot()
	if err != nil {
		return "", err
	}
	agent := ""
	for i, o := range outs {
		cs, err := sn.Changeset(o.Change)
		if err != nil {
			return "", err
		}
		if i > 0 && cs.Agent != agent {
			return queueAgent, nil
		}
		agent = cs.Agent
	}
	return agent, nil
}

// queueAgent is the agent a frame records for several agents' changes.
const queueAgent = "merge-queue"

// lostRace reports whether err is a failed compare-and-swap of ref.
func lostRace(err error, ref string) (core.ID, bool) {
	var ce *core.ConflictError
	if errors.As(err, &ce) && ce.Ref == ref {
		return ce.Current, true
	}
	return core.ID{}, false
}
