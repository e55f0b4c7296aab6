package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	CPUUs     float64   `json:"cpu_us,omitempty"`   // the writer's own CPU over its commits (processes only)
	Switches  int64     `json:"switches,omitempty"` // its context switches over them (processes only)
	Busy      int       `json:"busy"`
	Lat       []float64 `json:"lat,omitempty"`
	Err       string    `json:"err,omitempty"`
}

func (h *harness) w2metrics(res *Result, wall time.Duration, st []writerStat) error {
	var all lat
	lo, hi := 0.0, 0.0
	busy := 0
	cpu, switches := 0.0, int64(0)
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
		cpu += s.CPUUs
		switches += s.Switches
	}
	if cpu > 0 {
		res.Metrics["cpu_us_per_commit"] = cpu / float64(h.writers*h.w2N)
		res.Metrics["switches_per_commit"] = float64(switches) / float64(h.writers*h.w2N)
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
