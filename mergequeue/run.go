package mergequeue

import (
	"errors"

	"github.com/swarmops/swarmops/core"
)

// runner runs target's queue while its process holds the runner lock.
type runner struct {
	s      *core.Store
	target string
	o      Options
	checks int
	// seen holds the result of each tree checked in this run, by root
	// tree id. The check is taken to be a function of the tree: bisection
	// meets the same tree again (the second half of a failing batch,
	// stacked onto the first half just landed, is the batch's tree) and
	// needs no second run for it.
	seen map[core.ID]checkResult
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

// batch stacks es onto the target's head, checks the tip, and publishes
// it; a failing batch of more than one entry is bisected, each half run
// onto the head of the moment, and a failing single entry is ejected.
// When the target moved under the batch (a land outside the queue), the
// batch is stacked and checked again onto the new head.
func (r *runner) batch(es []entry) error {
	for {
		sn, err := r.s.Snapshot()
		if err != nil {
			return err
		}
		head, err := sn.Ref(r.target)
		if err != nil {
			return err
		}
		tip, es, err := r.stack(head, es)
		if err != nil || len(es) == 0 {
			return err
		}
		res := checkResult{pass: true}
		if tip != head {
			if sn, err = r.s.Snapshot(); err != nil {
				return err
			}
			if res, err = r.check(sn, tip); err != nil {
				return err
			}
		}
		switch {
		case res.pass:
			err = r.publish(head, tip, es)
			if _, lost := lostRace(err, r.target); lost {
				continue
			}
			return err
		case len(es) == 1:
			o := r.outcome(es[0])
			o.Reason, o.Exit, o.TimedOut, o.Output = "check", res.exit, res.timedOut, res.output
			return r.decide(nil, o)
		}
		mid := len(es) / 2
		if err := r.batch(es[:mid]); err != nil {
			return err
		}
		return r.batch(es[mid:])
	}
}

// check is the check's result on tip's tree: run once per tree.
func (r *runner) check(sn *core.Snapshot, tip core.ID) (checkResult, error) {
	cs, err := sn.Changeset(tip)
	if err != nil {
		return checkResult{}, err
	}
	if res, ok := r.seen[cs.Root]; ok {
		return res, nil
	}
	res, err := r.runCheck(sn, tip)
	if err != nil {
		return res, err
	}
	if r.seen == nil {
		r.seen = map[core.ID]checkResult{}
	}
	r.seen[cs.Root] = res
	return res, nil
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
	for _, o := range outs {
		moves = append(moves,
			core.RefUpdate{Name: entryName(PendingPrefix, r.target, o.Entry), Old: o.Change},
			core.RefUpdate{Name: entryName(DonePrefix, r.target, o.Entry), New: rec})
	}
	if h := r.o.BeforePublish; h != nil {
		h()
	}
	return r.s.UpdateRefsAs(core.Origin{Agent: r.o.Agent, Op: core.OpLand}, moves...)
}

// lostRace reports whether err is a failed compare-and-swap of ref.
func lostRace(err error, ref string) (core.ID, bool) {
	var ce *core.ConflictError
	if errors.As(err, &ce) && ce.Ref == ref {
		return ce.Current, true
	}
	return core.ID{}, false
}
