package mergequeue

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Options tune a gated land.
type Options struct {
	// Check is the command run with sh -c in the scratch work tree; exit
	// status 0 passes. It is required.
	Check string
	// Timeout bounds each run of the check (0: none); a check still
	// running then is killed with its process group and fails.
	Timeout time.Duration
	// OutputLimit is how many bytes of the check's output tail are kept
	// (0: DefaultOutputLimit).
	OutputLimit int
	// Agent is recorded in the merges and moves the runner makes (empty:
	// each change's own agent in its merge, and in a move the agent of
	// the changes it lands, or "merge-queue" when they are several
	// agents').
	Agent string
	// TempDir is where scratch work trees are made ("": os.TempDir()).
	TempDir string
	// Poll is how long a waiting land waits for the runner lock before it
	// looks again whether its entry was decided (0: 100ms).
	Poll time.Duration

	// weaken is the test-only canaries (internal/testknobs.Weaken).
	weaken testknobs.Weakening
}

func init() {
	testknobs.RegisterOptions(func(o *Options) *testknobs.Weakening { return &o.weaken })
}

// Land queues change for target and returns once the queue decided it:
// landed (Outcome.Landed, the target holds it), or ejected (a
// *CheckFailedError, or a *core.MergeConflictError for a change that
// conflicted, with the Outcome). It runs the queue itself whenever no
// other process does (see the package documentation), checking every
// pending entry with o's check: the lands of one target should share it. Errors running the
// queue (the check could not start, I/O) leave the entry queued for the
// next runner and are returned as they are.
func Land(s *core.Store, change core.ID, target string, o Options) (*Outcome, error) {
	if o.Check == "" {
		return nil, fmt.Errorf("%w: a gated land needs a check command", core.ErrInvalid)
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	if _, err := sn.Ref(target); err != nil {
		return nil, err
	}
	if _, err := sn.Changeset(change); err != nil {
		return nil, err
	}
	n, err := enqueue(s, change, target)
	if err != nil {
		return nil, err
	}
	for {
		out, err := collect(s, target, n)
		if out != nil || err != nil {
			if err == nil {
				err = out.err()
			}
			return out, err
		}
		unlock, err := s.LockQueue(target, o.Poll)
		if errors.Is(err, core.ErrBusy) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = (&runner{s: s, target: target, o: o}).run()
		if uerr := unlock(); err == nil {
			err = uerr
		}
		if err != nil {
			return nil, err
		}
	}
}

// enqueue creates change's entry for target under the next free number:
// a create-only compare-and-swap, tried again when another process took
// the number first.
func enqueue(s *core.Store, change core.ID, target string) (uint64, error) {
	for attempt := 0; attempt < 64; attempt++ {
		sn, err := s.Snapshot()
		if err != nil {
			return 0, err
		}
		_, top, err := pending(sn, target)
		if err != nil {
			return 0, err
		}
		n := top + 1
		err = s.UpdateRefs(core.RefUpdate{Name: entryName(PendingPrefix, target, n), New: change})
		var ce *core.ConflictError
		if errors.As(err, &ce) {
			continue
		}
		return n, err
	}
	return 0, fmt.Errorf("%w: no free queue number for %q after 64 tries", core.ErrBusy, target)
}

// collect returns entry n's outcome once it is decided, and removes its
// queue-done ref (the outcome was read; a crash before that removal only
// leaves the ref behind). Nil while the entry is pending.
func collect(s *core.Store, target string, n uint64) (*Outcome, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	if _, err := sn.Ref(entryName(PendingPrefix, target, n)); err == nil {
		return nil, nil
	} else if !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	done := entryName(DonePrefix, target, n)
	id, err := sn.Ref(done)
	if err != nil {
		return nil, fmt.Errorf("queue entry %d of %q vanished with no outcome: %w", n, target, err)
	}
	out, err := readOutcome(sn, id, n)
	if err != nil {
		return nil, err
	}
	var ce *core.ConflictError
	if err := s.UpdateRefs(core.RefUpdate{Name: done, Old: id}); err != nil && !errors.As(err, &ce) {
		return nil, err
	}
	return out, nil
}
