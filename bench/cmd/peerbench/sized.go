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
	"runtime/metrics"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/bench/engine"
)

// built is a store bulk-loaded for W3–W6: its directory, the changesets to
// look up, and its size.
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
	err := withView(e, b.dir, 1, func(_ engine.Store, v engine.View) error {
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
	})
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

// w6 measures a reader's fresh snapshot + get in one process, idle and then
// beside a writer goroutine committing back to back.
func (h *harness) w6(e engine.Engine, b *built, r int) Result {
	res := Result{Workload: "W6", Engine: e.Name(), Size: b.n, Run: r, Env: h.env(), Metrics: map[string]float64{},
		Note: "one process: a reader goroutine's fresh snapshot + get, idle then beside a back-to-back writer goroutine, each phase --w6 long"}
	if err := h.w6run(e, b, r, res.Metrics); err != nil {
		res.Error = err.Error()
	}
	return res
}

// w6run runs W6's two phases on the store b and records their metrics in m.
func (h *harness) w6run(e engine.Engine, b *built, r int, m map[string]float64) error {
	return withView(e, b.dir, 2, func(s engine.Store, v engine.View) error {
		read := func(i int) (time.Duration, error) {
			t0 := time.Now()
			ok, err := v.Fresh(b.samples[i%len(b.samples)])
			d := time.Since(t0)
			if err == nil && !ok {
				err = errors.New("fresh get: wrong answer")
			}
			return d, err
		}
		// One warming pass over the samples, then the idle phase, as long as
		// the phase beside the writer: a shorter one would leave out what the
		// reader meets periodically on its own (its garbage collections, timer
		// ticks), and charge all of it to the writer.
		for i := 0; i < len(b.samples); i++ {
			if _, err := read(i); err != nil {
				return err
			}
		}
		idle, err := h.w6phase(read, m, "idle")
		if err != nil {
			return err
		}
		ref, head, err := chainHead(s, 1)
		if err != nil {
			return err
		}
		w := startW6Writer(s, h.seed, 200+r, ref, head)
		stopTrace, err := startW6Trace(e.Name(), r)
		if err != nil {
			w.finish()
			return err
		}
		defer stopTrace()
		busy, err := h.w6phase(read, m, "busy")
		commits, werr := w.finish()
		if err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		m["idle_p50_us"] = pct(idle, 50)
		m["idle_p99_us"] = pct(idle, 99)
		m["busy_p50_us"] = pct(busy, 50)
		m["busy_p99_us"] = pct(busy, 99)
		m["busy_max_us"] = pct(busy, 100)
		m["p99_ratio"] = m["busy_p99_us"] / m["idle_p99_us"]
		m["writer_commits_per_s"] = float64(commits) / h.w6Dur.Seconds()
		return nil
	})
}

// w6phase reads for --w6 and returns the latencies, recording what the
// process did meanwhile under the phase's name.
func (h *harness) w6phase(read func(int) (time.Duration, error), m map[string]float64, phase string) (lat, error) {
	var l lat
	p := sampleProc()
	t0 := time.Now()
	for i := 0; time.Since(t0) < h.w6Dur; i++ {
		d, err := read(i)
		if err != nil {
			return l, err
		}
		l.add(d)
	}
	p.since(m, phase, time.Since(t0))
	return l, nil
}

// w6Writer is W6's writer goroutine, committing back to back on one chain.
type w6Writer struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	commits int
	err     error
}

func startW6Writer(s engine.Store, seed uint64, w int, ref string, head engine.Key) *w6Writer {
	wr := &w6Writer{stop: make(chan struct{})}
	wr.wg.Add(1)
	go func() {
		defer wr.wg.Done()
		prev := head
		for i := 0; ; i++ {
			select {
			case <-wr.stop:
				return
			default:
			}
			_, _, p, err := commitChain(s, seed, w, i, 1, ref, prev, true)
			if err != nil {
				wr.err = err
				return
			}
			prev = p
			wr.commits++
		}
	}()
	return wr
}

// finish stops the writer and returns its commits and its error.
func (wr *w6Writer) finish() (int, error) {
	close(wr.stop)
	wr.wg.Wait()
	return wr.commits, wr.err
}

// startW6Trace starts an execution trace of the busy phase when
// PEERBENCH_W6TRACE=FILE is set (written to FILE.ENGINE.RUN, for go tool
// trace -pprof=sched). The returned function stops it.
func startW6Trace(engineName string, r int) (func(), error) {
	tf := os.Getenv("PEERBENCH_W6TRACE")
	if tf == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", tf, engineName, r))
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
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

// withView opens the store in dir for handles writers, and one read view
// on it, runs f with both, and closes them.
func withView(e engine.Engine, dir string, handles int, f func(s engine.Store, v engine.View) error) error {
	s, err := e.Open(dir, handles)
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := s.View()
	if err != nil {
		return err
	}
	defer v.Close()
	return f(s, v)
}
