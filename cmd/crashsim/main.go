// Command crashsim is the release gate of SwarmOps: it crashes every
// scenario at every filesystem call under every crash model, checks the
// durability claims on what each crash leaves, and proves its own teeth on
// the store's canary weakenings.
//
//	crashsim --quick                 bounded subset, the main CI job (< 60 s on 2 cores)
//	crashsim --sweep                 every scenario × every point × every model, plus faults
//	crashsim --self-test             every canary must be caught
//	crashsim --generated --depth 3   every generated workload of up to 3 ops, every point, every model
//	crashsim --subprocess            the real swarmops binary with SWARMOPS_TEST_CRASH_AT
//	crashsim --part worktree         one in-process part (worktree, queue, export); --quick and --sweep run all
//	crashsim --sched --seed 11       concurrent agents under the seeded deterministic scheduler
//	crashsim --scenario commit --at 37 --model strict --seed 1    reproduce one point
//
// Exit status: 0 every claim held, 1 a violation (or an undetected canary),
// 2 bad input (flags, scenario files).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/crashsweep/sched"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1
	exitUsage     = 2
)

// reproPrefix starts every reproduction line; it works from the module root.
const reproPrefix = "go run ./cmd/crashsim"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is bad input: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

type options struct {
	sweep, quick, selfTest, subprocess, list bool
	generated                                bool
	sched, schedCrash                        bool
	schedSeeds, schedAgents, schedOps        int
	depth, agents, sample                    int
	genStats                                 *crashsweep.GenStats // what --generated enumerated
	trace                                    bool
	scenario, models, shard, jsonPath        string
	fault, canary, scenarioDir, binary       string
	part                                     string // --part: one in-process part
	at, recoverAt, seed, flips, flip         int64
	tornSeeds, workers, recoveryPoints       int
	stride, faultStride                      int
	noFaults                                 bool
	set                                      map[string]bool // flags given explicitly
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("crashsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.sweep, "sweep", false, "the release sweep: every scenario, every crash point, every model, every fault")
	fs.BoolVar(&o.quick, "quick", false, "a bounded subset for every push (< 60 s on 2 cores)")
	fs.BoolVar(&o.selfTest, "self-test", false, "run every canary weakening; fail if any goes undetected")
	fs.BoolVar(&o.subprocess, "subprocess", false, "crash the real swarmops binary (SWARMOPS_TEST_CRASH_AT) over the CLI write commands")
	fs.BoolVar(&o.list, "list", false, "list the scenarios and their call counts, then exit")
	fs.BoolVar(&o.trace, "trace", false, "print the numbered filesystem calls (crash points) of each selected scenario, then exit")
	fs.StringVar(&o.scenario, "scenario", "*", "scenario name glob")
	fs.StringVar(&o.scenarioDir, "scenarios", "", "load scenarios from this directory instead of the built-in ones")
	fs.StringVar(&o.models, "model", "", "crash models, comma-separated: process, strict, torn (default all)")
	fs.Int64Var(&o.at, "at", 0, "check only crash point N (1-based call number; calls+1 = after the last call)")
	fs.Int64Var(&o.recoverAt, "recover-at", 0, "with --at: crash the recovery at its call R, then recover again")
	fs.Int64Var(&o.seed, "seed", 1, "base seed of torn clones and of the quick sweep's sampling")
	fs.IntVar(&o.tornSeeds, "torn-seeds", 3, "torn clones per crash point (1 in --quick)")
	fs.StringVar(&o.shard, "shard", "", "run shard i of n (i/n, 0 <= i < n)")
	fs.IntVar(&o.workers, "workers", 0, "parallel workers (default: 4×GOMAXPROCS)")
	fs.StringVar(&o.jsonPath, "json", "", "write the report as JSON to this file")
	fs.StringVar(&o.fault, "fault", "", "run only this fault rule (e.g. op=datasync,nth=2,err=syncfail)")
	fs.StringVar(&o.canary, "canary", "", "test only: sweep a store with this canary weakening (see --self-test)")
	fs.BoolVar(&o.noFaults, "no-faults", false, "skip the C9 fault sweep")
	fs.Int64Var(&o.flips, "flips", 32, "seeded bit flips per C6 scenario (default 32; 8 in --quick)")
	fs.Int64Var(&o.flip, "flip", 0, "run only bit flip K (with --seed) of the C6 corruption check")
	fs.IntVar(&o.recoveryPoints, "recovery-points", 4, "crash points per scenario whose recovery is crash-swept (-1: all; 1 in --quick)")
	fs.IntVar(&o.stride, "stride", 1, "check every Nth crash point (3 in --quick)")
	fs.IntVar(&o.faultStride, "fault-stride", 1, "inject at every Nth matching call (6 in --quick)")
	generatedFlags(fs, o)
	schedFlags(fs, o)
	partFlags(fs, o)
	fs.StringVar(&o.binary, "binary", "", "with --subprocess: the swarmops binary (default: go build ./cmd/swarmops)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: crashsim (--quick | --sweep | --self-test | --subprocess | --at N) [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	modes := 0
	for _, m := range []bool{o.sweep, o.quick, o.selfTest, o.subprocess, o.list, o.trace, o.sched, o.part != ""} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		return nil, usagef("give one of --sweep, --quick, --self-test, --subprocess, --list, --sched, --part")
	}

	if o.recoverAt < 0 || (o.recoverAt > 0 && o.at == 0) {
		return nil, usagef("--recover-at needs --at and a positive call number")
	}
	if err := errors.Join(checkGenerated(o), checkSched(o)); err != nil {
		return nil, err
	}
	if modes == 0 && o.at == 0 && o.fault == "" && o.flip == 0 && !o.generated {
		return nil, usagef("nothing to do: give --quick, --sweep, --self-test, --subprocess, --list, --trace, --sched, --part NAME, or --at N / --fault RULE / --flip K to reproduce one point")
	}
	if o.flips < 0 || o.flip < 0 {
		return nil, usagef("--flips and --flip must not be negative")
	}
	if o.at < 0 {
		return nil, usagef("--at %d: crash points are 1-based", o.at)
	}
	if o.seed < 0 {
		return nil, usagef("--seed %d: seeds are non-negative", o.seed)
	}
	if o.tornSeeds < 1 || o.workers < 0 || o.stride < 1 || o.faultStride < 1 {
		return nil, usagef("--torn-seeds, --stride and --fault-stride must be at least 1, --workers not negative")
	}
	return o, nil
}

func parseShard(s string) (int, int, error) {
	if s == "" {
		return 0, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, usagef("--shard %q: want i/n with 0 <= i < n, e.g. 0/4", s)
	}
	return i, n, nil
}

func parseModels(s string) ([]faultfs.Model, error) {
	if s == "" {
		return nil, nil
	}
	var out []faultfs.Model
	for _, p := range strings.Split(s, ",") {
		m, err := faultfs.ParseModel(strings.TrimSpace(p))
		if err != nil {
			return nil, usagef("--model: %v", err)
		}
		out = append(out, m)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "crashsim:", err)
		return exitUsage
	}
	code, err := execute(ctx, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "crashsim:", err)
		var ue *usageError
		if errors.As(err, &ue) || errors.Is(err, scenarios.ErrInvalid) || errors.Is(err, crashsweep.ErrConfig) || errors.Is(err, sched.ErrConfig) {
			return exitUsage
		}
		return exitViolation
	}
	return code
}

func loadScenarios(o *options) ([]*scenarios.Scenario, error) {
	var all []*scenarios.Scenario
	var err error
	if o.generated {
		return generatedScenarios(o)
	}
	if o.scenarioDir != "" {
		all, err = scenarios.LoadDir(os.DirFS(o.scenarioDir), ".")
		if err == nil && len(all) == 0 {
			err = usagef("--scenarios %s: no *.yaml files", o.scenarioDir)
		}
	} else {
		all, err = scenarios.All()
	}
	if err != nil {
		return nil, err
	}
	return scenarios.Select(all, o.scenario)
}

// execute runs what the options ask for: a listing, a trace, a sweep in
// subprocesses, the self-test, or the in-process sweep.
func execute(ctx context.Context, o *options, stdout, stderr io.Writer) (int, error) {
	if o.sched {
		return schedMode(o, stdout)
	}
	if o.part != "" {
		return partMode(ctx, o, stdout)
	}
	scs, err := loadScenarios(o)
	if err != nil {
		return 0, err
	}
	if scs, err = addSample(scs, o, stdout); err != nil {
		return 0, err
	}
	if scs, err = addCanaryWorkloads(scs, o); err != nil {
		return 0, err
	}
	cfg, err := sweepConfig(o)
	if err != nil {
		return 0, err
	}
	switch {
	case o.list:
		return list(scs, !o.set["scenario"], stdout)
	case o.trace:
		return trace(scs, cfg, stdout)
	case o.subprocess:
		return subprocessSweep(ctx, scs, o, stdout, stderr)
	case o.selfTest:
		return selfTest(ctx, scs, cfg, o, stdout, stderr)
	}
	code, err := sweep(ctx, scs, cfg, o, stdout, stderr)
	if err == nil && runsParts(o, cfg) {
		var pcode int
		pcode, err = runParts(ctx, crashsweep.Parts, crashsweep.PartConfig{Weaken: cfg.Weaken}, stdout)
		code = max(code, pcode)
	}
	if err != nil || !o.quick {
		return code, err
	}
	// --quick also runs a sample of scheduler seeds.
	n := quickSchedSeeds
	if o.set["sched-seeds"] {
		n = o.schedSeeds
	}
	if n == 0 {
		return code, nil
	}
	sum, err := runSched(o, n, cfg.Weaken, false)
	if err != nil {
		return 0, err
	}
	if sum.first != nil {
		printSchedFailure(stdout, sum.first, sum.firstCfg)
		code = exitViolation
	}
	fmt.Fprintln(stdout, schedLine(sum, o))
	return code, nil
}

// sweepConfig builds the sweep's configuration from the options: the quick
// or full preset, then every knob the command line set.
func sweepConfig(o *options) (crashsweep.Config, error) {
	shard, shards, err := parseShard(o.shard)
	if err != nil {
		return crashsweep.Config{}, err
	}
	models, err := parseModels(o.models)
	if err != nil {
		return crashsweep.Config{}, err
	}
	cfg := crashsweep.FullConfig()
	switch {
	case o.quick || o.selfTest:
		cfg = crashsweep.QuickConfig()
	case o.generated:
		cfg = crashsweep.GeneratedConfig()
	}
	cfg.Models, cfg.Seed, cfg.Workers = models, o.seed, o.workers
	cfg.At, cfg.RecoverAt, cfg.Shard, cfg.Shards, cfg.Fault, cfg.Flip = o.at, o.recoverAt, shard, shards, o.fault, o.flip
	if o.generated {
		cfg.Shard, cfg.Shards = 0, 1 // generatedScenarios split the workloads
	}
	if o.set["torn-seeds"] {
		cfg.TornSeeds = o.tornSeeds
	}
	if o.set["stride"] {
		cfg.Stride = o.stride
	}
	if o.set["fault-stride"] {
		cfg.FaultStride = o.faultStride
	}
	if o.set["flips"] {
		cfg.Flips = o.flips
	}
	if o.set["recovery-points"] {
		cfg.RecoveryPoints = o.recoveryPoints
	}
	if o.noFaults {
		cfg.Faults = false
	}
	if o.canary != "" && !o.subprocess { // subprocessSweep takes a server canary
		if cfg.Weaken, err = crashsweep.ParseCanary(o.canary); err != nil {
			return crashsweep.Config{}, err
		}
	}
	return cfg, nil
}

// trace prints every scenario's filesystem calls, numbered as crash points.
func trace(scs []*scenarios.Scenario, cfg crashsweep.Config, stdout io.Writer) (int, error) {
	for _, sc := range scs {
		lines, err := crashsweep.Trace(sc, cfg.Weaken)
		if err != nil {
			return exitViolation, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		fmt.Fprintf(stdout, "# %s (%s): %d calls; crash point %d is after the last\n", sc.Name, sc.File, len(lines), len(lines)+1)
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
	}
	return exitOK, nil
}

// sweep runs the in-process sweep, with a progress bar on a terminal, and
// reports its violations.
func sweep(ctx context.Context, scs []*scenarios.Scenario, cfg crashsweep.Config, o *options, stdout, stderr io.Writer) (int, error) {
	bar := progress(stderr, "crash sweep")
	if bar != nil {
		cfg.Progress = func(done, total int64) {
			bar.ChangeMax64(total)
			bar.Set64(done)
		}
	}
	rep, err := crashsweep.Sweep(ctx, scs, cfg)
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return 0, err
	}
	printViolations(stdout, rep.Violations, 20)
	if o.generated {
		fmt.Fprintln(stdout, generatedSummary(rep, o))
	}
	fmt.Fprintln(stdout, summary(rep, len(rep.Models)))
	if err := writeJSON(o.jsonPath, rep); err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return exitViolation, errors.New("interrupted: the sweep is incomplete")
	}
	if len(rep.Violations) > 0 {
		return exitViolation, nil
	}
	return exitOK, nil
}

// list prints the scenarios, then (parts) the in-process parts.
func list(scs []*scenarios.Scenario, parts bool, stdout io.Writer) (int, error) {
	for _, sc := range scs {
		fmt.Fprintf(stdout, "%-18s %-28s ops=%-3d claims=%v\n  %s\n", sc.Name, sc.File, sc.Ops(), sc.Claims, sc.Description)
	}
	for _, p := range crashsweep.Parts {
		if !parts {
			break
		}
		fmt.Fprintf(stdout, "%-18s %-28s (--part %s)\n  %s\n", p.Name, "(in-process part)", p.Name, p.What)
	}
	return exitOK, nil
}

// progress returns a progress bar on a terminal and nil otherwise, so logs
// and CI output stay clean.
func progress(w io.Writer, what string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetItsString("tasks"), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

func summary(rep *crashsweep.Report, models int) string {
	return fmt.Sprintf("crashsim: %d scenarios, %d crash points, %d models, %d states checked, %d fault runs, %d recovery crashes, %d bit flips, %d violations, %.0f points/s (%.1f s)",
		len(rep.Scenarios), rep.Points, models, rep.States, rep.FaultRuns, rep.Recoveries, rep.Flips, len(rep.Violations),
		rep.PointsPerSecond(), rep.Elapsed.Seconds())
}

// repro is the one-line command that reproduces v alone.
func repro(v *crashsweep.Violation) string {
	if v.File == crashsweep.GeneratedFile {
		return reproPrefix + " --generated " + strings.Join(v.Args(), " ")
	}
	return reproPrefix + " " + strings.Join(v.Args(), " ")
}

func printViolations(w io.Writer, vs []crashsweep.Violation, max int) {
	for i := range vs {
		if i == max {
			fmt.Fprintf(w, "... and %d more violations (see --json for all)\n", len(vs)-max)
			break
		}
		printViolation(w, &vs[i])
	}
}

func printViolation(w io.Writer, v *crashsweep.Violation) {
	where := fmt.Sprintf("crash point %d of %d calls, model %s, seed %d", v.At, v.Calls, v.Model, v.Seed)
	if v.Fault != "" {
		where = "fault " + v.Fault
	}
	if v.Flip > 0 {
		where = fmt.Sprintf("bit flip %d, seed %d", v.Flip, v.Seed)
	}
	if v.At < 0 {
		where = "reference run (uncrashed)"
	}
	if v.RecoverAt > 0 {
		where += fmt.Sprintf(", recovery crashed at its call %d", v.RecoverAt)
	}
	canary := ""
	if v.Canary != "" {
		canary = " [canary " + v.Canary + "]"
	}
	what := fmt.Sprintf("scenario %s (%s)", v.Scenario, v.File)
	if v.File == crashsweep.PartFile {
		what, where = "part "+v.Scenario, strings.Replace(where, fmt.Sprintf(" of %d calls", v.Calls), "", 1)
	}
	fmt.Fprintf(w, "VIOLATION %s%s: %s, %s\n  %s\n", v.Claim, canary, what, where, v.Detail)
	if len(v.Trace) > 0 {
		fmt.Fprintln(w, "  calls around it (reference run):")
		for _, t := range v.Trace {
			fmt.Fprintln(w, "    "+t)
		}
	}
	fmt.Fprintf(w, "  reproduce: %s\n", repro(v))
}

func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// jsonResult is one canary's line of the self-test's --json file.
type jsonResult struct {
	Canary    string                `json:"canary"`
	Caught    bool                  `json:"caught"`
	Claim     string                `json:"claim,omitempty"`
	Violation *crashsweep.Violation `json:"violation,omitempty"`
	Repro     string                `json:"reproduce,omitempty"`
}

func selfTest(ctx context.Context, scs []*scenarios.Scenario, cfg crashsweep.Config, o *options, stdout, stderr io.Writer) (int, error) {
	if cfg.Weaken != 0 {
		return 0, usagef("--self-test runs every canary; do not combine it with --canary")
	}
	start := time.Now()
	res, baseline, err := crashsweep.SelfTest(ctx, scs, cfg)
	if err != nil {
		return 0, err
	}
	if n := len(baseline.Violations); n > 0 {
		fmt.Fprintf(stdout, "note: the unweakened store already has %d violations under this sweep (run crashsim --quick); a canary counts as caught only by a violation outside them\n", n)
	}
	missed := 0
	var out []jsonResult
	sc := newSchedCatcher(o)
	for _, r := range res {
		jr := jsonResult{Canary: r.Canary.Name, Caught: r.Caught}
		if !r.Caught {
			// The sweep missed it: the scheduler's interleavings may not.
			sr, c, err := sc.catch(r.Canary.Weaken)
			if err != nil {
				return 0, err
			}
			if sr != nil {
				f := sr.Findings[0]
				jr.Caught, jr.Claim, jr.Repro = true, f.Claim, schedRepro(c)
				fmt.Fprintf(stdout, "canary %-16s caught by %-4s in scheduler seed %d\n    %s\n    reproduce: %s\n",
					r.Canary.Name, f.Claim, sr.Seed, f, jr.Repro)
				out = append(out, jr)
				continue
			}
		}
		if r.Caught {
			v := r.Violation
			jr.Claim, jr.Violation, jr.Repro = v.Claim, v, repro(v)
			where := fmt.Sprintf("point %d, model %s", v.At, v.Model)
			switch {
			case v.Fault != "":
				where = "fault " + v.Fault
			case v.Flip > 0:
				where = fmt.Sprintf("bit flip %d", v.Flip)
			case v.At < 0:
				where = "reference run"
			}
			kind := "scenario"
			if v.File == crashsweep.PartFile {
				kind = "part"
			}
			fmt.Fprintf(stdout, "canary %-16s caught by %-4s in %s %s (%s)\n    %s\n    reproduce: %s\n",
				r.Canary.Name, v.Claim, kind, v.Scenario, where, v.Detail, jr.Repro)
		} else {
			missed++
			fmt.Fprintf(stdout, "canary %-16s NOT CAUGHT (%s): %d points, %d states, %d fault runs checked and every claim held\n",
				r.Canary.Name, r.Canary.Why, r.Report.Points, r.Report.States, r.Report.FaultRuns)
		}
		out = append(out, jr)
	}
	sout, smissed, err := selfTestServer(ctx, stdout, stderr)
	if err != nil {
		return 0, err
	}
	out = append(out, sout...)
	missed += smissed
	total := len(res) + len(sout)
	fmt.Fprintf(stdout, "crashsim --self-test: %d canaries, %d caught, %d missed (%.1f s)\n", total, total-missed, missed, time.Since(start).Seconds())
	if err := writeJSON(o.jsonPath, out); err != nil {
		return 0, err
	}
	if missed > 0 {
		return exitViolation, nil
	}
	return exitOK, nil
}
