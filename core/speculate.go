package core

import (
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

// MergeOnto merges change onto the changeset head exactly as Land would
// onto a ref onto whose head is head, and moves no ref. It is the
// speculative half of a land: a merge queue stacks its batch with it,
// tests the tip, and publishes the tip with one UpdateRefs only if the
// test passed.
//
// The result follows Land's contract for one attempt: NoOp with Changeset
// = head when head's first-parent history already holds change's delta
// hash (or the merge would leave head's tree as it is); Changeset =
// change when head is change's first parent (the fast-forward); otherwise
// a new changeset with Parents [head, change], durable before MergeOnto
// returns, that no ref names. A conflict is a *MergeConflictError, and
// nothing is written. onto names the target in the merge's conflict labels
// and default message (LandMessage); it need not exist.
//
// A merge that is never published stays in the store unreferenced, as an
// abandoned commit does: it costs its own objects, and nothing reads it.
func (s *Store) MergeOnto(change, head ID, onto string, o LandOptions) (*LandResult, error) {
	if head.IsZero() {
		return nil, fmt.Errorf("%w: merge onto the zero id", ErrInvalid)
	}
	l, err := s.startLand(change, onto, head, o)
	if err == nil {
		err = l.speculate()
	}
	if err != nil {
		return nil, fmt.Errorf("merge %s onto %s: %w", errs.Short(change), errs.Short(head), err)
	}
	return l.res, nil
}

// speculate is the one attempt of MergeOnto: run's decisions, with the
// commit advancing nothing.
func (l *lander) speculate() error {
	l.res.Attempts = 1
	done, err := landed(l.sn, l.cs, l.change, l.head, ID{})
	if err != nil {
		return err
	}
	if done {
		l.res.NoOp, l.res.Changeset = true, l.head
		return nil
	}
	if len(l.cs.Parents) > 0 && l.cs.Parents[0] == l.head {
		l.res.Changeset = l.change
		return nil
	}
	changes, err := l.merged(1)
	if err != nil || changes == nil {
		return err
	}
	id, err := l.s.Commit(CommitRequest{Parents: []ID{l.head, l.change}, Changes: changes,
		Agent: l.agent, Message: l.msg, Op: OpLand})
	if err != nil {
		return err
	}
	l.res.Changeset = id
	return nil
}

// LockQueue takes the merge queue's runner lock of the ref target: an
// inter-process file lock (QUEUELOCK.<FNV-64a of target in hex>, beside
// LOCK; two targets whose hashes collide share it, which only serializes
// their queues) that
// the death of its holder releases, waited for at most timeout (0: tried
// once). ErrBusy when it is held past that. It guards no data of the
// store: it only makes one process at a time test and publish the queued
// lands of target (package mergequeue).
func (s *Store) LockQueue(target string, timeout time.Duration) (unlock func() error, err error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := refs.ValidateName(target); err != nil {
		return nil, errs.Ref(err)
	}
	h := fnv.New64a()
	h.Write([]byte(target))
	l, err := s.fs.Lock(s.lockPath(fmt.Sprintf("QUEUELOCK.%016x", h.Sum64())), timeout)
	if err != nil {
		if errors.Is(err, vfs.ErrBusy) {
			return nil, fmt.Errorf("%w: the merge queue of %q is being run by another process", ErrBusy, target)
		}
		return nil, err
	}
	return l.Unlock, nil
}
