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

func markdown(r *Report, engines []engine.Engine) string {
	t := table{sum: map[cellKey]Summary{}}
	for _, s := range r.Summary {
		t.sum[cellKey{s.Workload, s.Engine, s.Model, s.Size, s.Metric}] = s
	}
	var names, peers []string
	durable := map[string]bool{}
	for _, e := range engines {
		names = append(names, e.Name())
		durable[e.Name()] = e.Durable()
		if e.Durable() && e.Name() != "swarmops" {
			peers = append(peers, e.Name())
		}
	}
	label := func(n string) string {
		if !durable[n] {
			return n + " (not durable: reference only)"
		}
		return n
	}
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	// Environment ranges over every measurement.
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
	p("### Peer comparison, %s\n\n", r.Date)
	p("Command: `%s` (quick=%v, %d runs per cell in counterbalanced order, seed %d; %.0f s).\n\n", r.Command, r.Quick, r.Runs, r.Seed, r.Seconds)
	p("Machine: %d CPUs (%s), kernel %s, %s, memory %s, %s. strace: %s.\n\n", r.Machine.NumCPU, r.Machine.CPU, r.Machine.Kernel, r.Machine.FS, r.Machine.MemTotal, r.Machine.Go, r.Machine.Strace)
	p("Per measurement: 1-minute load %s–%s; raw fdatasync probe (4 KiB overwrite in pre-zeroed, synced space, median of 40) %s µs median [%s–%s]; free space ≥ %.0f GiB.\n\n",
		num(lmin), num(lmax), num(probe), num(pmin), num(pmax), fmin)
	p("Cells: median over runs [min–max]. Ratios compare medians of the same run set; \"best peer\" is the best durable peer (SQLite WAL synchronous=FULL, bbolt, Pebble Sync).\n\n")

	has := func(w string, size int) bool {
		for _, x := range r.Summary {
			if x.Workload == w && (size < 0 || x.Size == size) {
				return true
			}
		}
		return false
	}
	// Every section is printed only when its workload ran.
	// Syncs.
	if has("syncs", -1) {
		p("#### Syncs per commit (strace -f -c on the committing process; difference of two runs over the commits between them)\n\n")
		p("| engine | fsync+fdatasync / commit | fdatasync | fsync | sync_file_range |\n|---|---|---|---|---|\n")
		for _, n := range names {
			p("| %s | %s | %s | %s | %s |\n", label(n), t.cell("syncs", n, "", 0, "syncs_per_commit"), t.cell("syncs", n, "", 0, "fdatasync_per_commit"),
				t.cell("syncs", n, "", 0, "fsync_per_commit"), t.cell("syncs", n, "", 0, "sync_file_range_per_commit"))
		}
	}
	for _, res := range r.Results {
		if res.Workload == "syncs" && res.Note == "strace not found" {
			p("\n#### Syncs per commit\n\nstrace not found: the peers' sync counts were skipped (install strace to count them).\n")
			break
		}
	}
	if _, ok := t.get("syncs-counting", "swarmops", "", 0, "datasync_per_commit"); ok {
		p("\nSwarmOps through faultfs.Counting over vfs.OS(): %s data syncs, %s fsyncs, %s directory syncs per commit.\n",
			t.cell("syncs-counting", "swarmops", "", 0, "datasync_per_commit"), t.cell("syncs-counting", "swarmops", "", 0, "sync_per_commit"),
			t.cell("syncs-counting", "swarmops", "", 0, "syncdir_per_commit"))
	}

	// probeFor is the median fdatasync probe recorded with a cell's own
	// runs, so a latency is compared with the disk as it was then.
	probeFor := func(w, e, m string) float64 {
		var ps []float64
		for _, res := range r.Results {
			if res.Workload == w && res.Engine == e && res.Model == m && res.Error == "" && res.Env.ProbeUs > 0 {
				ps = append(ps, res.Env.ProbeUs)
			}
		}
		return median(ps)
	}

	// W1.
	_, bestW1 := t.best(peers, "W1", "one goroutine", 0, "commits_per_s", true)
	if has("W1", -1) {
		p("\n#### W1: one writer, back to back (%d timed commits per run)\n\n", r.W1N)
		p("| engine | commits/s | p50 µs | p99 µs | vs best peer | p50 / fdatasync probe of its runs |\n|---|---|---|---|---|---|\n")
		for _, n := range names {
			p("| %s | %s | %s | %s | %s | %s |\n", label(n), t.cell("W1", n, "one goroutine", 0, "commits_per_s"), t.cell("W1", n, "one goroutine", 0, "p50_us"),
				t.cell("W1", n, "one goroutine", 0, "p99_us"), ratio(t.med("W1", n, "one goroutine", 0, "commits_per_s"), bestW1),
				ratio(t.med("W1", n, "one goroutine", 0, "p50_us"), probeFor("W1", n, "one goroutine")))
		}

	}
	// W2.
	if has("W2", -1) {
		p("\n#### W2: %d writers × %d commits, each on its own chain and ref\n\n", r.W2Writers, r.W2N)
		p("Model: processes = one OS process per writer, each opening the store (SwarmOps, SQLite); threads = one handle shared by %d goroutines (every engine; bbolt and Pebble lock their files to one process).\n\n", r.W2Writers)
		p("| engine | model | tx/s | spread | Busy | p50 µs | p99 µs | vs best peer (threads) |\n|---|---|---|---|---|---|---|---|\n")
		_, bestW2 := t.best(peers, "W2", "threads", 0, "tx_per_s", true)
		for _, n := range names {
			for _, m := range []string{"processes", "threads"} {
				if _, ok := t.get("W2", n, m, 0, "tx_per_s"); !ok {
					continue
				}
				p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", label(n), m, t.cell("W2", n, m, 0, "tx_per_s"), t.cell("W2", n, m, 0, "spread"),
					t.cell("W2", n, m, 0, "busy"), t.cell("W2", n, m, 0, "p50_us"), t.cell("W2", n, m, 0, "p99_us"), ratio(t.med("W2", n, m, 0, "tx_per_s"), bestW2))
			}
		}

	}
	// W5 + W3.
	kinds := []string{"get", "prefix", "delta", "miss", "fresh"}
	for _, size := range r.Sizes {
		if !has("W3", size) {
			goto w5
		}
		p("\n#### W3: warm lookups at %d changesets (%d of each kind per run), p50 µs (p99)\n\n", size, r.Lookups)
		p("| engine | get | 6-byte prefix | delta hash | miss | fresh snapshot + get |\n|---|---|---|---|---|---|\n")
		for _, n := range names {
			if _, ok := t.get("W3", n, "", size, "get_p50_us"); !ok {
				continue
			}
			p("| %s |", n)
			for _, k := range kinds {
				p(" %s (%s) |", t.cell("W3", n, "", size, k+"_p50_us"), num(t.med("W3", n, "", size, k+"_p99_us")))
			}
			p("\n")
		}
		p("| swarmops / sqlite p50 |")
		for _, k := range kinds {
			p(" %s |", ratio(t.med("W3", "swarmops", "", size, k+"_p50_us"), t.med("W3", "sqlite", "", size, k+"_p50_us")))
		}
		p("\n")
	w5:
		if !has("W5", size) {
			continue
		}
		p("\n#### W5: bytes on disk at %d changesets (allocated, as du counts; store settled and closed)\n\n", size)
		p("| engine | bytes / changeset | MiB | load s | how loaded |\n|---|---|---|---|---|\n")
		for _, n := range names {
			if _, ok := t.get("W5", n, "", size, "bytes_per_changeset"); !ok {
				continue
			}
			note := "big transactions, then settled"
			if n == "swarmops" {
				note = "durable core.Commit from 32 goroutines (no bulk path)"
			}
			p("| %s | %s | %s | %s | %s |\n", n, t.cell("W5", n, "", size, "bytes_per_changeset"), t.cell("W5", n, "", size, "total_mib"), t.cell("W5", n, "", size, "load_s"), note)
		}
	}
	largest, smallest := 0, 0
	if len(r.Sizes) > 0 {
		largest, smallest = r.Sizes[len(r.Sizes)-1], r.Sizes[0]
	}
	if has("W4open", -1) || has("W4recover", -1) {
		p("\n#### W4: open + first lookup, and recovery after SIGKILL, at %d changesets\n\n", largest)
		p("| engine | open µs | first lookup µs | open + lookup µs | process ms | recovery ms (open + first commit) | worst recovery ms | acknowledged lost |\n|---|---|---|---|---|---|---|---|\n")
		for _, n := range names {
			if _, ok := t.get("W4open", n, "", largest, "open_us"); !ok {
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", n, t.cell("W4open", n, "", largest, "open_us"), t.cell("W4open", n, "", largest, "first_lookup_us"),
				t.cell("W4open", n, "", largest, "open_lookup_us"), t.cell("W4open", n, "", largest, "process_ms"),
				t.cell("W4recover", n, "", largest, "recover_ms"), t.cell("W4recover", n, "", largest, "recover_max_ms"), t.cell("W4recover", n, "", largest, "acked_lost"))
		}
	}
	if has("W6", -1) {
		p("\n#### W6: a reader's fresh snapshot + get beside a back-to-back writer, at %d changesets (one process, two goroutines; %.0f s idle, then %.0f s beside the writer)\n\n", smallest, r.W6Seconds, r.W6Seconds)
		p("| engine | idle p50 µs | idle p99 µs | beside writer p50 µs | p99 µs | max µs | p99 / idle p99 | writer commits/s |\n|---|---|---|---|---|---|---|---|\n")
		for _, n := range names {
			if _, ok := t.get("W6", n, "", smallest, "idle_p50_us"); !ok {
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", n, t.cell("W6", n, "", smallest, "idle_p50_us"), t.cell("W6", n, "", smallest, "idle_p99_us"),
				t.cell("W6", n, "", smallest, "busy_p50_us"), t.cell("W6", n, "", smallest, "busy_p99_us"), t.cell("W6", n, "", smallest, "busy_max_us"),
				t.cell("W6", n, "", smallest, "p99_ratio"), t.cell("W6", n, "", smallest, "writer_commits_per_s"))
		}

	}
	// Targets.
	p("\n#### SwarmOps against the targets (PRODUCT.md §7)\n\n| # | target | measured | verdict |\n|---|---|---|---|\n")
	sw := func(w, m string, n int, metric string) float64 { return t.med(w, "swarmops", m, n, metric) }
	known := func(x ...float64) bool {
		for _, v := range x {
			if math.IsNaN(v) {
				return false
			}
		}
		return true
	}
	w1 := sw("W1", "one goroutine", 0, "commits_per_s")
	w1p50 := sw("W1", "one goroutine", 0, "p50_us")
	p("| P2 | W1 ≥ best peer | %s vs %s commits/s (%s) | %s |\n", num(w1), num(bestW1), ratio(w1, bestW1), verdict(w1 >= bestW1, known(w1, bestW1)))
	w1probe := probeFor("W1", "swarmops", "one goroutine")
	p("| P2 | W1 p50 ≤ 1.2× raw fdatasync | %s µs vs probe %s µs of the same runs (%s) | %s |\n", num(w1p50), num(w1probe), ratio(w1p50, w1probe), verdict(w1p50 <= 1.2*w1probe, known(w1p50, w1probe)))
	w2p := sw("W2", "processes", 0, "tx_per_s")
	sqp := t.med("W2", "sqlite", "processes", 0, "tx_per_s")
	p("| P3 | W2 processes ≥ 3× SQLite processes | %s vs %s tx/s (%s) | %s |\n", num(w2p), num(sqp), ratio(w2p, sqp), verdict(w2p >= 3*sqp, known(w2p, sqp)))
	p("| P3 | W2 processes ≥ 2× own W1 | %s vs %s (%s) | %s |\n", num(w2p), num(w1), ratio(w2p, w1), verdict(w2p >= 2*w1, known(w2p, w1)))
	spread := sw("W2", "processes", 0, "spread")
	busy := sw("W2", "processes", 0, "busy")
	p("| P3 | spread ≤ 1.05, 0 Busy | spread %s, Busy %s | %s |\n", num(spread), num(busy), verdict(spread <= 1.05 && busy == 0, known(spread, busy)))
	for _, size := range r.Sizes {
		var worse []string
		ok := true
		for _, k := range kinds {
			a, s := sw("W3", "", size, k+"_p50_us"), t.med("W3", "sqlite", "", size, k+"_p50_us")
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
		p("| P4 | W3 at %d: no kind slower than SQLite p50 | %s | %s |\n", size, msg, verdict(len(worse) == 0, ok))
		g := sw("W3", "", size, "get_p50_us")
		p("| P4 | W3 at %d: long-lived get ≤ 2 µs p50 | %s µs | %s |\n", size, num(g), verdict(g <= 2, known(g)))
	}
	ol := sw("W4open", "", largest, "open_lookup_us")
	p("| P5 | open + first lookup ≤ 0.1 ms at %d | %s µs | %s |\n", largest, num(ol), verdict(ol <= 100, known(ol)))
	rm, rx, sm := sw("W4recover", "", largest, "recover_ms"), sw("W4recover", "", largest, "recover_max_ms"), t.med("W4recover", "sqlite", "", largest, "recover_ms")
	p("| P5 | recovery median ≤ SQLite's, worst ≤ 2× its median | %s ms (worst %s) vs SQLite %s ms | %s |\n", num(rm), num(rx), num(sm), verdict(rm <= sm && rx <= 2*sm, known(rm, rx, sm)))
	for _, size := range r.Sizes {
		a, s := sw("W5", "", size, "bytes_per_changeset"), t.med("W5", "sqlite", "", size, "bytes_per_changeset")
		p("| P6 | bytes per changeset ≤ SQLite's at %d | %s vs %s (%s) | %s |\n", size, num(a), num(s), ratio(a, s), verdict(a <= s, known(a, s)))
	}
	pr := sw("W6", "", smallest, "p99_ratio")
	p("| P7 | reader p99 beside writer ≤ 2× idle p99 | %s× | %s |\n", num(pr), verdict(pr <= 2, known(pr)))
	var errs []string
	for _, res := range r.Results {
		if res.Error != "" {
			errs = append(errs, fmt.Sprintf("- %s %s %s size %d run %d: %s", res.Workload, res.Engine, res.Model, res.Size, res.Run, res.Error))
		}
	}
	if len(errs) > 0 {
		p("\n#### Failed measurements\n\n%s\n", strings.Join(errs, "\n"))
	}
	return b.String()
}
