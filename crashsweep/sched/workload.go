package sched

import (
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// storeDir is the store's directory on the shared filesystem.
const storeDir = "/store"

// epoch is the virtual clock's zero.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config is one scheduled run.
type Config struct {
	Seed   int64
	Agents int // 0: 3
	Ops    int // operations per agent; 0: 4
	// LockWait is the virtual lock timeout; 0: one second.
	LockWait time.Duration
	// Crash, when set, crashes every agent at a step drawn from the seed,
	// then recovers a strict power-loss clone and checks it as well.
	Crash  bool
	Weaken testknobs.Weakening
}

func (c *Config) fill() error {
	if c.Agents == 0 {
		c.Agents = 3
	}
	if c.Ops == 0 {
		c.Ops = 4
	}
	if c.LockWait == 0 {
		c.LockWait = time.Second
	}
	if c.Weaken&testknobs.AckBeforeSync != 0 {
		// Its sync runs on a goroutine of its own: two goroutines of one
		// agent would call the filesystem at once, outside the model.
		return fmt.Errorf("%w: the canary ack-before-sync syncs on a goroutine of its own, which the scheduler cannot run", ErrConfig)
	}
	if c.Agents < 1 || c.Agents > 8 || c.Ops < 1 || c.Ops > 64 || c.LockWait < 0 || c.Seed < 0 {
		return fmt.Errorf("%w: agents %d (1..8), ops %d (1..64), lock wait %v and seed %d (not negative) out of range",
			ErrConfig, c.Agents, c.Ops, c.LockWait, c.Seed)
	}
	return nil
}

// ErrConfig is a configuration the scheduler cannot run.
var ErrConfig = errors.New("sched: bad configuration")

// Kind is a workload operation.
type Kind string

// The operations an agent draws from.
const (
	KindAdvance    Kind = "advance"    // commit --advance agent-X
	KindMain       Kind = "main"       // commit --advance main, on main's value when it starts
	KindLand       Kind = "land"       // land agent-X onto main
	KindCAS        Kind = "cas"        // set main to agent-X's head, expecting main's value when it starts
	KindCheckpoint Kind = "checkpoint" // Store.Checkpoint
)

var kinds = []Kind{KindAdvance, KindAdvance, KindMain, KindLand, KindCAS, KindCheckpoint}

// Op is one operation an agent ran, and what it returned.
type Op struct {
	Agent      int
	N          int // its place in the agent's list
	Kind       Kind
	Name       string // its origin agent name, unique in the run
	Start, End int    // scheduling steps
	Ref        string // the ref it moves
	Old        core.ID
	Expect     bool    // Old is the compare-and-swap's expectation
	New        core.ID // the changeset it made or moved the ref to
	Err        error
	Acked      bool // returned success
}

// Result is what a run did and found.
type Result struct {
	Seed     int64
	Trace    []Event
	Ops      []*Op
	CrashAt  int // 0: no crash
	Findings []Finding
}

// Failed reports whether a claim broke.
func (r *Result) Failed() bool { return len(r.Findings) > 0 }

// ReplayCommand is the line that replays a run.
func ReplayCommand(c Config) string {
	s := fmt.Sprintf("go run ./cmd/crashsim --sched --seed %d", c.Seed)
	if c.Agents != 3 && c.Agents != 0 {
		s += fmt.Sprintf(" --sched-agents %d", c.Agents)
	}
	if c.Ops != 4 && c.Ops != 0 {
		s += fmt.Sprintf(" --sched-ops %d", c.Ops)
	}
	if c.Crash {
		s += " --sched-crash"
	}
	return s
}

func (c *Config) options(fs vfs.FS, now func() time.Time) core.Options {
	o := core.Options{FS: fs, Now: now, InlineCheckpoint: true, CheckpointEvery: 3, SegmentSize: 1 << 14,
		// Real deadlines never expire in a run; the scheduler's virtual
		// ones do. A kept place's timer is a goroutine of its own: off.
		LockTimeout: time.Hour, RetryPlace: -1}
	testknobs.Weaken(&o, c.Weaken)
	return o
}

// setup makes the store every run starts from: a base commit on main, a
// ref agent-X at it for each agent, and a checkpoint.
func (c *Config) setup(mem *faultfs.MemFS) (core.ID, error) {
	// The setup runs on the correct store: a canary weakens the agents.
	o := c.options(mem, func() time.Time { return epoch })
	testknobs.Weaken(&o, 0)
	s, err := core.Create(storeDir, o)
	if err != nil {
		return core.ID{}, err
	}
	base, err := s.Commit(core.CommitRequest{Agent: "setup", Advance: "main",
		Changes: []core.Change{{Path: "s.txt", Data: []byte("base\n")}}})
	if err == nil {
		for i := 1; i <= c.Agents && err == nil; i++ {
			err = s.UpdateRefs(core.RefUpdate{Name: agentRef(i), New: base})
		}
	}
	if err == nil {
		err = s.Checkpoint()
	}
	return base, errors.Join(err, s.Close())
}

func agentRef(i int) string { return fmt.Sprintf("agent-%d", i) }

// Run runs one seed: the setup, the agents under the scheduler, then the
// checks.
func Run(c Config) (*Result, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	mem := faultfs.NewMem()
	_, err := c.setup(mem)
	if err != nil {
		return nil, fmt.Errorf("sched: setup: %w", err)
	}
	s := newScheduler(c.Seed, c.Agents, c.Ops, c.LockWait)
	s.obs.step = func() int { return s.step }
	rng := rand.New(rand.NewSource(c.Seed ^ 0x5eed))
	res := &Result{Seed: c.Seed}
	if c.Crash {
		// A step drawn from a rough bound of a run's length.
		res.CrashAt = 1 + rng.Intn(c.Agents*c.Ops*60)
		s.crashAt = res.CrashAt
	}
	now := func() time.Time { return epoch.Add(s.now()) }
	perAgent := make([][]*Op, c.Agents)
	for i := range perAgent {
		for n := 0; n < c.Ops; n++ {
			k := kinds[rng.Intn(len(kinds))]
			perAgent[i] = append(perAgent[i], &Op{Agent: i + 1, N: n + 1, Kind: k, Name: fmt.Sprintf("a%d-op%d", i+1, n+1)})
		}
	}
	for i, a := range s.agents {
		ag := &worker{s: s, a: a, fs: s.fs(a, mem), ops: perAgent[i], cfg: &c, now: now}
		s.start(a, ag.body)
	}
	if err := s.loop(); err != nil {
		// The agents stay parked; the run reports what it saw so far.
		res.Trace = s.trace
		res.Findings = append(s.obs.findings, Finding{Claim: "progress", Detail: err.Error(), Step: len(s.trace)})
		return res, nil
	}
	res.Trace = s.trace
	for _, ops := range perAgent {
		res.Ops = append(res.Ops, ops...)
	}
	res.Findings = append(res.Findings, s.obs.findings...)
	res.Findings = append(res.Findings, unexpected(res.Ops, crashStep(s))...)
	res.Findings = append(res.Findings, checkStore(mem, &c, res.Ops, "process state")...)
	if c.Crash {
		res.Findings = append(res.Findings, checkStore(mem.CrashClone(faultfs.Strict, c.Seed), &c, res.Ops, "strict power loss")...)
	}
	return res, nil
}

// worker is one agent's body.
type worker struct {
	s   *scheduler
	a   *agent
	fs  vfs.FS
	ops []*Op
	cfg *Config
	now func() time.Time
}

func (w *worker) body() {
	st, err := core.Open(storeDir, w.cfg.options(w.fs, w.now))
	if err != nil {
		w.s.mu.Lock()
		for _, op := range w.ops {
			op.Err = fmt.Errorf("open: %w", err)
			op.Start, op.End = w.s.step, w.s.step
		}
		w.s.mu.Unlock()
		return
	}
	for _, op := range w.ops {
		w.s.mu.Lock()
		op.Start = w.s.step
		w.s.mu.Unlock()
		op.Err = w.do(st, op)
		op.Acked = op.Err == nil
		w.s.mu.Lock()
		op.End = w.s.step
		w.s.mu.Unlock()
	}
	st.Close()
}

func (w *worker) do(st *core.Store, op *Op) error {
	mine := agentRef(op.Agent)
	content := []byte(fmt.Sprintf("%s by %s\n", op.Name, mine))
	switch op.Kind {
	case KindAdvance, KindMain:
		op.Ref, op.Expect = mine, true
		p := fmt.Sprintf("f-%s.txt", mine)
		if op.Kind == KindMain {
			op.Ref, p = "main", "s.txt"
		}
		old, err := crashsweep.RefOrZero(st, op.Ref)
		if err != nil {
			return err
		}
		op.Old = old
		req := core.CommitRequest{Agent: op.Name, Advance: op.Ref, Changes: []core.Change{{Path: p, Data: content}}}
		if !old.IsZero() {
			req.Parents = []core.ID{old}
		}
		op.New, err = st.Commit(req)
		return err
	case KindLand:
		op.Ref = "main"
		change, err := crashsweep.RefOrZero(st, mine)
		if err != nil {
			return err
		}
		r, err := st.Land(change, "main", core.LandOptions{Agent: op.Name})
		if err == nil && !r.NoOp {
			op.New = r.Changeset
		}
		return err
	case KindCAS:
		op.Ref, op.Expect = "main", true
		old, err := crashsweep.RefOrZero(st, "main")
		if err != nil {
			return err
		}
		to, err := crashsweep.RefOrZero(st, mine)
		if err != nil {
			return err
		}
		op.Old, op.New = old, to
		return st.UpdateRefsAs(core.Origin{Agent: op.Name, Op: core.OpRefSet}, core.RefUpdate{Name: "main", Old: old, New: to})
	case KindCheckpoint:
		return st.Checkpoint()
	}
	return fmt.Errorf("sched: unknown op %q", op.Kind)
}

// crashStep is the step the crash happened at, 0 if it did not.
func crashStep(s *scheduler) int {
	if s.crashed {
		return s.crashAt
	}
	return 0
}
