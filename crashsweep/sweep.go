// Package crashsweep proves the store's durability claims at every
// filesystem call of every scenario.
//
// For a scenario it first makes a reference run on a counting memory
// filesystem: the number of calls N, the call trace, the outcome and id of
// every operation, and the state (refs, changesets, file contents) after
// each prefix of the operations in journal-frame order. Then, for every crash
// point n in 1..N+1 (N+1: after the last call), it runs the scenario again
// on faultfs.NewCrashing(mem, n), records which operations were acknowledged
// and what readers saw, and takes crash clones of the frozen memory
// filesystem under each model (process crash, strict power loss, torn power
// loss with several seeds). Each clone is opened (recovery) and checked:
//
//	C1  the recovered state includes every acknowledged operation
//	C2  it equals the state after some prefix of the operations: each
//	    operation wholly present or absent; no ref, tree or changeset names
//	    an absent object; every file reads back
//	C3  the prefix respects frame order (B durable implies A durable)
//	C4  it includes everything a reader saw, including a reader that opened
//	    the store at the crash instant (the process-crash clone)
//	C6  Verify(deep) is clean and no file reads back different bytes
//	C10 opening twice gives the same state; for a bounded subset of points
//	    the recovery itself is crashed at each of its calls and recovered
//
// and then one more commit must succeed and survive a further strict power
// loss. A fault sweep (C9) injects EIO, ENOSPC, short writes and failed
// syncs at every matching call instead of crashing.
//
// Besides the scenario files, the sweep runs generated workloads (gen.go):
// every sequence of a few operations by two or three agents, with a model
// of the store that predicts each outcome. Paths that write outside the
// store or decide outside it (a work tree, the merge queue, an export to
// git) are swept by parts (parts.go), each with its own operations and
// oracle, crashed at every call in-process so that canaries reach them.
//
// Everything is deterministic: the scenario clock is fixed, torn clones are
// seeded, and races are interleaved at a named lock call, so a crash point,
// a model and a seed reproduce one state exactly.
package crashsweep

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// ErrConfig is wrapped by errors in a Config.
var ErrConfig = errors.New("crashsweep: bad configuration")

// Config selects what a sweep covers.
type Config struct {
	// Models to clone under (default: process, strict, torn).
	Models []faultfs.Model
	// TornSeeds is how many seeds the torn model uses (Seed, Seed+1, …);
	// default 3.
	TornSeeds int
	// Seed is the base seed of the torn clones.
	Seed int64
	// Workers run crash points in parallel (default 4×GOMAXPROCS).
	Workers int
	// At, when positive, checks only crash point At (N+1 is the point
	// after the last call).
	At int64
	// RecoverAt, with At, checks only the crash of the recovery at its
	// call RecoverAt (and skips the plain check of At).
	RecoverAt int64
	// Stride, when above 1, checks every Stride-th crash point (offset by
	// the seed) plus the first and the last: the quick sweep.
	Stride int
	// RecoveryPoints is how many crash points per scenario (evenly spread)
	// get the crash-during-recovery sweep (C10). Negative: every point.
	RecoveryPoints int
	// Faults runs the C9 fault sweep; FaultStride thins it like Stride.
	Faults      bool
	FaultStride int
	// Fault, when set, runs only this fault rule (faultfs.ParseRule).
	Fault string
	// NoCrash skips the crash points (only the fault sweep runs).
	NoCrash bool
	// Flips is how many seeded bit flips per C6 scenario check that
	// corruption in the durable prefix is detected; Flip, when positive,
	// runs only flip number Flip.
	Flips, Flip int64
	// Shard and Shards split the work: this run does task i when
	// i % Shards == Shard.
	Shard, Shards int
	// Weaken sets a canary on every store the sweep opens.
	Weaken testknobs.Weakening
	// StopAtFirst ends the sweep at the first violation (canaries).
	StopAtFirst bool
	// Baseline holds Violation.Key values to leave out of the report: the
	// violations the unweakened store already has, so a canary counts as
	// caught only by a violation of its own.
	Baseline map[string]bool
	// Progress, when set, is called as tasks finish.
	Progress func(done, total int64)
}

// Violation is one claim that did not hold.
type Violation struct {
	Claim     string   `json:"claim"`
	Scenario  string   `json:"scenario"`
	File      string   `json:"file"`
	Model     string   `json:"model,omitempty"`
	Seed      int64    `json:"seed"`
	At        int64    `json:"at,omitempty"`
	Calls     int64    `json:"calls"`
	RecoverAt int64    `json:"recover_at,omitempty"`
	Fault     string   `json:"fault,omitempty"`
	Flip      int64    `json:"flip,omitempty"`
	Canary    string   `json:"canary,omitempty"`
	Detail    string   `json:"detail"`
	Trace     []string `json:"trace,omitempty"`
}

// Key identifies a violation by where it happened and which claim broke,
// without the canary: the same key with and without a canary is the same
// finding.
func (v *Violation) Key() string {
	return fmt.Sprintf("%s|%s|%d|%s|%d|%d|%s|%d", v.Claim, v.Scenario, v.At, v.Model, v.Seed, v.RecoverAt, v.Fault, v.Flip)
}

// Args returns the crashsim arguments that reproduce v alone.
func (v *Violation) Args() []string {
	a := []string{"--scenario", v.Scenario}
	if v.File == PartFile {
		a = []string{"--part", v.Scenario}
		if v.At > 0 {
			a = append(a, "--at", fmt.Sprint(v.At))
		}
	} else if v.At < 0 {
		// A reference-run failure: any single point shows it.
		a = append(a, "--at", "1", "--model", "strict")
	} else if v.Fault != "" {
		a = append(a, "--fault", v.Fault)
	} else if v.Flip > 0 {
		a = append(a, "--flip", fmt.Sprint(v.Flip), "--seed", fmt.Sprint(v.Seed))
	} else {
		a = append(a, "--at", fmt.Sprint(v.At), "--model", v.Model, "--seed", fmt.Sprint(v.Seed))
		if v.Model == faultfs.Torn.String() {
			a = append(a, "--torn-seeds", "1")
		}
		if v.RecoverAt > 0 {
			a = append(a, "--recover-at", fmt.Sprint(v.RecoverAt))
		}
	}
	if v.Canary != "" {
		a = append(a, "--canary", v.Canary)
	}
	return a
}

// ScenarioStats sums one scenario's sweep.
type ScenarioStats struct {
	Name       string `json:"name"`
	Calls      int64  `json:"calls"`
	Points     int64  `json:"points"`
	States     int64  `json:"states"`
	Faults     int64  `json:"faults"`
	Recoveries int64  `json:"recovery_crashes"`
	Flips      int64  `json:"bit_flips"`
	Violations int    `json:"violations"`
}

// Report is the result of a sweep.
type Report struct {
	Scenarios  []ScenarioStats `json:"scenarios"`
	Models     []string        `json:"models"`
	Points     int64           `json:"crash_points"`
	States     int64           `json:"states_checked"`
	FaultRuns  int64           `json:"fault_runs"`
	Recoveries int64           `json:"recovery_crashes"`
	Flips      int64           `json:"bit_flips"`
	Violations []Violation     `json:"violations"`
	Elapsed    time.Duration   `json:"elapsed_ns"`
	Seed       int64           `json:"seed"`
	Canary     string          `json:"canary,omitempty"`
}

// PointsPerSecond is the sweep's speed in crash points per second.
func (r *Report) PointsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Points) / r.Elapsed.Seconds()
}

// Sweep runs the configured sweep over scs. It returns an error only for a
// bad configuration; everything the store does wrong, including a scenario
// whose reference run fails, is a Violation.
func Sweep(ctx context.Context, scs []*scenarios.Scenario, cfg Config) (*Report, error) {
	start := time.Now()
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	defer raiseGCPercent()()
	rep := &Report{Seed: cfg.Seed, Canary: CanaryName(cfg.Weaken)}
	ms := cfg.modelSeeds()
	for _, m := range cfg.Models {
		rep.Models = append(rep.Models, m.String())
	}
	refs, tasks := references(scs, &cfg, rep, ms)
	var mine []task
	for i, t := range tasks {
		if i%cfg.Shards == cfg.Shard {
			mine = append(mine, t)
		}
	}
	// A weakening without a canary's name is named by its bits, from here
	// on: the reference runs' violations above keep the name it had.
	if rep.Canary == "" && cfg.Weaken != 0 {
		rep.Canary = fmt.Sprintf("weaken(%d)", cfg.Weaken)
	}
	runTasks(ctx, &cfg, rep, refs, ms, mine)
	for _, s := range rep.Scenarios {
		rep.Points += s.Points
		rep.States += s.States
		rep.FaultRuns += s.Faults
		rep.Recoveries += s.Recoveries
		rep.Flips += s.Flips
	}
	sort.SliceStable(rep.Violations, func(i, j int) bool {
		a, b := rep.Violations[i], rep.Violations[j]
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.At != b.At {
			return a.At < b.At
		}
		if a.Fault != b.Fault {
			return a.Fault < b.Fault
		}
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		return a.Seed < b.Seed
	})
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// references runs every scenario uncrashed and lists its tasks. A scenario
// whose reference run fails gets a violation (of the claim it broke, if it
// names one) and no tasks; its reference is nil.
func references(scs []*scenarios.Scenario, cfg *Config, rep *Report, ms []modelSeed) ([]*reference, []task) {
	refs := make([]*reference, len(scs))
	var tasks []task
	for i, sc := range scs {
		rep.Scenarios = append(rep.Scenarios, ScenarioStats{Name: sc.Name})
		ref, err := safeReference(sc, cfg.Weaken)
		if err != nil {
			claim := "reference"
			var ce *claimError
			if errors.As(err, &ce) {
				claim = string(ce.claim)
			}
			v := Violation{Claim: claim, Scenario: sc.Name, File: sc.File, Canary: rep.Canary, At: -1,
				Detail: "the scenario's uncrashed, fault-free run failed: " + err.Error()}
			rep.Violations = append(rep.Violations, v)
			rep.Scenarios[i].Violations++
			continue
		}
		refs[i] = ref
		rep.Scenarios[i].Calls = ref.calls
		tasks = append(tasks, cfg.tasks(i, ref, ms)...)
	}
	return refs, tasks
}

// runTasks runs the tasks on cfg.Workers workers and adds their counts and
// violations (less the baseline's) to rep. It stops feeding tasks when ctx
// ends, or at the first violation with StopAtFirst.
func runTasks(ctx context.Context, cfg *Config, rep *Report, refs []*reference, ms []modelSeed, mine []task) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		done  atomic.Int64
		total = int64(len(mine))
		ch    = make(chan task)
		wg    sync.WaitGroup
	)
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				res := runTask(refs[t.sc], t, ms, cfg)
				mu.Lock()
				stop := rep.add(t.sc, res, cfg)
				mu.Unlock()
				if stop {
					cancel()
				}
				d := done.Add(1)
				if cfg.Progress != nil {
					cfg.Progress(d, total)
				}
			}
		}()
	}
feed:
	for _, t := range mine {
		select {
		case ch <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
}

// add counts a task's result into the scenario's stats and keeps its
// violations that the baseline does not hold. It reports whether the sweep
// should stop (StopAtFirst and a violation). The caller serialises calls.
func (rep *Report) add(sc int, res taskResult, cfg *Config) (stop bool) {
	kept := res.violations[:0]
	for _, v := range res.violations {
		if cfg.Baseline[v.Key()] {
			continue
		}
		v.Canary = rep.Canary
		kept = append(kept, v)
	}
	res.violations = kept
	st := &rep.Scenarios[sc]
	st.Points += res.points
	st.States += res.states
	st.Faults += res.faults
	st.Recoveries += res.recoveries
	st.Flips += res.flips
	st.Violations += len(res.violations)
	rep.Violations = append(rep.Violations, res.violations...)
	return cfg.StopAtFirst && len(rep.Violations) > 0
}

// sweepGCPercent is the GC target while a sweep runs. A crash point
// allocates megabytes (every store open reads its journal segment) and keeps
// almost none, so at the default of 100 the collector and the scavenger ran
// almost all the time: measured, the same sweep took 4x the CPU time at 100
// as at 400, for 150-280 MB of RSS instead of 30 MB.
const sweepGCPercent = 400

// raiseGCPercent raises the GC target to sweepGCPercent unless it is already
// higher (or off) and returns the function that restores it.
func raiseGCPercent() func() {
	old := debug.SetGCPercent(sweepGCPercent)
	if old < 0 || old >= sweepGCPercent {
		debug.SetGCPercent(old)
		return func() {}
	}
	return func() { debug.SetGCPercent(old) }
}

// runTask runs one task. A panic in the store (or the sweep) becomes a
// violation naming the task, so one bad point cannot end a release sweep
// without a reproduction.
func runTask(ref *reference, t task, ms []modelSeed, cfg *Config) (res taskResult) {
	defer func() {
		if p := recover(); p != nil {
			v := Violation{Claim: "panic", Scenario: ref.sc.Name, File: ref.sc.File, At: t.n, Calls: ref.calls,
				Seed: cfg.Seed, RecoverAt: t.r, Fault: t.rule, Flip: t.flip,
				Detail: fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}
			if t.kind == taskCrash || t.kind == taskRecover {
				v.Model = faultfs.Strict.String()
				if t.kind == taskRecover {
					v.Model, v.Seed = t.model.model.String(), t.model.seed
				}
				v.Trace = ref.traceAround(t.n)
			}
			res = taskResult{violations: []Violation{v}}
		}
	}()
	switch t.kind {
	case taskCrash:
		return crashTask(ref, t, ms, cfg)
	case taskFault:
		return faultTask(ref, t, cfg)
	case taskRecover:
		return recoverTask(ref, t, cfg)
	case taskCorrupt:
		return corruptTask(ref, t, cfg)
	}
	return taskResult{}
}

func (cfg *Config) normalize() error {
	if len(cfg.Models) == 0 {
		cfg.Models = []faultfs.Model{faultfs.ProcessCrash, faultfs.Strict, faultfs.Torn}
	}
	// The process-crash clone doubles as the reader at the crash instant, so
	// it is checked first.
	slices.SortStableFunc(cfg.Models, func(a, b faultfs.Model) int {
		if a == faultfs.ProcessCrash && b != faultfs.ProcessCrash {
			return -1
		}
		if b == faultfs.ProcessCrash && a != faultfs.ProcessCrash {
			return 1
		}
		return 0
	})
	if cfg.TornSeeds == 0 {
		cfg.TornSeeds = 3
	}
	if cfg.TornSeeds < 0 {
		return fmt.Errorf("%w: torn seeds %d < 0", ErrConfig, cfg.TornSeeds)
	}
	if cfg.Workers <= 0 {
		// More workers than cores: a store Open after a power loss waits
		// in short sleeps (re-reading the state file), and those waits
		// overlap. Results do not depend on the worker count.
		cfg.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.Shards < 0 || cfg.Shard < 0 || cfg.Shard >= cfg.Shards {
		return fmt.Errorf("%w: shard %d/%d: want 0 <= i < n", ErrConfig, cfg.Shard, cfg.Shards)
	}
	if cfg.At < 0 || cfg.RecoverAt < 0 {
		return fmt.Errorf("%w: crash points are positive", ErrConfig)
	}
	if cfg.RecoverAt > 0 && cfg.At == 0 {
		return fmt.Errorf("%w: --recover-at needs --at", ErrConfig)
	}
	if cfg.Fault != "" {
		if _, err := faultfs.ParseRule(cfg.Fault); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		cfg.Faults = true
		cfg.NoCrash = true
	}
	if cfg.Flips < 0 || cfg.Flip < 0 {
		return fmt.Errorf("%w: bit flips are counted from 1", ErrConfig)
	}
	if cfg.Flip > 0 {
		cfg.NoCrash, cfg.Faults = true, false
	}
	if cfg.At > 0 {
		cfg.Faults = cfg.Fault != ""
		cfg.Flips = 0
	}
	if cfg.Fault != "" {
		cfg.Flips = 0
	}
	return nil
}

// QuickConfig is the bounded sweep run on every push (crashsim --quick) and
// by the self-test: every scenario, every third crash point (seeded offset,
// plus the first and the last), one torn seed, the crash-during-recovery
// sweep at one point per scenario, every sixth fault, and eight bit flips.
func QuickConfig() Config {
	return Config{Stride: 3, FaultStride: 6, TornSeeds: 1, RecoveryPoints: 1, Faults: true, Flips: 8, Seed: 1}
}

// FullConfig is the release sweep (crashsim --sweep): every crash point,
// three torn seeds, the crash-during-recovery sweep at four points per
// scenario, every fault, and 32 bit flips.
func FullConfig() Config {
	return Config{TornSeeds: 3, RecoveryPoints: 4, Faults: true, Flips: 32, Seed: 1}
}
