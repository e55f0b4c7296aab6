// Command peerbench measures SwarmOps against SQLite, bbolt and Pebble on
// the same transaction and the workloads W1–W6 (bench/README.md), and
// writes the results as JSON and as a Markdown table with ratios against
// the best durable peer and against the performance targets P2–P7
// (docs/performance.md).
//
// Usage:
//
//	peerbench [--quick] [--engines swarmops,swarmops-serve,sqlite,...] [--workloads W1,W2,...] \
//	          [--dir DIR] [--json FILE] [--md FILE]
//
// Every measurement records the 1-minute load, a raw fdatasync probe and the
// free space; the engines run in counterbalanced order (A B … B A); each cell
// is the median over the runs with the [min–max] range. The harness re-execs
// itself for the multi-process workloads (the hidden "child" command).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/swarmops/swarmops/bench/engine"
	"github.com/swarmops/swarmops/bench/internal/rerender"
)

type harness struct {
	dir      string
	engines  []engine.Engine
	runs     int
	quick    bool
	seed     uint64
	minFree  float64
	w1N      int
	w1Warm   int
	w2N      int
	writers  int
	sizes    []int
	lookups  int
	opens    int
	kills    int
	killMin  time.Duration
	killMax  time.Duration
	w6Dur    time.Duration
	syncN    int
	syncRuns int
	keep     bool
	results  []Result
	self     string
	progress bool
}

// Result is one measurement of one engine in one run.
type Result struct {
	Workload string             `json:"workload"`
	Engine   string             `json:"engine"`
	Model    string             `json:"model,omitempty"` // "threads", "processes"
	Size     int                `json:"size,omitempty"`
	Run      int                `json:"run"`
	Env      Env                `json:"env"`
	Metrics  map[string]float64 `json:"metrics"`
	Note     string             `json:"note,omitempty"`
	Error    string             `json:"error,omitempty"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := child(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "peerbench child: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// PEERBENCH_BLOCKPROFILE=FILE records where the harness's own
	// goroutines block (W6's reader beside its writer runs in this
	// process) and writes the profile to FILE at the end, and the mutex
	// profile, which charges each wait to the holder's unlock, to
	// FILE.mutex.
	if pf := os.Getenv("PEERBENCH_BLOCKPROFILE"); pf != "" {
		runtime.SetBlockProfileRate(1000) // one event per microsecond blocked
		runtime.SetMutexProfileFraction(1)
		defer func() {
			for _, p := range []struct{ name, file string }{{"block", pf}, {"mutex", pf + ".mutex"}} {
				f, err := os.Create(p.file)
				if err != nil {
					fmt.Fprintf(os.Stderr, "peerbench: PEERBENCH_BLOCKPROFILE=%q: %v\n", pf, err)
					return
				}
				if err := pprof.Lookup(p.name).WriteTo(f, 0); err != nil {
					fmt.Fprintf(os.Stderr, "peerbench: PEERBENCH_BLOCKPROFILE=%q: %v\n", pf, err)
				}
				f.Close()
			}
		}()
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "peerbench: %v\n", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err != nil || n < 32 {
			return nil, fmt.Errorf("--sizes: %q is not a size of at least 32", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runFlags are the command line of a harness run.
type runFlags struct {
	quick, keep                                            bool
	dir, engines, workloads, sizes, jsonOut, mdOut, render string
	runs, w1N, w2N, writers, lookups, opens, kills, syncN  int
	seed                                                   uint64
	minFree                                                float64
	w6                                                     time.Duration
	set                                                    map[string]bool // the flags given
}

func parseRunFlags(args []string) (*runFlags, error) {
	f := &runFlags{set: map[string]bool{}}
	fl := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fl.BoolVar(&f.quick, "quick", false, "small sizes; finishes in under 2 minutes")
	fl.StringVar(&f.dir, "dir", "", "work directory (default: a new temporary directory, removed at the end)")
	fl.StringVar(&f.engines, "engines", "swarmops,sqlite,sqlite-NORMAL,bbolt,pebble", "engines, comma-separated")
	fl.StringVar(&f.workloads, "workloads", "syncs,W1,W2,W3,W4,W5,W6", "workloads, comma-separated")
	fl.IntVar(&f.runs, "runs", 2, "runs per measurement; engines alternate order (A B B A)")
	fl.Uint64Var(&f.seed, "seed", 1, "data seed")
	fl.Float64Var(&f.minFree, "min-free-gib", 5, "refuse to run with less free space than this")
	fl.IntVar(&f.w1N, "w1-n", 2000, "W1 timed commits per run")
	fl.IntVar(&f.w2N, "w2-n", 200, "W2 commits per writer")
	fl.IntVar(&f.writers, "writers", 32, "W2 writers")
	fl.StringVar(&f.sizes, "sizes", "100000,1000000", "W3/W4/W5 store sizes (changesets)")
	fl.IntVar(&f.lookups, "lookups", 20000, "W3 lookups of each kind per run")
	fl.IntVar(&f.opens, "opens", 5, "W4 opens per run")
	fl.IntVar(&f.kills, "kills", 3, "W4 kills per run")
	fl.DurationVar(&f.w6, "w6", 5*time.Second, "W6 duration of the reader beside the writer")
	fl.IntVar(&f.syncN, "sync-n", 1024, "commits in the sync count's difference")
	fl.StringVar(&f.jsonOut, "json", "peerbench.json", "JSON results file")
	fl.StringVar(&f.mdOut, "md", "peerbench.md", "Markdown table file")
	fl.BoolVar(&f.keep, "keep", false, "keep the built W3–W6 stores (with --dir) for inspection")
	fl.StringVar(&f.render, "render", "", "re-render the Markdown of an existing JSON results file and exit")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	fl.Visit(func(fg *flag.Flag) { f.set[fg.Name] = true })
	return f, nil
}

// run runs the harness: the workloads asked for on every engine, then the
// JSON and Markdown reports.
func run(args []string) error {
	f, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	if f.render != "" {
		return rerender.File(f.render, f.mdOut, remarkdown)
	}
	h, err := f.harness()
	if err != nil {
		return err
	}
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	cleanup, err := h.workDir(f.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	// Servers started for swarmops-serve stores stop before their
	// directories go.
	defer engine.StopServers()
	if err := h.checkFree(); err != nil {
		return err
	}
	start := time.Now()
	rep := Report{Date: start.UTC().Format("2006-01-02 15:04 UTC"), Command: "peerbench " + strings.Join(args, " "),
		Machine: machine(h.dir), Quick: h.quick, Runs: h.runs, Seed: h.seed, Sizes: h.sizes,
		W1N: h.w1N, W2Writers: h.writers, W2N: h.w2N, Lookups: h.lookups, W6Seconds: h.w6Dur.Seconds()}
	h.logf("machine: %+v; work dir %s", rep.Machine, h.dir)
	if err := h.runWorkloads(f.workloads); err != nil {
		return err
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Results = h.results
	rep.Summary = summarize(h.results)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.jsonOut, b, 0o644); err != nil {
		return err
	}
	md := markdown(&rep, h.engines)
	if err := os.WriteFile(f.mdOut, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	h.logf("done in %.1f s; %s, %s", rep.Seconds, f.jsonOut, f.mdOut)
	return nil
}

// harness builds the harness the flags describe. --quick shrinks every
// count the command line did not set.
func (f *runFlags) harness() (*harness, error) {
	h := &harness{runs: f.runs, quick: f.quick, seed: f.seed, minFree: f.minFree, w1N: f.w1N, w1Warm: 200,
		w2N: f.w2N, writers: f.writers, lookups: f.lookups, opens: f.opens, kills: f.kills, w6Dur: f.w6,
		syncN: f.syncN, syncRuns: 2, keep: f.keep, killMin: 100 * time.Millisecond, killMax: time.Second, progress: true}
	var err error
	if h.sizes, err = parseSizes(f.sizes); err != nil {
		return nil, err
	}
	if f.quick {
		def := func(name string, set func()) {
			if !f.set[name] {
				set()
			}
		}
		def("w1-n", func() { h.w1N = 100 })
		h.w1Warm = 20
		def("w2-n", func() { h.w2N = 3 })
		def("sizes", func() { h.sizes = []int{5000} })
		def("lookups", func() { h.lookups = 1000 })
		def("opens", func() { h.opens = 2 })
		def("kills", func() { h.kills = 1 })
		def("w6", func() { h.w6Dur = time.Second / 2 })
		def("sync-n", func() { h.syncN = 64 })
		h.syncRuns = 1
		h.killMin, h.killMax = 50*time.Millisecond, 200*time.Millisecond
	}
	if h.runs < 1 || h.w1N < 1 || h.w2N < 1 || h.writers < 1 || h.lookups < 1 || h.opens < 1 || h.kills < 0 || h.syncN < 1 {
		return nil, errors.New("counts (--runs, --w1-n, --w2-n, --writers, --lookups, --opens, --sync-n) must be positive")
	}
	for _, n := range strings.Split(f.engines, ",") {
		e, err := engine.ByName(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		h.engines = append(h.engines, e)
	}
	return h, nil
}

// workDir sets the harness's work directory: dir, or a new temporary one
// that the returned cleanup removes.
func (h *harness) workDir(dir string) (func(), error) {
	if dir != "" {
		h.dir = dir
		return func() {}, os.MkdirAll(h.dir, 0o755)
	}
	var err error
	if h.dir, err = os.MkdirTemp("", "peerbench-"); err != nil {
		return nil, err
	}
	return func() { os.RemoveAll(h.dir) }, nil
}

// runWorkloads runs the comma-separated workloads: syncs, W1 and W2 in the
// order given, then W3–W6 together on one store per engine and size.
func (h *harness) runWorkloads(workloads string) error {
	for _, w := range strings.Split(workloads, ",") {
		w = strings.TrimSpace(w)
		var err error
		switch w {
		case "syncs":
			err = h.syncs()
		case "W1":
			err = h.w1()
		case "W2":
			err = h.w2()
		case "W3", "W4", "W5", "W6":
			// Built together below (one store per engine and size).
		default:
			return fmt.Errorf("--workloads: unknown workload %q", w)
		}
		if err != nil {
			return err
		}
	}
	return h.sized(workloads)
}

// remarkdown rebuilds the summary and the Markdown of a report read back
// from its JSON, so that a report's presentation can change without
// re-measuring (--render).
func remarkdown(rep *Report) string {
	rep.Summary = summarize(rep.Results)
	var engines []engine.Engine
	seen := map[string]bool{}
	for _, e := range engine.Engines() {
		for _, r := range rep.Results {
			if r.Engine == e.Name() && !seen[e.Name()] {
				seen[e.Name()] = true
				engines = append(engines, e)
			}
		}
	}
	return markdown(rep, engines)
}

func (h *harness) logf(f string, a ...any) {
	if h.progress {
		fmt.Fprintf(os.Stderr, "[%s] "+f+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
	}
}

// order is the engines' order in run r: forward on even runs, reversed on
// odd ones, so two runs give A B … B A.
func (h *harness) order(r int) []engine.Engine {
	out := append([]engine.Engine(nil), h.engines...)
	if r%2 == 1 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func (h *harness) fresh(name string) (string, error) {
	d := filepath.Join(h.dir, name)
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	return d, os.MkdirAll(d, 0o755)
}

func (h *harness) record(r Result) {
	if r.Error != "" {
		h.logf("%s %s %s run %d: ERROR %s", r.Workload, r.Engine, r.Model, r.Run, r.Error)
	} else {
		h.logf("%s %s %s size=%d run %d: %v", r.Workload, r.Engine, r.Model, r.Size, r.Run, fmtMetrics(r.Metrics))
	}
	h.results = append(h.results, r)
}

func fmtMetrics(m map[string]float64) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s=%.4g ", k, m[k])
	}
	return b.String()
}

func (h *harness) rng(salt uint64) *rand.Rand { return rand.New(rand.NewPCG(h.seed, salt)) }
