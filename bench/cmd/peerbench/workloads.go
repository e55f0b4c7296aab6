package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/bench/engine"
)

// commitChain commits n transactions of writer w's chain, starting at
// position from with parent prev (hasPrev false for a new chain), retrying
// on Busy. It returns the latencies (µs, retries included), the Busy count
// and the last id.
func commitChain(s engine.Store, seed uint64, w, from, n int, ref string, prev engine.Key, hasPrev bool) (lat, int, engine.Key, error) {
	l := make(lat, 0, n)
	busy := 0
	for i := from; i < from+n; i++ {
		t := engine.Gen(seed, w, i)
		if ref != "" {
			t.Ref = ref
		}
		t.Parent, t.HasParent = prev, hasPrev
		t0 := time.Now()
		for {
			id, err := s.Commit(&t)
			if errors.Is(err, engine.ErrBusy) {
				busy++
				continue
			}
			if err != nil {
				return l, busy, prev, fmt.Errorf("writer %d commit %d: %w", w, i, err)
			}
			prev, hasPrev = id, true
			break
		}
		l.add(time.Since(t0))
	}
	return l, busy, prev, nil
}

// ---- syncs per commit ----------------------------------------------------

// syncs counts fsync and fdatasync per commit with strace on a child
// process: once with 32 commits and once with 32+syncN, the difference over
// syncN, so that open, warm-up and close cancel out.
func (h *harness) syncs() error {
	path, err := exec.LookPath("strace")
	if err != nil {
		h.logf("syncs: strace not found; the sync count is skipped (install strace to count)")
		for _, e := range h.engines {
			h.record(Result{Workload: "syncs", Engine: e.Name(), Metrics: map[string]float64{}, Note: "strace not found"})
		}
		return h.countingSyncs()
	}
	for r := 0; r < min(h.runs, h.syncRuns); r++ {
		for _, e := range h.order(r) {
			env := h.env()
			counts := [2]map[string]float64{}
			var ferr error
			for k, n := range []int{32, 32 + h.syncN} {
				d, err := h.fresh("syncs")
				if err != nil {
					return err
				}
				out := filepath.Join(h.dir, "strace.out")
				cmd := exec.Command(path, "-f", "-c", "-o", out, "-e", "trace=fsync,fdatasync,sync_file_range,msync",
					h.self, "child", "commits", "--engine", e.Name(), "--dir", d, "--n", strconv.Itoa(n), "--seed", fmt.Sprint(h.seed))
				cmd.Stderr = os.Stderr
				if err := cmd.Run(); err != nil {
					ferr = fmt.Errorf("strace %s n=%d: %w", e.Name(), n, err)
					break
				}
				if counts[k], err = parseStrace(out); err != nil {
					ferr = err
					break
				}
			}
			res := Result{Workload: "syncs", Engine: e.Name(), Run: r, Env: env, Metrics: map[string]float64{}, Note: "strace -f -c on the committing process"}
			if ferr != nil {
				res.Error = ferr.Error()
			} else {
				for _, sc := range []string{"fsync", "fdatasync", "sync_file_range", "msync"} {
					res.Metrics[sc+"_per_commit"] = (counts[1][sc] - counts[0][sc]) / float64(h.syncN)
				}
				res.Metrics["syncs_per_commit"] = res.Metrics["fsync_per_commit"] + res.Metrics["fdatasync_per_commit"]
			}
			h.record(res)
		}
	}
	return h.countingSyncs()
}

// parseStrace reads strace -c's table: calls per syscall.
func parseStrace(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[len(f)-1] == "total" || strings.HasPrefix(f[0], "%") || strings.HasPrefix(f[0], "-") {
			continue
		}
		calls, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			continue
		}
		m[f[len(f)-1]] = calls
	}
	return m, nil
}

// ---- W1 ------------------------------------------------------------------

func (h *harness) w1() error {
	for r := 0; r < h.runs; r++ {
		for _, e := range h.order(r) {
			if err := h.checkFree(); err != nil {
				return err
			}
			env := h.env()
			res := Result{Workload: "W1", Engine: e.Name(), Model: "one goroutine", Run: r, Env: env, Metrics: map[string]float64{}}
			if err := func() error {
				d, err := h.fresh("w1")
				if err != nil {
					return err
				}
				s, err := e.Open(d, 1)
				if err != nil {
					return err
				}
				defer s.Close()
				_, _, prev, err := commitChain(s, h.seed, 0, 0, h.w1Warm, "", engine.Key{}, false)
				if err != nil {
					return err
				}
				t0 := time.Now()
				l, busy, _, err := commitChain(s, h.seed, 0, h.w1Warm, h.w1N, "", prev, true)
				el := time.Since(t0)
				if err != nil {
					return err
				}
				res.Metrics["commits_per_s"] = float64(h.w1N) / el.Seconds()
				res.Metrics["p50_us"] = pct(l, 50)
				res.Metrics["p99_us"] = pct(l, 99)
				res.Metrics["max_us"] = pct(l, 100)
				res.Metrics["busy"] = float64(busy)
				return nil
			}(); err != nil {
				res.Error = err.Error()
			}
			h.record(res)
		}
	}
	return nil
}

// ---- W2 ------------------------------------------------------------------

func (h *harness) w2() error {
	for r := 0; r < h.runs; r++ {
		for _, e := range h.order(r) {
			models := []string{"threads"}
			// The non-durable reference line skips processes in quick mode,
			// to keep that mode under two minutes.
			if e.MultiProcess() && (e.Durable() || !h.quick) {
				models = []string{"processes", "threads"}
			}
			for _, m := range models {
				if err := h.checkFree(); err != nil {
					return err
				}
				res := Result{Workload: "W2", Engine: e.Name(), Model: m, Run: r, Env: h.env(), Metrics: map[string]float64{}}
				var err error
				if m == "threads" {
					err = h.w2threads(e, &res)
				} else {
					err = h.w2procs(e, &res)
				}
				if err != nil {
					res.Error = err.Error()
				}
				h.record(res)
			}
		}
	}
	return nil
}

// writerStat is one W2 writer's outcome.
type writerStat struct {
	ElapsedUs float64   `json:"elapsed_us"`
	P50Us     float64   `json:"p50_us"`
	P99Us     float64   `json:"p99_us"`
	Busy      int       `json:"busy"`
	Lat       []float64 `json:"lat,omitempty"`
	Err       string    `json:"err,omitempty"`
}

func (h *harness) w2metrics(res *Result, wall time.Duration, st []writerStat) error {
	var all lat
	lo, hi := 0.0, 0.0
	busy := 0
	for i, s := range st {
		if s.Err != "" {
			return fmt.Errorf("writer %d: %s", i, s.Err)
		}
		all = append(all, s.Lat...)
		if i == 0 || s.ElapsedUs < lo {
			lo = s.ElapsedUs
		}
		if s.ElapsedUs > hi {
			hi = s.ElapsedUs
		}
		busy += s.Busy
	}
	res.Metrics["tx_per_s"] = float64(h.writers*h.w2N) / wall.Seconds()
	res.Metrics["spread"] = hi / lo
	res.Metrics["busy"] = float64(busy)
	res.Metrics["p50_us"] = pct(all, 50)
	res.Metrics["p99_us"] = pct(all, 99)
	return nil
}

func (h *harness) w2threads(e engine.Engine, res *Result) error {
	d, err := h.fresh("w2")
	if err != nil {
		return err
	}
	s, err := e.Open(d, h.writers)
	if err != nil {
		return err
	}
	defer s.Close()
	st := make([]writerStat, h.writers)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	for w := 0; w < h.writers; w++ {
		ready.Add(1)
		done.Add(1)
		go func(w int) {
			defer done.Done()
			ready.Done()
			<-gate
			t0 := time.Now()
			l, busy, _, err := commitChain(s, h.seed, w, 0, h.w2N, "", engine.Key{}, false)
			st[w] = writerStat{ElapsedUs: us(time.Since(t0)), Busy: busy, Lat: l}
			if err != nil {
				st[w].Err = err.Error()
			}
		}(w)
	}
	ready.Wait()
	t0 := time.Now()
	close(gate)
	done.Wait()
	return h.w2metrics(res, time.Since(t0), st)
}

func (h *harness) w2procs(e engine.Engine, res *Result) error {
	d, err := h.fresh("w2")
	if err != nil {
		return err
	}
	s, err := e.Open(d, 1) // create it once, before the writers race
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	procs := make([]proc, h.writers)
	defer func() {
		for _, p := range procs {
			if p.cmd != nil && p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	}()
	for w := range procs {
		cmd := exec.Command(h.self, "child", "w2", "--engine", e.Name(), "--dir", d, "--writer", strconv.Itoa(w),
			"--n", strconv.Itoa(h.w2N), "--seed", fmt.Sprint(h.seed))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		procs[w] = proc{cmd, in, bufio.NewReader(out)}
	}
	for w, p := range procs {
		line, err := p.out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return fmt.Errorf("writer process %d did not get ready: %q %v", w, line, err)
		}
	}
	t0 := time.Now()
	for _, p := range procs {
		io.WriteString(p.in, "go\n")
		p.in.Close()
	}
	st := make([]writerStat, h.writers)
	for w, p := range procs {
		line, err := p.out.ReadString('\n')
		if err != nil {
			return fmt.Errorf("writer process %d: %w", w, err)
		}
		if err := json.Unmarshal([]byte(line), &st[w]); err != nil {
			return fmt.Errorf("writer process %d: %q: %w", w, line, err)
		}
	}
	wall := time.Since(t0)
	for w, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			return fmt.Errorf("writer process %d: %w", w, err)
		}
	}
	return h.w2metrics(res, wall, st)
}

// ---- W3–W6 on built stores ------------------------------------------------

type built struct {
	dir     string
	samples []engine.Key // existing changesets, in a seeded order
	deltas  []engine.Key
	n       int
}

func (h *harness) sized(workloads string) error {
	want := map[string]bool{}
	for _, w := range strings.Split(workloads, ",") {
		want[strings.TrimSpace(w)] = true
	}
	if !want["W3"] && !want["W4"] && !want["W5"] && !want["W6"] {
		return nil
	}
	largest, smallest := h.sizes[len(h.sizes)-1], h.sizes[0]
	for _, n := range h.sizes {
		stores := map[string]*built{}
		for _, e := range h.engines {
			if !e.Durable() {
				continue // the non-durable reference line is a W1/W2/W6 matter
			}
			b, err := h.build(e, n)
			if err != nil {
				h.record(Result{Workload: "W5", Engine: e.Name(), Size: n, Error: err.Error(), Metrics: map[string]float64{}})
				continue
			}
			stores[e.Name()] = b
		}
		durable := func(r int) []engine.Engine {
			var out []engine.Engine
			for _, e := range h.order(r) {
				if stores[e.Name()] != nil {
					out = append(out, e)
				}
			}
			return out
		}
		if want["W3"] {
			for r := 0; r < h.runs; r++ {
				for _, e := range durable(r) {
					h.record(h.w3(e, stores[e.Name()], r))
				}
			}
		}
		if want["W4"] && n == largest {
			for r := 0; r < h.runs; r++ {
				for _, e := range durable(r) {
					h.record(h.w4open(e, stores[e.Name()], r))
				}
			}
		}
		if want["W6"] && n == smallest {
			for r := 0; r < h.runs; r++ {
				for _, e := range durable(r) {
					h.record(h.w6(e, stores[e.Name()], r))
				}
			}
		}
		if want["W4"] && n == largest && h.kills > 0 {
			for r := 0; r < h.runs; r++ {
				for _, e := range durable(r) {
					h.record(h.w4recover(e, stores[e.Name()], r))
				}
			}
		}
		for _, b := range stores {
			if !h.keep {
				os.RemoveAll(b.dir)
			}
		}
	}
	return nil
}

// build bulk-loads a store of n changesets in 32 chains and records W5.
func (h *harness) build(e engine.Engine, n int) (*built, error) {
	if err := h.checkFree(); err != nil {
		return nil, err
	}
	env := h.env()
	d, err := h.fresh(fmt.Sprintf("size%d-%s", n, e.Name()))
	if err != nil {
		return nil, err
	}
	const chainsN = 32
	chains := make([][]engine.Txn, chainsN)
	for w := range chains {
		m := n / chainsN
		if w < n%chainsN {
			m++
		}
		chains[w] = make([]engine.Txn, m)
		for i := range chains[w] {
			chains[w][i] = engine.Gen(h.seed, w, i)
		}
	}
	h.logf("building %s at %d", e.Name(), n)
	s, err := e.Open(d, chainsN)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ids, err := s.Load(chains)
	loadS := time.Since(t0).Seconds()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Settle(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	chains = nil
	bytes, err := diskBytes(d)
	if err != nil {
		return nil, err
	}
	note := "bulk load in big transactions, then settled (WAL checkpoint / flush)"
	if e.Name() == "swarmops" {
		note = "loaded by durable core.Commit calls from 32 goroutines (group commit); no bulk path"
	}
	h.record(Result{Workload: "W5", Engine: e.Name(), Size: n, Env: env, Note: note, Metrics: map[string]float64{
		"bytes_per_changeset": float64(bytes) / float64(n), "total_mib": float64(bytes) / (1 << 20), "load_s": loadS,
		"load_per_s": float64(n) / loadS}})
	rng := h.rng(uint64(n))
	b := &built{dir: d, n: n}
	k := min(h.lookups, n)
	for i := 0; i < k; i++ {
		w := rng.IntN(len(ids))
		if len(ids[w]) == 0 {
			continue
		}
		b.samples = append(b.samples, ids[w][rng.IntN(len(ids[w]))])
	}
	return b, nil
}

func (h *harness) w3(e engine.Engine, b *built, r int) Result {
	res := Result{Workload: "W3", Engine: e.Name(), Size: b.n, Run: r, Env: h.env(), Metrics: map[string]float64{},
		Note: "one long-lived read view for get/prefix/delta/miss; fresh = a new snapshot/read transaction + get"}
	err := func() error {
		s, err := e.Open(b.dir, 1)
		if err != nil {
			return err
		}
		defer s.Close()
		v, err := s.View()
		if err != nil {
			return err
		}
		defer v.Close()
		if b.deltas == nil {
			for _, id := range b.samples {
				dh, err := v.DeltaOf(id)
				if err != nil {
					return fmt.Errorf("delta of %x: %w", id[:6], err)
				}
				b.deltas = append(b.deltas, dh)
			}
		}
		kinds := []struct {
			name string
			f    func(i int) (bool, error)
		}{
			{"get", func(i int) (bool, error) { return v.Get(b.samples[i]) }},
			{"prefix", func(i int) (bool, error) { n, err := v.Prefix(b.samples[i][:6]); return n == 1, err }},
			{"delta", func(i int) (bool, error) { n, err := v.ByDelta(b.deltas[i]); return n == 1, err }},
			{"miss", func(i int) (bool, error) { ok, err := v.Get(engine.Miss(h.seed, i)); return !ok, err }},
			{"fresh", func(i int) (bool, error) { return v.Fresh(b.samples[i]) }},
		}
		for _, k := range kinds {
			for pass := 0; pass < 2; pass++ { // pass 0 warms
				l := make(lat, 0, len(b.samples))
				for i := range b.samples {
					t0 := time.Now()
					ok, err := k.f(i)
					l.add(time.Since(t0))
					if err != nil {
						return fmt.Errorf("%s %d: %w", k.name, i, err)
					}
					if !ok {
						return fmt.Errorf("%s %d: wrong answer", k.name, i)
					}
				}
				if pass == 1 {
					res.Metrics[k.name+"_p50_us"] = pct(l, 50)
					res.Metrics[k.name+"_p99_us"] = pct(l, 99)
				}
			}
		}
		return nil
	}()
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// childResult runs a child and decodes its "result" line.
func (h *harness) childResult(args ...string) (map[string]float64, time.Duration, error) {
	cmd := exec.Command(h.self, append([]string{"child"}, args...)...)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	out, err := cmd.Output()
	el := time.Since(t0)
	if err != nil {
		return nil, el, fmt.Errorf("child %v: %w", args[0], err)
	}
	m := map[string]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "result "); ok {
			return m, el, json.Unmarshal([]byte(rest), &m)
		}
	}
	return nil, el, fmt.Errorf("child %v printed no result", args[0])
}

func (h *harness) w4open(e engine.Engine, b *built, r int) Result {
	res := Result{Workload: "W4open", Engine: e.Name(), Size: b.n, Run: r, Env: h.env(), Metrics: map[string]float64{},
		Note: "a fresh process: open + first lookup of one changeset (warm page cache), timed inside the process"}
	var open, look, sum, proc lat
	for i := 0; i < h.opens; i++ {
		id := b.samples[(r*h.opens+i)%len(b.samples)]
		m, el, err := h.childResult("open", "--engine", e.Name(), "--dir", b.dir, "--id", hex.EncodeToString(id[:]))
		if err != nil {
			res.Error = err.Error()
			return res
		}
		open = append(open, m["open_us"])
		look = append(look, m["lookup_us"])
		sum = append(sum, m["open_us"]+m["lookup_us"])
		proc.add(el)
	}
	res.Metrics["open_us"] = median(open)
	res.Metrics["first_lookup_us"] = median(look)
	res.Metrics["open_lookup_us"] = median(sum)
	res.Metrics["open_lookup_max_us"] = pct(sum, 100)
	res.Metrics["process_ms"] = median(proc) / 1e3
	return res
}

func (h *harness) w6(e engine.Engine, b *built, r int) Result {
	res := Result{Workload: "W6", Engine: e.Name(), Size: b.n, Run: r, Env: h.env(), Metrics: map[string]float64{},
		Note: "one process: a reader goroutine's fresh snapshot + get, idle then beside a back-to-back writer goroutine, each phase --w6 long"}
	err := func() error {
		s, err := e.Open(b.dir, 2)
		if err != nil {
			return err
		}
		defer s.Close()
		v, err := s.View()
		if err != nil {
			return err
		}
		defer v.Close()
		read := func(i int) (time.Duration, error) {
			t0 := time.Now()
			ok, err := v.Fresh(b.samples[i%len(b.samples)])
			d := time.Since(t0)
			if err == nil && !ok {
				err = errors.New("fresh get: wrong answer")
			}
			return d, err
		}
		// One warming pass over the samples, then the idle phase, as long
		// as the phase beside the writer: a shorter one would leave out what
		// the reader meets periodically on its own (its garbage
		// collections, timer ticks), and charge all of it to the writer.
		for i := 0; i < len(b.samples); i++ {
			if _, err := read(i); err != nil {
				return err
			}
		}
		var idle lat
		p0 := sampleProc()
		t0 := time.Now()
		for i := 0; time.Since(t0) < h.w6Dur; i++ {
			d, err := read(i)
			if err != nil {
				return err
			}
			idle.add(d)
		}
		p0.since(res.Metrics, "idle", time.Since(t0))
		ref := engine.RefName(1)
		head, ok, err := s.Head(ref)
		if err != nil || !ok {
			return fmt.Errorf("head of %s: %v %v", ref, ok, err)
		}
		stop := make(chan struct{})
		var commits int
		var werr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := head
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _, p, err := commitChain(s, h.seed, 200+r, i, 1, ref, prev, true)
				if err != nil {
					werr = err
					return
				}
				prev = p
				commits++
			}
		}()
		var busy lat
		// PEERBENCH_W6TRACE=FILE writes an execution trace of the busy
		// phase (FILE.ENGINE.RUN), for go tool trace -pprof=sched.
		if tf := os.Getenv("PEERBENCH_W6TRACE"); tf != "" {
			f, err := os.Create(fmt.Sprintf("%s.%s.%d", tf, e.Name(), r))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := trace.Start(f); err != nil {
				return err
			}
			defer trace.Stop()
		}
		p1 := sampleProc()
		t0 = time.Now()
		for i := 0; time.Since(t0) < h.w6Dur; i++ {
			d, err := read(i)
			if err != nil {
				close(stop)
				wg.Wait()
				return err
			}
			busy.add(d)
		}
		p1.since(res.Metrics, "busy", time.Since(t0))
		close(stop)
		wg.Wait()
		if werr != nil {
			return werr
		}
		res.Metrics["idle_p50_us"] = pct(idle, 50)
		res.Metrics["idle_p99_us"] = pct(idle, 99)
		res.Metrics["busy_p50_us"] = pct(busy, 50)
		res.Metrics["busy_p99_us"] = pct(busy, 99)
		res.Metrics["busy_max_us"] = pct(busy, 100)
		res.Metrics["p99_ratio"] = res.Metrics["busy_p99_us"] / res.Metrics["idle_p99_us"]
		res.Metrics["writer_commits_per_s"] = float64(commits) / h.w6Dur.Seconds()
		return nil
	}()
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func (h *harness) w4recover(e engine.Engine, b *built, r int) Result {
	res := Result{Workload: "W4recover", Engine: e.Name(), Size: b.n, Run: r, Env: h.env(), Metrics: map[string]float64{},
		Note: "a writer process committing back to back is SIGKILLed; a fresh process opens, checks the last acknowledged commit, commits one (a process crash, not a power loss)"}
	rng := h.rng(uint64(1000 + r))
	var rec, opens, writes lat
	for k := 0; k < h.kills; k++ {
		tag := strconv.Itoa(300 + r*h.kills + k)
		cmd := exec.Command(h.self, "child", "writer", "--engine", e.Name(), "--dir", b.dir, "--seed", fmt.Sprint(h.seed), "--writer", tag)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			res.Error = err.Error()
			return res
		}
		if err := cmd.Start(); err != nil {
			res.Error = err.Error()
			return res
		}
		br := bufio.NewReader(out)
		first, err := br.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			res.Error = fmt.Sprintf("writer gave no acknowledgement: %v", err)
			return res
		}
		delay := h.killMin + time.Duration(rng.Int64N(int64(h.killMax-h.killMin)+1))
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		rest, _ := io.ReadAll(br)
		cmd.Wait()
		last := ""
		for _, l := range strings.Split(first+string(rest), "\n") {
			if a, ok := strings.CutPrefix(l, "ack "); ok && len(a) == 64 {
				last = a
			}
		}
		m, _, err := h.childResult("recover", "--engine", e.Name(), "--dir", b.dir, "--seed", fmt.Sprint(h.seed),
			"--writer", tag, "--expect", last)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		rec = append(rec, m["open_us"]+m["write_us"])
		opens = append(opens, m["open_us"])
		writes = append(writes, m["write_us"])
		res.Metrics["acked_lost"] += m["lost"]
		res.Metrics["cas_retried"] += m["cas_retried"]
	}
	res.Metrics["recover_ms"] = median(rec) / 1e3
	res.Metrics["recover_max_ms"] = pct(rec, 100) / 1e3
	// Where a recovery goes: the open (replay of the frames past the
	// newest checkpoint) and the first commit, medians apart.
	res.Metrics["recover_open_ms"] = median(opens) / 1e3
	res.Metrics["recover_write_ms"] = median(writes) / 1e3
	return res
}

// procSample is what W6 records of the whole process around each phase, to
// tell a reader's tail that comes from sharing the CPUs from one that comes
// from the engine: the garbage collections, and the time the process's
// threads spent runnable but waiting for a CPU (schedstat's run_delay,
// summed over threads that lived through the phase).
type procSample struct {
	gcCycles uint64
	runDelay map[string]uint64 // by thread id, ns
}

func sampleProc() procSample {
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(ms)
	p := procSample{runDelay: map[string]uint64{}}
	if ms[0].Value.Kind() == metrics.KindUint64 {
		p.gcCycles = ms[0].Value.Uint64()
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				p.runDelay[t.Name()] = v
			}
		}
	}
	return p
}

// since records, under the phase's name, the collections per second and
// the milliseconds per second the process's threads waited for a CPU.
func (p procSample) since(m map[string]float64, phase string, d time.Duration) {
	q := sampleProc()
	var wait uint64
	for id, v := range q.runDelay {
		if v0, ok := p.runDelay[id]; ok && v >= v0 {
			wait += v - v0
		}
	}
	m[phase+"_gc_per_s"] = float64(q.gcCycles-p.gcCycles) / d.Seconds()
	m[phase+"_cpu_wait_ms_per_s"] = float64(wait) / 1e6 / d.Seconds()
}
