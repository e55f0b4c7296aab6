// Package sched runs concurrent agents under a seeded deterministic
// scheduler. Each agent is a goroutine with its own core.Store (its own
// "process") on one shared faultfs.MemFS; the agents share nothing but the
// filesystem. Every filesystem call of every agent is a scheduling point:
// the calling goroutine parks, and a PRNG seeded from the run's seed picks
// which parked agent runs on to its next call. One agent runs at a time, so
// a seed fixes the interleaving, and a failing seed replays exactly.
//
// Blocking calls never block the scheduler. Lock(name, timeout) becomes a
// try-lock: an agent that finds the lock held parks as blocked and is not
// picked again until some agent unlocks or removes a file. When every
// live agent is blocked, the virtual clock jumps to the earliest lock
// deadline and that agent's Lock fails with vfs.ErrBusy, as its timeout
// would have. Timeouts are virtual: any positive timeout counts as
// Config.LockWait from the first failed try, whatever wall-clock time is
// left of the store's own deadline, so expiry order depends on the seed
// alone.
package sched

import (
	"errors"
	"fmt"
	"math/rand"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// Event is one scheduling decision: agent Agent ran its call Call on Path.
type Event struct {
	Step  int
	Agent int
	Call  string // an faultfs.Op name, "start", or "lock-timeout"
	Path  string
}

// String prints the event with the epoch in index run names masked: a
// store's epoch comes from crypto/rand (so do its id and a recovery's
// epoch), and it shapes no decision of the store, only those names.
func (e Event) String() string {
	return fmt.Sprintf("#%d agent %d %s %s", e.Step, e.Agent, e.Call, runEpoch.ReplaceAllString(e.Path, "$1-EPOCH"))
}

var runEpoch = regexp.MustCompile(`(run-[0-9a-f]{16})-[0-9a-f]{16}`)

// ErrStuck is returned when the running agent neither reached a filesystem
// call nor finished within the wall-clock watchdog: it blocked on
// something the scheduler does not see (a bug in the store or the
// workload, never an interleaving).
var ErrStuck = errors.New("sched: an agent blocked outside the filesystem")

// stuckAfter is the watchdog.
const stuckAfter = 60 * time.Second

// stepsPerOp bounds a run at this many steps per operation: a store that
// loops (a wait for something that never comes, with the filesystem
// calls of each try) never finishes. A correct operation takes about 55
// steps with 3 agents (seeds 1 to 200: 132,477 steps for 2,400 ops).
const stepsPerOp = 500

// scheduler is the state of one run. Only the agent it let run touches
// the agents' fields; mu makes that visible to the race detector.
type scheduler struct {
	mu       sync.Mutex
	rng      *rand.Rand
	agents   []*agent
	yield    chan struct{}
	step     int
	vnow     time.Duration
	lockWait time.Duration
	maxSteps int
	trace    []Event
	obs      *observer
	// crashAt, when positive, is the step at which every later call fails
	// with vfs.ErrCrashed (a crash of every process at once).
	crashAt int
	crashed bool
}

type agent struct {
	id       int
	run      chan struct{}
	pending  Event
	done     bool
	blocked  bool          // its last try of a lock found it held
	deadline time.Duration // virtual, while blocked
	expired  bool          // its lock wait timed out
}

func newScheduler(seed int64, n, ops int, lockWait time.Duration) *scheduler {
	s := &scheduler{rng: rand.New(rand.NewSource(seed)), yield: make(chan struct{}), lockWait: lockWait,
		maxSteps: stepsPerOp * n * ops, obs: newObserver()}
	for i := 0; i < n; i++ {
		s.agents = append(s.agents, &agent{id: i + 1, run: make(chan struct{}), pending: Event{Agent: i + 1, Call: "start"}})
	}
	return s
}

// now is the virtual clock: one millisecond a step.
func (s *scheduler) now() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vnow
}

// park is a scheduling point: the agent waits until it is picked.
func (s *scheduler) park(a *agent, call, p string) {
	s.mu.Lock()
	a.pending = Event{Agent: a.id, Call: call, Path: p}
	s.mu.Unlock()
	s.yield <- struct{}{}
	<-a.run
}

// point is every call's scheduling point (the Hook's before).
func (s *scheduler) point(a *agent, op faultfs.Op, p string) error {
	s.park(a, op.String(), p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return &vfsError{op: op.String(), path: p}
	}
	switch op {
	case faultfs.OpUnlock, faultfs.OpRemove, faultfs.OpRemoveAll, faultfs.OpRename:
		// A lock may have come free: every blocked agent tries again.
		for _, b := range s.agents {
			b.blocked = false
		}
	}
	s.obs.call(a.id, op, p)
	return nil
}

type vfsError struct{ op, path string }

func (e *vfsError) Error() string { return fmt.Sprintf("%s %s: %v", e.op, e.path, vfs.ErrCrashed) }
func (e *vfsError) Unwrap() error { return vfs.ErrCrashed }

// start runs body as agent a once the scheduler first picks it.
func (s *scheduler) start(a *agent, body func()) {
	go func() {
		<-a.run
		body()
		s.mu.Lock()
		a.done = true
		s.mu.Unlock()
		s.yield <- struct{}{}
	}()
}

// loop schedules until every agent is done.
func (s *scheduler) loop() error {
	for {
		s.mu.Lock()
		var live, cands []*agent
		for _, a := range s.agents {
			if !a.done {
				live = append(live, a)
				if !a.blocked {
					cands = append(cands, a)
				}
			}
		}
		if len(live) == 0 {
			s.mu.Unlock()
			return nil
		}
		if len(cands) == 0 {
			// Every live agent waits for a lock: the earliest deadline expires.
			first := live[0]
			for _, a := range live[1:] {
				if a.deadline < first.deadline {
					first = a
				}
			}
			s.vnow = max(s.vnow, first.deadline)
			first.blocked, first.expired = false, true
			first.pending.Call = "lock-timeout"
			cands = []*agent{first}
		}
		a := cands[s.rng.Intn(len(cands))]
		if s.step == s.maxSteps {
			s.mu.Unlock()
			return fmt.Errorf("%w: no end after %d steps", ErrStuck, s.maxSteps)
		}
		s.step++
		s.vnow += time.Millisecond
		if s.crashAt > 0 && s.step >= s.crashAt {
			s.crashed = true
		}
		ev := a.pending
		ev.Step = s.step
		s.trace = append(s.trace, ev)
		s.mu.Unlock()
		watchdog := time.NewTimer(stuckAfter)
		select {
		case a.run <- struct{}{}:
		case <-watchdog.C:
			return fmt.Errorf("%w: agent %d is not parked at step %d (%s)", ErrStuck, a.id, ev.Step, ev)
		}
		select {
		case <-s.yield:
			watchdog.Stop()
		case <-watchdog.C:
			return fmt.Errorf("%w: agent %d after step %d (%s)", ErrStuck, a.id, ev.Step, ev)
		}
	}
}

// agentFS is one agent's view of the shared filesystem: every call parks
// first, and Lock is a try-lock loop.
type agentFS struct {
	*faultfs.Hook
	inner vfs.FS
	s     *scheduler
	a     *agent
}

func (s *scheduler) fs(a *agent, inner vfs.FS) *agentFS {
	f := &agentFS{inner: inner, s: s, a: a}
	f.Hook = faultfs.NewHook(inner, func(op faultfs.Op, p, _ string) error { return s.point(a, op, p) })
	return f
}

// Lock tries the lock at each of its scheduling points until it is taken,
// fails, or its virtual timeout expires.
func (f *agentFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	s, a := f.s, f.a
	first := true
	for {
		if err := s.point(a, faultfs.OpLock, name); err != nil {
			return nil, err
		}
		s.mu.Lock()
		expired := a.expired
		a.expired = false
		s.mu.Unlock()
		if expired {
			return nil, fmt.Errorf("lock %s: %w (virtual timeout)", name, vfs.ErrBusy)
		}
		l, err := f.inner.Lock(name, 0)
		if err == nil {
			s.mu.Lock()
			s.obs.locked(a.id, name, timeout)
			s.mu.Unlock()
			return &agentLock{l: l, f: f, name: name}, nil
		}
		if !errors.Is(err, vfs.ErrBusy) || timeout <= 0 {
			return nil, err
		}
		s.mu.Lock()
		if first {
			a.deadline = s.vnow + s.lockWait
			first = false
		}
		a.blocked = true
		s.mu.Unlock()
	}
}

type agentLock struct {
	l    vfs.Locked
	f    *agentFS
	name string
}

func (l *agentLock) Unlock() error {
	s := l.f.s
	if err := s.point(l.f.a, faultfs.OpUnlock, l.name); err != nil {
		return err
	}
	s.mu.Lock()
	s.obs.unlocked(l.f.a.id, l.name)
	s.mu.Unlock()
	return l.l.Unlock()
}

// base is the file name of a path, for the observer's matching.
func base(p string) string { return path.Base(p) }
