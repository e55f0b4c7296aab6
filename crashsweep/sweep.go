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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/core"
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
	if v.At < 0 {
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

type modelSeed struct {
	model faultfs.Model
	seed  int64
}

type taskKind uint8

const (
	taskCrash taskKind = iota
	taskFault
	taskRecover
	taskCorrupt
)

type task struct {
	sc    int
	kind  taskKind
	n     int64
	rule  string
	model modelSeed // taskRecover: the clone whose recovery crashes
	r     int64     // taskRecover: the recovery call that crashes
	flip  int64     // taskCorrupt: which seeded bit flip
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
	var mine []task
	for i, t := range tasks {
		if i%cfg.Shards == cfg.Shard {
			mine = append(mine, t)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		done  atomic.Int64
		total = int64(len(mine))
		ch    = make(chan task)
		wg    sync.WaitGroup
	)
	if rep.Canary == "" && cfg.Weaken != 0 {
		rep.Canary = fmt.Sprintf("weaken(%d)", cfg.Weaken)
	}
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				res := runTask(refs[t.sc], t, ms, &cfg)
				kept := res.violations[:0]
				for _, v := range res.violations {
					if cfg.Baseline[v.Key()] {
						continue
					}
					v.Canary = rep.Canary
					kept = append(kept, v)
				}
				res.violations = kept
				mu.Lock()
				st := &rep.Scenarios[t.sc]
				st.Points += res.points
				st.States += res.states
				st.Faults += res.faults
				st.Recoveries += res.recoveries
				st.Flips += res.flips
				st.Violations += len(res.violations)
				rep.Violations = append(rep.Violations, res.violations...)
				stop := cfg.StopAtFirst && len(rep.Violations) > 0
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

func (cfg *Config) modelSeeds() []modelSeed {
	var out []modelSeed
	for _, m := range cfg.Models {
		if m == faultfs.Torn {
			for i := 0; i < cfg.TornSeeds; i++ {
				out = append(out, modelSeed{m, cfg.Seed + int64(i)})
			}
			continue
		}
		out = append(out, modelSeed{m, cfg.Seed})
	}
	return out
}

// tasks lists a scenario's work: crash points (thinned by Stride) and fault
// rules.
func (cfg *Config) tasks(sc int, ref *reference, ms []modelSeed) []task {
	var out []task
	last := ref.calls + 1
	if !cfg.NoCrash {
		var points []int64
		switch {
		case cfg.At > 0:
			points = []int64{cfg.At}
		case cfg.Stride > 1:
			off := int64(uint64(cfg.Seed) % uint64(cfg.Stride))
			points = append(points, 1)
			for n := 1 + off; n < last; n += int64(cfg.Stride) {
				if n > 1 {
					points = append(points, n)
				}
			}
			points = append(points, last)
		default:
			for n := int64(1); n <= last; n++ {
				points = append(points, n)
			}
		}
		rec := map[int64]bool{}
		if ref.sc.Has(scenarios.C10) {
			switch {
			case cfg.At > 0:
				rec[cfg.At] = cfg.RecoverAt > 0
			case cfg.RecoveryPoints < 0:
				for _, n := range points {
					rec[n] = true
				}
			case cfg.RecoveryPoints > 0:
				k := cfg.RecoveryPoints
				for i := 1; i <= k; i++ {
					rec[points[(len(points)-1)*i/k]] = true
				}
			}
		}
		if cfg.RecoverAt == 0 {
			for _, n := range points {
				out = append(out, task{sc: sc, kind: taskCrash, n: n})
			}
		}
		// The crash-during-recovery sweep: one task per recovery call, so
		// the workers share them.
		for _, n := range points {
			if !rec[n] {
				continue
			}
			for _, m := range ms {
				if m.model == faultfs.ProcessCrash || (m.model == faultfs.Torn && m.seed != cfg.Seed) {
					continue
				}
				lo, hi := int64(1), ref.recoveryCalls(n, m, cfg.Weaken)
				if cfg.RecoverAt > 0 {
					lo, hi = cfg.RecoverAt, cfg.RecoverAt
				}
				for r := lo; r <= hi; r++ {
					out = append(out, task{sc: sc, kind: taskRecover, n: n, model: m, r: r})
				}
			}
		}
	}
	if ref.sc.Has(scenarios.C6) {
		switch {
		case cfg.Flip > 0:
			out = append(out, task{sc: sc, kind: taskCorrupt, flip: cfg.Flip})
		default:
			for k := int64(1); k <= cfg.Flips; k++ {
				out = append(out, task{sc: sc, kind: taskCorrupt, flip: k})
			}
		}
	}
	if cfg.Faults && ref.sc.Has(scenarios.C9) {
		rules := faultRules(ref, cfg.FaultStride, cfg.Seed)
		if cfg.Fault != "" {
			rules = []string{cfg.Fault}
		}
		for _, r := range rules {
			out = append(out, task{sc: sc, kind: taskFault, rule: r})
		}
	}
	return out
}

// makeReference runs the scenario uncrashed on a counting memory filesystem
// and derives the oracle's expectations.
func makeReference(sc *scenarios.Scenario, weaken testknobs.Weakening) (*reference, error) {
	mem := faultfs.NewMem()
	cnt := faultfs.NewCounting(mem)
	cnt.StartTrace()
	r := newRun(sc, cnt, weaken)
	r.steps(sc.Steps)
	cnt.StopTrace()
	ref := &reference{sc: sc, ops: r.ops, order: r.order, trace: cnt.Trace(), calls: cnt.Total(), counts: cnt.Snapshot()}
	if r.stopped != nil {
		return nil, r.stopped
	}
	for _, st := range racesIn(sc.Steps) {
		for _, op := range r.ops {
			if op.step == st.First && st.At == "LOCK" && op.land != nil && op.land.Attempts < 2 {
				return nil, fmt.Errorf("race (%s): the first lander won in %d attempt(s); the race did not happen (does Land take LOCK before its CAS?)", st.Pos, op.land.Attempts)
			}
			if op.step == st.Second && !op.started {
				return nil, fmt.Errorf("race (%s): the first side never took %s, so the second never ran", st.Pos, st.At)
			}
		}
	}
	ref.pos = make([]int, len(r.ops))
	for p, i := range r.order {
		ref.pos[i] = p
	}
	ref.states = []*state{{}}
	cur := &state{}
	seen := map[core.ID]bool{}
	for _, i := range r.order {
		cur = cur.apply(r.ops[i].effect)
		ref.states = append(ref.states, cur)
		for _, id := range r.ops[i].effect.changesets {
			if !seen[id] {
				seen[id] = true
				ref.known = append(ref.known, id)
			}
		}
	}
	// Content of every changeset, read back from the uncrashed store.
	s := r.stores[0]
	if s == nil {
		var err error
		if s, err = r.store(0); err != nil {
			return nil, fmt.Errorf("reopen after the reference run: %w", err)
		}
	}
	sn, err := s.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot after the reference run: %w", err)
	}
	got, err := observeSnapshot(sn, ref.known)
	if err != nil {
		return nil, err
	}
	if !got.equal(cur) {
		return nil, &claimError{scenarios.C1, fmt.Errorf("every operation was acknowledged, but a fresh snapshot after the run shows %s; the operations give %s", got, cur)}
	}
	ref.content = map[core.ID]map[string][32]byte{}
	for _, id := range ref.known {
		files, err := sn.Flatten(id)
		if err != nil {
			return nil, fmt.Errorf("flatten %s: %w", id.String()[:12], err)
		}
		m := map[string][32]byte{}
		for p, e := range files {
			data, err := sn.Blob(e.ID)
			if err != nil {
				return nil, fmt.Errorf("blob %s of %q: %w", e.ID.String()[:12], p, err)
			}
			m[p] = hashBytes(data)
		}
		ref.content[id] = m
	}
	for _, st := range r.stores {
		if st != nil {
			if err := st.Close(); err != nil {
				return nil, fmt.Errorf("close after the reference run: %w", err)
			}
		}
	}
	return ref, nil
}

// safeReference is makeReference with a panic turned into an error.
func safeReference(sc *scenarios.Scenario, weaken testknobs.Weakening) (ref *reference, err error) {
	defer func() {
		if p := recover(); p != nil {
			ref, err = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return makeReference(sc, weaken)
}

// claimError is a reference-run failure that is itself a claim violation.
type claimError struct {
	claim scenarios.Claim
	err   error
}

func (e *claimError) Error() string { return e.err.Error() }
func (e *claimError) Unwrap() error { return e.err }

func racesIn(steps []scenarios.Step) []*scenarios.Step {
	var out []*scenarios.Step
	for i := range steps {
		switch steps[i].Kind {
		case scenarios.KindRace:
			out = append(out, &steps[i])
		case scenarios.KindRepeat:
			out = append(out, racesIn(steps[i].Body)...)
		}
	}
	return out
}

// traceAround formats the reference calls near crash point n.
func (ref *reference) traceAround(n int64) []string {
	var out []string
	for _, c := range ref.trace {
		if c.N < n-6 || c.N > n+2 {
			continue
		}
		mark := "  "
		if c.N == n {
			mark = "=>"
		}
		line := fmt.Sprintf("%s #%d %s %s", mark, c.N, c.Op, c.Path)
		if c.To != "" {
			line += " -> " + c.To
		}
		out = append(out, line)
	}
	if n == ref.calls+1 {
		out = append(out, fmt.Sprintf("=> #%d (after the last call: the run completed)", n))
	}
	return out
}

// opAt names the operation that was running at crash point n.
func (ref *reference) opAt(r *run) string {
	for _, op := range r.ops {
		if op.started && !op.acked {
			return fmt.Sprintf("%s at %s", op.step.Kind, op.step.Pos)
		}
	}
	return "none (between operations)"
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// Trace returns the numbered filesystem calls of a scenario's reference run
// (the crash points), one line per call, with the operation each belongs to.
func Trace(sc *scenarios.Scenario, weaken testknobs.Weakening) ([]string, error) {
	ref, err := makeReference(sc, weaken)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range ref.trace {
		line := fmt.Sprintf("#%d %s %s", c.N, c.Op, c.Path)
		if c.To != "" {
			line += " -> " + c.To
		}
		out = append(out, line)
	}
	return out, nil
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
