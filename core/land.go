package core

import (
	"fmt"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/merge"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// DefaultLandAttempts bounds Land's retries after lost races when
// LandOptions.MaxAttempts is zero.
const DefaultLandAttempts = 16

// Land applies the change made by the changeset change onto the head of the
// ref onto, and moves the ref.
//
// Its contract, in order of precedence:
//
//   - If onto's first-parent history already holds a changeset with change's
//     delta hash (change itself, an earlier land of it, or any changeset that
//     made exactly the same change), or a merge whose parent is change, Land
//     does nothing and reports NoOp with Changeset = the head. Retrying a land
//     after a crash therefore never applies a change twice.
//   - If the head is on change's first-parent history (its first parent,
//     or further down a branch of several changesets), onto is
//     fast-forwarded to change (one compare-and-swap, no new changeset): a
//     merge would hold change's tree and nothing else.
//   - Otherwise Land merges three ways: base is the nearest common ancestor of
//     the head and change (highest generation; the empty tree if none), and
//     every path change made between base and change is applied to the head.
//     A path that both sides changed differently merges as git merges it
//     when it is a regular or executable file on both sides, over one or
//     nothing in base: its mode three ways, and its content three ways, by
//     lines (core/textmerge, git merge-file's rules) where both sides
//     changed it and neither version is binary; the merged file is a new
//     blob of the land's changeset. Overlapping (or touching) line edits, any other path both
//     changed, and a file that would land where the other side has a
//     directory are conflicts: Land fails with a *MergeConflictError listing
//     every such path, with the hunks of those merged by lines, and writes
//     nothing. If the merge leaves the head's tree as it is, there is
//     nothing to record and Land reports NoOp. Otherwise it commits one
//     changeset with Parents [head, change] that advances onto in the same
//     journal frame (one data sync).
//
// When the compare-and-swap loses (another writer moved onto first), Land
// re-merges only the paths the target gained between the head it merged
// against and the new head (LandResult.Remerged records how many, per
// retry; a file whose head version changed is merged by lines again from
// its three versions), and tries again, at most o.MaxAttempts times in all (0:
// DefaultLandAttempts). Running out of attempts is ErrBusy: the target is
// contended, and trying later is the remedy.
//
// The NoOp check walks onto's first-parent history down to the oldest other
// changeset sharing change's delta hash, so its cost grows with how far back
// such a changeset is, never with the store's size. Finding the nearest
// common ancestor walks both histories down to it, as git's merge-base does:
// a change forked long ago costs a walk over everything landed since. The
// merge itself costs what the change and the target's movement touch, not
// the size of the trees.
func (s *Store) Land(change ID, onto string, o LandOptions) (*LandResult, error) {
	m := s.landLock(onto)
	m.Lock()
	defer m.Unlock()
	l, err := s.startLand(change, onto, ID{}, o)
	if err == nil {
		defer l.releaseTurn()
		err = l.run()
	}
	if err != nil {
		return nil, fmt.Errorf("land %s onto %q: %w", errs.Short(change), onto, err)
	}
	return l.res, nil
}

// lander is one Land in progress: the change, the target's head it merges
// against and the one before (prevHead, after a lost race), the merge, the
// blobs it has read, and the writer lock it keeps after a lost race.
type lander struct {
	s           *Store
	change      ID
	cs          *objects.Changeset
	onto        string
	agent, msg  string
	maxAttempts int
	res         *LandResult

	sn             *Snapshot
	head, prevHead ID
	base           ID
	m              *merge.Merge
	lm             *lineMerger
	release        func()
}

// startLand reads the change and the target's head: head when it is not
// zero, the ref's value otherwise.
func (s *Store) startLand(change ID, onto string, head ID, o LandOptions) (*lander, error) {
	l := &lander{s: s, change: change, onto: onto, maxAttempts: o.MaxAttempts, res: &LandResult{},
		agent: o.Agent, msg: o.Message}
	if l.maxAttempts <= 0 {
		l.maxAttempts = DefaultLandAttempts
	}
	var err error
	if l.sn, err = s.Snapshot(); err != nil {
		return nil, err
	}
	if l.cs, err = l.sn.Changeset(change); err != nil {
		return nil, err
	}
	l.head = head
	if head.IsZero() {
		if l.head, err = l.sn.Ref(onto); err != nil {
			return nil, err
		}
	} else if _, err = l.sn.Changeset(head); err != nil {
		return nil, err
	}
	if l.agent == "" {
		l.agent = l.cs.Agent
	}
	if l.msg == "" {
		l.msg = LandMessage(errs.Short(change), onto, l.cs.Message)
	}
	l.lm = newLineMerger(textmerge.MergeOptions{OursLabel: onto, BaseLabel: "base", TheirsLabel: errs.Short(change)})
	return l, nil
}

// run makes the attempts: each either lands (or finds nothing to do), or
// loses the race for the target and goes again from its new head.
func (l *lander) run() error {
	for attempt := 1; attempt <= l.maxAttempts; attempt++ {
		l.res.Attempts = attempt
		if l.head.IsZero() {
			return fmt.Errorf("%w: ref %q was deleted", ErrNotFound, l.onto)
		}
		done, err := landed(l.sn, l.cs, l.change, l.head, l.prevHead)
		if err != nil {
			return err
		}
		if done {
			l.res.NoOp, l.res.Changeset = true, l.head
			return nil
		}
		ff, err := l.headOnFirstParents()
		if err != nil {
			return err
		}
		if ff {
			err = l.fastForward(attempt)
		} else {
			err = l.mergeAndCommit(attempt)
		}
		if err == nil {
			return nil
		}
		if err := l.lost(err, ff); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: the target moved during each of %d attempts", ErrBusy, l.maxAttempts)
}

// headOnFirstParents reports whether the head is on change's first-parent
// history (its first parent, or further down a branch of several
// changesets), so that the land is a fast-forward. A head reached only
// through a second parent is not: moving onto's first-parent history onto
// the branch's (git's "foxtrot") would hide onto's own history from log
// and from the no-op walk; such a change is merged. The walk stops below
// the head's generation.
func (l *lander) headOnFirstParents() (bool, error) {
	if l.s.opts.weaken&testknobs.LandNoFastForward != 0 {
		return false, nil
	}
	if len(l.cs.Parents) == 0 {
		return false, nil
	}
	if l.cs.Parents[0] == l.head {
		return true, nil
	}
	head, err := l.sn.Changeset(l.head)
	if err != nil {
		return false, err
	}
	for cs := l.cs; len(cs.Parents) > 0; {
		id := cs.Parents[0]
		if id == l.head {
			return true, nil
		}
		if cs, err = l.sn.Changeset(id); err != nil {
			return false, err
		}
		if cs.Generation <= head.Generation {
			return false, nil
		}
	}
	return false, nil
}

// fastForward moves the target from its head, an ancestor of change, to
// change.
func (l *lander) fastForward(attempt int) error {
	if attempt > 1 {
		l.res.Remerged = append(l.res.Remerged, 0)
	}
	beforeLandCommit(attempt)
	if err := l.s.UpdateRefsAs(Origin{Agent: l.agent, Op: OpLand}, RefUpdate{Name: l.onto, Old: l.head, New: l.change}); err != nil {
		return err
	}
	l.res.Changeset = l.change
	return nil
}

// merged remerges change onto the head (attempt counts the tries) and
// returns what a commit of the merge changes, or nil, with the result
// marked NoOp at the head, when every path already has change's value.
func (l *lander) merged(attempt int) ([]Change, error) {
	if err := l.remerge(attempt); err != nil {
		return nil, err
	}
	changes, err := l.lm.changes(l.sn, l.m)
	if err != nil || len(changes) > 0 {
		return changes, err
	}
	l.res.NoOp, l.res.Changeset = true, l.head
	return nil, nil
}

// mergeAndCommit merges change onto the head and commits the merge
// advancing the target, or reports NoOp when every path already has
// change's value.
func (l *lander) mergeAndCommit(attempt int) error {
	changes, err := l.merged(attempt)
	if err != nil || changes == nil {
		return err
	}
	beforeLandCommit(attempt)
	id, err := l.s.Commit(CommitRequest{Parents: []ID{l.head, l.change}, Changes: changes,
		Agent: l.agent, Message: l.msg, Advance: l.onto, Op: OpLand})
	if err != nil {
		return err
	}
	l.res.Changeset = id
	return nil
}

// remerge brings the merge to the current head: built afresh when there is
// none or the merge base moved, advanced by the head's diff since the last
// attempt otherwise, and records in Remerged how many paths that took.
func (l *lander) remerge(attempt int) error {
	nb, err := mergeBase(l.sn, l.head, l.change)
	if err != nil {
		return err
	}
	switch {
	case l.m == nil || nb != l.base:
		l.base = nb
		if l.m, err = buildMerge(l.sn, l.base, l.head, l.change); err != nil {
			return err
		}
		if attempt > 1 {
			l.res.Remerged = append(l.res.Remerged, l.m.Len())
		}
	case l.prevHead != l.head:
		pcs, err := l.sn.Diff(l.prevHead, l.head)
		if err != nil {
			return err
		}
		l.res.Remerged = append(l.res.Remerged, l.m.AdvanceHead(headEdits(pcs)))
	case attempt > 1:
		l.res.Remerged = append(l.res.Remerged, 0)
	}
	return nil
}

// lost handles the error of an attempt's commit or ref move: a lost race
// for the target (any other error is returned as it is) makes the lander
// keep the writer lock and go again from the target's new head. ff says
// the attempt was a fast-forward: that was the merge whose base and head
// are both the old head, which is recorded, so the retry re-merges only
// what the target gained.
//
// The writer lock serves writers in arrival order (C8), so a loser that
// queued again for each retry would find, at its next turn, that every
// writer queued ahead of it had moved the target again: with 32 landers,
// one would win per round. The loser therefore takes the writer lock once
// more and keeps it until it has landed: nothing else moves the target
// meanwhile, and its next attempt (or, if the target moved while it
// queued, the one after) wins.
func (l *lander) lost(err error, ff bool) error {
	cur, lost := lostRace(err, l.onto)
	if !lost {
		return err
	}
	if l.release == nil {
		if l.release, err = l.s.writer.Hold(); err != nil {
			return err
		}
	}
	if ff {
		l.base = l.head
		if l.m, err = buildMerge(l.sn, l.base, l.head, l.change); err != nil {
			return err
		}
	}
	l.prevHead, l.head = l.head, cur
	l.sn, err = l.s.snapshotWith(cur)
	return err
}

// releaseTurn gives back the writer lock lost kept, if any.
func (l *lander) releaseTurn() {
	if l.release != nil {
		l.release()
	}
}

// beforeLandCommit calls the test hook testknobs.LandBeforeCommit, if set.
func beforeLandCommit(attempt int) {
	if h := testknobs.LandBeforeCommit; h != nil {
		h(attempt)
	}
}
