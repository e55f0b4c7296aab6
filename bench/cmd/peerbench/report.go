package main

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/bench/engine"
)

// Report is the JSON document of one harness run.
type Report struct {
	Date      string    `json:"date"`
	Command   string    `json:"command"`
	Machine   Machine   `json:"machine"`
	Quick     bool      `json:"quick"`
	Runs      int       `json:"runs"`
	Seed      uint64    `json:"seed"`
	Sizes     []int     `json:"sizes"`
	W1N       int       `json:"w1_n"`
	W2Writers int       `json:"w2_writers"`
	W2N       int       `json:"w2_n"`
	Lookups   int       `json:"lookups"`
	W6Seconds float64   `json:"w6_seconds"`
	Seconds   float64   `json:"seconds"`
	Results   []Result  `json:"results"`
	Summary   []Summary `json:"summary"`
}

// Summary is one metric of one cell over the runs.
type Summary struct {
	Workload string  `json:"workload"`
	Engine   string  `json:"engine"`
	Model    string  `json:"model,omitempty"`
	Size     int     `json:"size,omitempty"`
	Metric   string  `json:"metric"`
	Median   float64 `json:"median"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Runs     int     `json:"runs"`
}

func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

type cellKey struct {
	w, e, m string
	n       int
	metric  string
}

func summarize(rs []Result) []Summary {
	vals := map[cellKey][]float64{}
	var order []cellKey
	for _, r := range rs {
		if r.Error != "" {
			continue
		}
		for _, k := range sortedKeys(r.Metrics) {
			ck := cellKey{r.Workload, r.Engine, r.Model, r.Size, k}
			if _, ok := vals[ck]; !ok {
				order = append(order, ck)
			}
			vals[ck] = append(vals[ck], r.Metrics[k])
		}
	}
	var out []Summary
	for _, ck := range order {
		v := vals[ck]
		lo, hi := minmax(v)
		out = append(out, Summary{ck.w, ck.e, ck.m, ck.n, ck.metric, median(v), lo, hi, len(v)})
	}
	return out
}

type table struct{ sum map[cellKey]Summary }

func (t table) get(w, e, m string, n int, metric string) (Summary, bool) {
	s, ok := t.sum[cellKey{w, e, m, n, metric}]
	return s, ok
}

func num(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "–"
	case x == 0:
		return "0"
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	case math.Abs(x) >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

func (t table) cell(w, e, m string, n int, metric string) string {
	s, ok := t.get(w, e, m, n, metric)
	if !ok {
		return "–"
	}
	if s.Runs == 1 || s.Min == s.Max {
		return num(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", num(s.Median), num(s.Min), num(s.Max))
}

func (t table) med(w, e, m string, n int, metric string) float64 {
	if s, ok := t.get(w, e, m, n, metric); ok {
		return s.Median
	}
	return math.NaN()
}

// best returns the best durable peer (not SwarmOps) by metric: the highest
// when higher is better, else the lowest.
func (t table) best(peers []string, w, m string, n int, metric string, higher bool) (string, float64) {
	bn, bv := "", math.NaN()
	for _, p := range peers {
		v := t.med(w, p, m, n, metric)
		if math.IsNaN(v) {
			continue
		}
		if math.IsNaN(bv) || (higher && v > bv) || (!higher && v < bv) {
			bn, bv = p, v
		}
	}
	return bn, bv
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func verdict(ok bool, known bool) string {
	switch {
	case !known:
		return "not measured"
	case ok:
		return "**met**"
	}
	return "**MISSED**"
}

// markdown renders a report as the markdown of the performance notes: the
// run's setting, one section per workload that ran, the targets, and the
// measurements that failed.
func markdown(r *Report, engines []engine.Engine) string {
	w := newMDWriter(r, engines)
	w.header()
	w.syncs()
	w.w1()
	w.w2()
	for _, size := range r.Sizes {
		w.w3(size)
		w.w5(size)
	}
	largest, smallest := 0, 0
	if len(r.Sizes) > 0 {
		largest, smallest = r.Sizes[len(r.Sizes)-1], r.Sizes[0]
	}
	w.w4(largest)
	w.w6(smallest)
	w.targets(largest, smallest)
	w.failures()
	return w.b.String()
}

// lookupKinds are the W3 lookups, in the order of their columns.
var lookupKinds = []string{"get", "prefix", "delta", "miss", "fresh"}

// mdWriter holds what every section of the markdown needs: the report, its
// summary by cell, the engines in order and which of them are the durable
// peers SwarmOps is compared with.
type mdWriter struct {
	r       *Report
	t       table
	b       strings.Builder
	names   []string // every engine, in the order given
	peers   []string // the durable engines other than SwarmOps
	durable map[string]bool
	bestW1  float64 // the best durable peer's W1 commits/s
}

func newMDWriter(r *Report, engines []engine.Engine) *mdWriter {
	w := &mdWriter{r: r, t: table{sum: map[cellKey]Summary{}}, durable: map[string]bool{}}
	for _, s := range r.Summary {
		w.t.sum[cellKey{s.Workload, s.Engine, s.Model, s.Size, s.Metric}] = s
	}
	for _, e := range engines {
		w.names = append(w.names, e.Name())
		w.durable[e.Name()] = e.Durable()
		if e.Durable() && e.Name() != "swarmops" {
			w.peers = append(w.peers, e.Name())
		}
	}
	_, w.bestW1 = w.t.best(w.peers, "W1", "one goroutine", 0, "commits_per_s", true)
	return w
}

func (w *mdWriter) p(f string, a ...any) { fmt.Fprintf(&w.b, f, a...) }

// label names an engine in a table, marking the ones that are not durable.
func (w *mdWriter) label(n string) string {
	if !w.durable[n] {
		return n + " (not durable: reference only)"
	}
	return n
}

// has reports whether workload wl ran (at size, or at any size if size < 0):
// a section is printed only then.
func (w *mdWriter) has(wl string, size int) bool {
	for _, x := range w.r.Summary {
		if x.Workload == wl && (size < 0 || x.Size == size) {
			return true
		}
	}
	return false
}

// probeFor is the median fdatasync probe recorded with a cell's own runs,
// so a latency is compared with the disk as it was then.
func (w *mdWriter) probeFor(wl, e, m string) float64 {
	var ps []float64
	for _, res := range w.r.Results {
		if res.Workload == wl && res.Engine == e && res.Model == m && res.Error == "" && res.Env.ProbeUs > 0 {
			ps = append(ps, res.Env.ProbeUs)
		}
	}
	return median(ps)
}

// header prints the command, the machine, and the ranges of load, sync
// probe and free space over every measurement.
func (w *mdWriter) header() {
	r := w.r
	var loads, probes, frees []float64
	for _, res := range r.Results {
		if res.Env.Time == "" {
			continue
		}
		loads = append(loads, res.Env.Load[0])
		if res.Env.ProbeUs > 0 {
			probes = append(probes, res.Env.ProbeUs)
		}
		frees = append(frees, res.Env.FreeGiB)
	}
	lmin, lmax := minmax(loads)
	pmin, pmax := minmax(probes)
	fmin, _ := minmax(frees)
	probe := median(probes)
	w.p("### Peer comparison, %s\n\n", r.Date)
	w.p("Command: `%s` (quick=%v, %d runs per cell in counterbalanced order, seed %d; %.0f s).\n\n", r.Command, r.Quick, r.Runs, r.Seed, r.Seconds)
	w.p("Machine: %d CPUs (%s), kernel %s, %s, memory %s, %s. strace: %s.\n\n", r.Machine.NumCPU, r.Machine.CPU, r.Machine.Kernel, r.Machine.FS, r.Machine.MemTotal, r.Machine.Go, r.Machine.Strace)
	w.p("Per measurement: 1-minute load %s–%s; raw fdatasync probe (4 KiB overwrite in pre-zeroed, synced space, median of 40) %s µs median [%s–%s]; free space ≥ %.0f GiB.\n\n",
		num(lmin), num(lmax), num(probe), num(pmin), num(pmax), fmin)
	w.p("Cells: median over runs [min–max]. Ratios compare medians of the same run set; \"best peer\" is the best durable peer (SQLite WAL synchronous=FULL, bbolt, Pebble Sync).\n\n")
}

// syncs prints the syncs per commit that strace counted, the note when
// strace was missing, and SwarmOps' own counts through faultfs.
func (w *mdWriter) syncs() {
	t := w.t
	if w.has("syncs", -1) {
		w.p("#### Syncs per commit (strace -f -c on the committing process; difference of two runs over the commits between them)\n\n")
		w.p("| engine | fsync+fdatasync / commit | fdatasync | fsync | sync_file_range |\n|---|---|---|---|---|\n")
		for _, n := range w.names {
			w.p("| %s | %s | %s | %s | %s |\n", w.label(n), t.cell("syncs", n, "", 0, "syncs_per_commit"), t.cell("syncs", n, "", 0, "fdatasync_per_commit"),
				t.cell("syncs", n, "", 0, "fsync_per_commit"), t.cell("syncs", n, "", 0, "sync_file_range_per_commit"))
		}
	}
	for _, res := range w.r.Results {
		if res.Workload == "syncs" && res.Note == "strace not found" {
			w.p("\n#### Syncs per commit\n\nstrace not found: the peers' sync counts were skipped (install strace to count them).\n")
			break
		}
	}
	if _, ok := t.get("syncs-counting", "swarmops", "", 0, "datasync_per_commit"); ok {
		w.p("\nSwarmOps through faultfs.Counting over vfs.OS(): %s data syncs, %s fsyncs, %s directory syncs per commit.\n",
			t.cell("syncs-counting", "swarmops", "", 0, "datasync_per_commit"), t.cell("syncs-counting", "swarmops", "", 0, "sync_per_commit"),
			t.cell("syncs-counting", "swarmops", "", 0, "syncdir_per_commit"))
	}
}

// w1 prints one writer's commit rate and latencies.
func (w *mdWriter) w1() {
	if !w.has("W1", -1) {
		return
	}
	t, m := w.t, "one goroutine"
	w.p("\n#### W1: one writer, back to back (%d timed commits per run)\n\n", w.r.W1N)
	w.p("| engine | commits/s | p50 µs | p99 µs | vs best peer | p50 / fdatasync probe of its runs |\n|---|---|---|---|---|---|\n")
	for _, n := range w.names {
		w.p("| %s | %s | %s | %s | %s | %s |\n", w.label(n), t.cell("W1", n, m, 0, "commits_per_s"), t.cell("W1", n, m, 0, "p50_us"),
			t.cell("W1", n, m, 0, "p99_us"), ratio(t.med("W1", n, m, 0, "commits_per_s"), w.bestW1),
			ratio(t.med("W1", n, m, 0, "p50_us"), w.probeFor("W1", n, m)))
	}
}

// w2 prints many writers' throughput, per model (processes, threads).
func (w *mdWriter) w2() {
	if !w.has("W2", -1) {
		return
	}
	t := w.t
	w.p("\n#### W2: %d writers × %d commits, each on its own chain and ref\n\n", w.r.W2Writers, w.r.W2N)
	w.p("Model: processes = one OS process per writer, each opening the store (SwarmOps, SQLite); threads = one handle shared by %d goroutines (every engine; bbolt and Pebble lock their files to one process).\n\n", w.r.W2Writers)
	w.p("| engine | model | tx/s | spread | Busy | p50 µs | p99 µs | CPU µs a commit | switches a commit | vs best peer (threads) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	_, bestW2 := t.best(w.peers, "W2", "threads", 0, "tx_per_s", true)
	for _, n := range w.names {
		for _, m := range []string{"processes", "threads"} {
			if _, ok := t.get("W2", n, m, 0, "tx_per_s"); !ok {
				continue
			}
			w.p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w.label(n), m, t.cell("W2", n, m, 0, "tx_per_s"), t.cell("W2", n, m, 0, "spread"),
				t.cell("W2", n, m, 0, "busy"), t.cell("W2", n, m, 0, "p50_us"), t.cell("W2", n, m, 0, "p99_us"),
				t.cell("W2", n, m, 0, "cpu_us_per_commit"), t.cell("W2", n, m, 0, "switches_per_commit"), ratio(t.med("W2", n, m, 0, "tx_per_s"), bestW2))
		}
	}
}

// w3 prints warm lookups at one size, and SwarmOps' ratio to SQLite.
func (w *mdWriter) w3(size int) {
	if !w.has("W3", size) {
		return
	}
	t := w.t
	w.p("\n#### W3: warm lookups at %d changesets (%d of each kind per run), p50 µs (p99)\n\n", size, w.r.Lookups)
	w.p("| engine | get | 6-byte prefix | delta hash | miss | fresh snapshot + get |\n|---|---|---|---|---|---|\n")
	for _, n := range w.names {
		if _, ok := t.get("W3", n, "", size, "get_p50_us"); !ok {
			continue
		}
		w.p("| %s |", n)
		for _, k := range lookupKinds {
			w.p(" %s (%s) |", t.cell("W3", n, "", size, k+"_p50_us"), num(t.med("W3", n, "", size, k+"_p99_us")))
		}
		w.p("\n")
	}
	w.p("| swarmops / sqlite p50 |")
	for _, k := range lookupKinds {
		w.p(" %s |", ratio(t.med("W3", "swarmops", "", size, k+"_p50_us"), t.med("W3", "sqlite", "", size, k+"_p50_us")))
	}
	w.p("\n")
}

// w5 prints bytes on disk at one size.
func (w *mdWriter) w5(size int) {
	if !w.has("W5", size) {
		return
	}
	w.p("\n#### W5: bytes on disk at %d changesets (allocated, as du counts; store settled and closed)\n\n", size)
	w.p("| engine | bytes / changeset | MiB | load s | how loaded |\n|---|---|---|---|---|\n")
	w.rows(size, []col{{"W5", "bytes_per_changeset"}, {"W5", "total_mib"}, {"W5", "load_s"}}, func(n string) string {
		if n == "swarmops" {
			return "durable core.Commit from 32 goroutines (no bulk path)"
		}
		return "big transactions, then settled"
	})
}

// w4 prints open, first lookup and recovery after SIGKILL at the largest size.
func (w *mdWriter) w4(largest int) {
	if !w.has("W4open", -1) && !w.has("W4recover", -1) {
		return
	}
	w.p("\n#### W4: open + first lookup, and recovery after SIGKILL, at %d changesets\n\n", largest)
	w.p("| engine | open µs | first lookup µs | open + lookup µs | process ms | recovery ms (open + first commit) | worst recovery ms | acknowledged lost |\n|---|---|---|---|---|---|---|---|\n")
	w.rows(largest, []col{{"W4open", "open_us"}, {"W4open", "first_lookup_us"}, {"W4open", "open_lookup_us"}, {"W4open", "process_ms"},
		{"W4recover", "recover_ms"}, {"W4recover", "recover_max_ms"}, {"W4recover", "acked_lost"}}, nil)
}

// w6 prints a reader's latency idle and beside a writer, at the smallest size.
func (w *mdWriter) w6(smallest int) {
	if !w.has("W6", -1) {
		return
	}
	w.p("\n#### W6: a reader's fresh snapshot + get beside a back-to-back writer, at %d changesets (one process, two goroutines; %.0f s idle, then %.0f s beside the writer)\n\n", smallest, w.r.W6Seconds, w.r.W6Seconds)
	w.p("| engine | idle p50 µs | idle p99 µs | beside writer p50 µs | p99 µs | max µs | p99 / idle p99 | writer commits/s |\n|---|---|---|---|---|---|---|---|\n")
	w.rows(smallest, []col{{"W6", "idle_p50_us"}, {"W6", "idle_p99_us"}, {"W6", "busy_p50_us"}, {"W6", "busy_p99_us"}, {"W6", "busy_max_us"},
		{"W6", "p99_ratio"}, {"W6", "writer_commits_per_s"}}, nil)
}

// col is a column of a table of medians: a workload's metric.
type col struct{ wl, metric string }

// rows prints a table row for each engine measured at size (its first
// column's cell present): the engine, each column's cell, then what tail
// says of the engine (nil: nothing).
func (w *mdWriter) rows(size int, cols []col, tail func(engine string) string) {
	for _, n := range w.names {
		if _, ok := w.t.get(cols[0].wl, n, "", size, cols[0].metric); !ok {
			continue
		}
		w.p("| %s |", n)
		for _, c := range cols {
			w.p(" %s |", w.t.cell(c.wl, n, "", size, c.metric))
		}
		if tail != nil {
			w.p(" %s |", tail(n))
		}
		w.p("\n")
	}
}

// sw is SwarmOps' median of a cell.
func (w *mdWriter) sw(wl, m string, n int, metric string) float64 {
	return w.t.med(wl, "swarmops", m, n, metric)
}

// known reports whether every value was measured.
func known(x ...float64) bool {
	for _, v := range x {
		if math.IsNaN(v) {
			return false
		}
	}
	return true
}

// targets prints SwarmOps' verdict on each performance target.
func (w *mdWriter) targets(largest, smallest int) {
	w.p("\n#### SwarmOps against its performance targets (docs/performance.md)\n\n| # | target | measured | verdict |\n|---|---|---|---|\n")
	w.writeTargets()
	for _, size := range w.r.Sizes {
		w.lookupTargets(size)
	}
	w.openTargets(largest)
	for _, size := range w.r.Sizes {
		a, s := w.sw("W5", "", size, "bytes_per_changeset"), w.t.med("W5", "sqlite", "", size, "bytes_per_changeset")
		w.p("| P6 | bytes per changeset ≤ SQLite's at %d | %s vs %s (%s) | %s |\n", size, num(a), num(s), ratio(a, s), verdict(a <= s, known(a, s)))
	}
	pr := w.sw("W6", "", smallest, "p99_ratio")
	w.p("| P7 | reader p99 beside writer ≤ 2× idle p99 | %s× | %s |\n", num(pr), verdict(pr <= 2, known(pr)))
}

// writeTargets prints the commit rate and latency targets (P2, P3).
func (w *mdWriter) writeTargets() {
	w1 := w.sw("W1", "one goroutine", 0, "commits_per_s")
	w1p50 := w.sw("W1", "one goroutine", 0, "p50_us")
	w.p("| P2 | W1 ≥ best peer | %s vs %s commits/s (%s) | %s |\n", num(w1), num(w.bestW1), ratio(w1, w.bestW1), verdict(w1 >= w.bestW1, known(w1, w.bestW1)))
	w1probe := w.probeFor("W1", "swarmops", "one goroutine")
	w.p("| P2 | W1 p50 ≤ 1.2× raw fdatasync | %s µs vs probe %s µs of the same runs (%s) | %s |\n", num(w1p50), num(w1probe), ratio(w1p50, w1probe), verdict(w1p50 <= 1.2*w1probe, known(w1p50, w1probe)))
	w2p := w.sw("W2", "processes", 0, "tx_per_s")
	sqp := w.t.med("W2", "sqlite", "processes", 0, "tx_per_s")
	w.p("| P3 | W2 processes ≥ 3× SQLite processes | %s vs %s tx/s (%s) | %s |\n", num(w2p), num(sqp), ratio(w2p, sqp), verdict(w2p >= 3*sqp, known(w2p, sqp)))
	w.p("| P3 | W2 processes ≥ 2× own W1 | %s vs %s (%s) | %s |\n", num(w2p), num(w1), ratio(w2p, w1), verdict(w2p >= 2*w1, known(w2p, w1)))
	spread := w.sw("W2", "processes", 0, "spread")
	busy := w.sw("W2", "processes", 0, "busy")
	w.p("| P3 | spread ≤ 1.05, 0 Busy | spread %s, Busy %s | %s |\n", num(spread), num(busy), verdict(spread <= 1.05 && busy == 0, known(spread, busy)))
}

// lookupTargets prints the lookup targets at one size (P4): no kind slower
// than SQLite's, and a long-lived get within 2 µs.
func (w *mdWriter) lookupTargets(size int) {
	var worse []string
	ok := true
	for _, k := range lookupKinds {
		a, s := w.sw("W3", "", size, k+"_p50_us"), w.t.med("W3", "sqlite", "", size, k+"_p50_us")
		if !known(a, s) {
			ok = false
			worse = append(worse, k+" ?")
			continue
		}
		if a > s {
			worse = append(worse, fmt.Sprintf("%s %s×", k, num(a/s)))
		}
	}
	msg := "every kind ≤ SQLite's p50"
	if len(worse) > 0 {
		msg = "slower than SQLite: " + strings.Join(worse, ", ")
	}
	w.p("| P4 | W3 at %d: no kind slower than SQLite p50 | %s | %s |\n", size, msg, verdict(len(worse) == 0, ok))
	g := w.sw("W3", "", size, "get_p50_us")
	w.p("| P4 | W3 at %d: long-lived get ≤ 2 µs p50 | %s µs | %s |\n", size, num(g), verdict(g <= 2, known(g)))
}

// openTargets prints the open and recovery targets at the largest size (P5).
func (w *mdWriter) openTargets(largest int) {
	ol := w.sw("W4open", "", largest, "open_lookup_us")
	w.p("| P5 | open + first lookup ≤ 0.1 ms at %d | %s µs | %s |\n", largest, num(ol), verdict(ol <= 100, known(ol)))
	rm, rx, sm := w.sw("W4recover", "", largest, "recover_ms"), w.sw("W4recover", "", largest, "recover_max_ms"), w.t.med("W4recover", "sqlite", "", largest, "recover_ms")
	w.p("| P5 | recovery median ≤ SQLite's, worst ≤ 2× its median | %s ms (worst %s) vs SQLite %s ms | %s |\n", num(rm), num(rx), num(sm), verdict(rm <= sm && rx <= 2*sm, known(rm, rx, sm)))
}

// failures lists the measurements that failed, if any.
func (w *mdWriter) failures() {
	var errs []string
	for _, res := range w.r.Results {
		if res.Error != "" {
			errs = append(errs, fmt.Sprintf("- %s %s %s size %d run %d: %s", res.Workload, res.Engine, res.Model, res.Size, res.Run, res.Error))
		}
	}
	if len(errs) > 0 {
		w.p("\n#### Failed measurements\n\n%s\n", strings.Join(errs, "\n"))
	}
}
