package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/bench/engine"
)

func TestPercentilesAreNearestRank(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := pct(append([]float64(nil), xs...), c.q); got != c.want {
			t.Errorf("pct(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := median([]float64{3, 1, 2, 4}); got != 2.5 {
		t.Errorf("median = %v, want 2.5 (the mean of the middle two)", got)
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median = %v, want 2", got)
	}
	if !math.IsNaN(pct(nil, 50)) {
		t.Errorf("pct of nothing must be NaN")
	}
}

func TestRunsAreCounterbalanced(t *testing.T) {
	h := &harness{engines: []engine.Engine{engine.SwarmOps{}, engine.Bolt{}, engine.Pebble{}}}
	var got []string
	for r := 0; r < 2; r++ {
		for _, e := range h.order(r) {
			got = append(got, e.Name())
		}
	}
	want := []string{"swarmops", "bbolt", "pebble", "pebble", "bbolt", "swarmops"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v (A B C C B A)", got, want)
		}
	}
}

const straceSample = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 99.72    0.215717         210      1025           fdatasync
  0.28    0.000602         602         1           fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.216319         210      1026           total
`

func TestParseStraceReadsCallsPerSyscall(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(p, []byte(straceSample), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := parseStrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if m["fdatasync"] != 1025 || m["fsync"] != 1 || m["total"] != 0 {
		t.Fatalf("parsed %v, want fdatasync 1025, fsync 1, no total", m)
	}
}

func TestSummaryIsMedianWithRange(t *testing.T) {
	rs := []Result{
		{Workload: "W1", Engine: "x", Metrics: map[string]float64{"r": 3}},
		{Workload: "W1", Engine: "x", Metrics: map[string]float64{"r": 1}},
		{Workload: "W1", Engine: "x", Metrics: map[string]float64{"r": 2}},
		{Workload: "W1", Engine: "x", Metrics: map[string]float64{"r": 100}, Error: "failed runs are left out"},
	}
	s := summarize(rs)
	if len(s) != 1 || s[0].Median != 2 || s[0].Min != 1 || s[0].Max != 3 || s[0].Runs != 3 {
		t.Fatalf("summary = %+v, want median 2 [1–3] over 3 runs", s)
	}
}

func TestFreeSpaceFloorRefuses(t *testing.T) {
	h := &harness{dir: t.TempDir(), minFree: 1e9}
	if err := h.checkFree(); err == nil {
		t.Fatal("a floor above the disk's size must refuse to run")
	}
	h.minFree = 0
	if err := h.checkFree(); err != nil {
		t.Fatalf("a zero floor must run: %v", err)
	}
}

// TestReportSaysWhenSwarmOpsMissesP2 guards the report's honesty: the P2
// row must say MISSED when SwarmOps' W1 rate is below the best durable
// peer's, and met when it is above.
func TestReportSaysWhenSwarmOpsMissesP2(t *testing.T) {
	engines := []engine.Engine{engine.SwarmOps{}, engine.SQLite{Sync: "FULL"}, engine.SQLite{Sync: "NORMAL"}}
	for _, c := range []struct {
		swarm float64
		want  string
	}{{100, "**MISSED**"}, {300, "**met**"}} {
		rep := &Report{Results: []Result{
			{Workload: "W1", Engine: "swarmops", Model: "one goroutine", Metrics: map[string]float64{"commits_per_s": c.swarm}},
			{Workload: "W1", Engine: "sqlite", Model: "one goroutine", Metrics: map[string]float64{"commits_per_s": 200}},
			// The non-durable line is faster than both and must not count as the best peer.
			{Workload: "W1", Engine: "sqlite-NORMAL", Model: "one goroutine", Metrics: map[string]float64{"commits_per_s": 5000}},
		}}
		rep.Summary = summarize(rep.Results)
		md := markdown(rep, engines)
		var row string
		for _, l := range strings.Split(md, "\n") {
			if strings.HasPrefix(l, "| P2 | W1 ≥ best peer") {
				row = l
			}
		}
		if !strings.Contains(row, c.want) {
			t.Errorf("W1 %v against SQLite's 200: P2 row %q, want %s", c.swarm, row, c.want)
		}
	}
}
