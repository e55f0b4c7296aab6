package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/crashsweep/sched"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// schedFlags defines the flags of the deterministic scheduler.
func schedFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.sched, "sched", false, "run concurrent agents under the seeded deterministic scheduler, seeds --seed to --seed+--sched-seeds-1")
	fs.IntVar(&o.schedSeeds, "sched-seeds", 1, "with --sched: how many seeds; --quick runs this many too (default 1; 100 in --quick)")
	fs.IntVar(&o.schedAgents, "sched-agents", 3, "with --sched: agents, each its own store on the shared filesystem (1-8)")
	fs.IntVar(&o.schedOps, "sched-ops", 4, "with --sched: operations per agent (1-64)")
	fs.BoolVar(&o.schedCrash, "sched-crash", false, "with --sched: crash every agent at a step drawn from the seed, then check a strict power-loss clone too")
}

// quickSchedSeeds is how many scheduler seeds --quick runs.
const quickSchedSeeds = 100

func checkSched(o *options) error {
	if !o.sched && !o.quick && (o.set["sched-seeds"] || o.set["sched-agents"] || o.set["sched-ops"] || o.set["sched-crash"]) {
		return usagef("--sched-seeds, --sched-agents, --sched-ops and --sched-crash need --sched or --quick")
	}
	if o.schedSeeds < 0 || (o.sched && o.schedSeeds < 1) {
		return usagef("--sched-seeds %d: want at least 1 (0 turns the scheduler off in --quick)", o.schedSeeds)
	}
	if o.schedAgents < 1 || o.schedAgents > 8 || o.schedOps < 1 || o.schedOps > 64 {
		return usagef("--sched-agents %d (1-8), --sched-ops %d (1-64) out of range", o.schedAgents, o.schedOps)
	}
	return nil
}

// schedConfig is the scheduler's configuration for one seed.
func schedConfig(o *options, seed int64, w testknobs.Weakening) sched.Config {
	return sched.Config{Seed: seed, Agents: o.schedAgents, Ops: o.schedOps, Crash: o.schedCrash, Weaken: w}
}

// schedSummary is what a pass over scheduler seeds found.
type schedSummary struct {
	seeds, steps, failed int
	first                *sched.Result
	firstCfg             sched.Config
	elapsed              time.Duration
}

// runSched runs n seeds from o.seed with weakening w and stops at the
// first failing seed when stop is set.
func runSched(o *options, n int, w testknobs.Weakening, stop bool) (*schedSummary, error) {
	start := time.Now()
	sum := &schedSummary{}
	for i := 0; i < n; i++ {
		c := schedConfig(o, o.seed+int64(i), w)
		r, err := sched.Run(c)
		if err != nil {
			return nil, err
		}
		sum.seeds++
		sum.steps += len(r.Trace)
		if r.Failed() {
			sum.failed++
			if sum.first == nil {
				sum.first, sum.firstCfg = r, c
			}
			if stop {
				break
			}
		}
	}
	sum.elapsed = time.Since(start)
	return sum, nil
}

// printSchedFailure prints a failing seed: its findings, the end of its
// trace and the line that replays it.
func printSchedFailure(w io.Writer, r *sched.Result, c sched.Config) {
	for _, f := range r.Findings {
		fmt.Fprintf(w, "VIOLATION %s: scheduler seed %d\n", f, r.Seed)
	}
	from := max(0, len(r.Trace)-12)
	if len(r.Findings) > 0 && r.Findings[0].Step > 0 {
		from = max(0, r.Findings[0].Step-10)
	}
	fmt.Fprintln(w, "  scheduling steps before it:")
	for _, e := range r.Trace[from:min(len(r.Trace), from+12)] {
		fmt.Fprintln(w, "    "+e.String())
	}
	fmt.Fprintf(w, "  reproduce: %s\n", schedRepro(c))
}

func schedLine(sum *schedSummary, o *options) string {
	return fmt.Sprintf("crashsim --sched: seeds %d..%d, %d agents × %d ops, %d steps, %d failing seeds, %.0f seeds/s (%.1f s)",
		o.seed, o.seed+int64(sum.seeds)-1, o.schedAgents, o.schedOps, sum.steps, sum.failed,
		float64(sum.seeds)/sum.elapsed.Seconds(), sum.elapsed.Seconds())
}

// schedMode runs --sched.
func schedMode(o *options, stdout io.Writer) (int, error) {
	w, err := canaryOf(o)
	if err != nil {
		return 0, err
	}
	sum, err := runSched(o, o.schedSeeds, w, false)
	if err != nil {
		return 0, err
	}
	if sum.first != nil {
		printSchedFailure(stdout, sum.first, sum.firstCfg)
	}
	fmt.Fprintln(stdout, schedLine(sum, o))
	if sum.failed > 0 {
		return exitViolation, nil
	}
	return exitOK, nil
}

// canaryOf returns the weakening --canary names (0 without it).
func canaryOf(o *options) (testknobs.Weakening, error) {
	if o.canary == "" {
		return 0, nil
	}
	return crashsweep.ParseCanary(o.canary)
}

// schedRepro is the line that replays c, canary included.
func schedRepro(c sched.Config) string {
	line := sched.ReplayCommand(c)
	if n := crashsweep.CanaryName(c.Weaken); n != "" {
		line += " --canary " + n
	}
	return line
}

// selfTestSchedSeeds is how many scheduler seeds the self-test tries on a
// canary the sweep missed (a correct store runs about 150 a second).
const selfTestSchedSeeds = 200

// schedCatcher finds a scheduler seed that fails with a canary and holds
// without it; the correct store's runs are made once, when first needed.
type schedCatcher struct {
	o        *options
	baseline map[int64]bool // seed -> the correct store failed it
}

func newSchedCatcher(o *options) *schedCatcher { return &schedCatcher{o: o} }

func (sc *schedCatcher) catch(w testknobs.Weakening) (*sched.Result, sched.Config, error) {
	if sc.baseline == nil {
		sc.baseline = map[int64]bool{}
		for i := 0; i < selfTestSchedSeeds; i++ {
			seed := sc.o.seed + int64(i)
			r, err := sched.Run(schedConfig(sc.o, seed, 0))
			if err != nil {
				return nil, sched.Config{}, err
			}
			sc.baseline[seed] = r.Failed()
		}
	}
	for i := 0; i < selfTestSchedSeeds; i++ {
		c := schedConfig(sc.o, sc.o.seed+int64(i), w)
		r, err := sched.Run(c)
		if err != nil {
			return nil, sched.Config{}, err
		}
		if r.Failed() && !sc.baseline[c.Seed] {
			return r, c, nil
		}
	}
	return nil, sched.Config{}, nil
}
