package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/bench/engine"
)

// updateReport rewrites testdata/report-*.md instead of comparing against it.
var updateReport = flag.Bool("update", false, "rewrite testdata/report-*.md")

// fullReport is a report in which every section of the markdown has data:
// every workload for every engine and model, two sizes, three runs with
// different values (so cells show ranges), a failed run and a strace note.
// The values follow a fixed formula, so the rendering is reproducible.
func fullReport() (*Report, []engine.Engine) {
	engines := []engine.Engine{engine.SwarmOps{}, engine.SQLite{Sync: "FULL"}, engine.SQLite{Sync: "NORMAL"}, engine.Bolt{}, engine.Pebble{}}
	metrics := map[string][]string{
		"syncs":          {"syncs_per_commit", "fdatasync_per_commit", "fsync_per_commit", "sync_file_range_per_commit"},
		"syncs-counting": {"datasync_per_commit", "sync_per_commit", "syncdir_per_commit"},
		"W1":             {"commits_per_s", "p50_us", "p99_us"},
		"W2":             {"tx_per_s", "spread", "busy", "p50_us", "p99_us", "cpu_us_per_commit", "switches_per_commit"},
		"W3": {"get_p50_us", "get_p99_us", "prefix_p50_us", "prefix_p99_us", "delta_p50_us", "delta_p99_us",
			"miss_p50_us", "miss_p99_us", "fresh_p50_us", "fresh_p99_us"},
		"W4open":    {"open_us", "first_lookup_us", "open_lookup_us", "process_ms"},
		"W4recover": {"recover_ms", "recover_max_ms", "acked_lost"},
		"W5":        {"bytes_per_changeset", "total_mib", "load_s"},
		"W6":        {"idle_p50_us", "idle_p99_us", "busy_p50_us", "busy_p99_us", "busy_max_us", "p99_ratio", "writer_commits_per_s"},
	}
	models := map[string][]string{"W1": {"one goroutine"}, "W2": {"processes", "threads"}}
	sized := map[string]bool{"W3": true, "W4open": true, "W4recover": true, "W5": true, "W6": true}
	rep := &Report{Date: "2000-01-02", Command: "peerbench --quick", Quick: true, Runs: 3, Seed: 7,
		Sizes: []int{1000, 10000}, W1N: 500, W2Writers: 8, W2N: 100, Lookups: 1000, W6Seconds: 2, Seconds: 123,
		Machine: Machine{NumCPU: 2, CPU: "test cpu", Kernel: "6.0", FS: "ext4", MemTotal: "4 GiB", Go: "go1.26", Strace: "strace 6"}}
	seq := 0
	for _, w := range []string{"syncs", "syncs-counting", "W1", "W2", "W3", "W4open", "W4recover", "W5", "W6"} {
		for ei, e := range engines {
			if w == "syncs-counting" && e.Name() != "swarmops" {
				continue
			}
			ms := models[w]
			if ms == nil {
				ms = []string{""}
			}
			sizes := []int{0}
			if sized[w] {
				sizes = rep.Sizes
			}
			for _, m := range ms {
				for _, size := range sizes {
					for run := 0; run < 3; run++ {
						seq++
						res := Result{Workload: w, Engine: e.Name(), Model: m, Size: size, Run: run, Metrics: map[string]float64{},
							Env: Env{Time: fmt.Sprint(seq), Load: [3]float64{0.5 + float64(run), 0, 0}, ProbeUs: 900 + float64(10*run+ei), FreeGiB: 20}}
						for mi, k := range metrics[w] {
							res.Metrics[k] = float64((ei+1)*(mi+2)) * (1 + float64(run)/4) * float64(1+size/1000)
							if w == "W3" && size == 10000 && e.Name() == "swarmops" && mi < 4 {
								res.Metrics[k] *= 3 // slower than SQLite on get and prefix
							}
						}
						rep.Results = append(rep.Results, res)
					}
				}
			}
		}
	}
	rep.Results = append(rep.Results,
		Result{Workload: "syncs", Engine: "pebble", Note: "strace not found"},
		Result{Workload: "W2", Engine: "bbolt", Model: "processes", Run: 1, Error: "bbolt locks its file to one process"})
	rep.Summary = summarize(rep.Results)
	return rep, engines
}

// sparseReport is a report of one W1 run of SwarmOps alone: every other
// section is left out, and every target but W1's is "not measured".
func sparseReport() (*Report, []engine.Engine) {
	rep := &Report{Date: "2000-01-03", Command: "peerbench --only W1", Runs: 1, W1N: 10,
		Results: []Result{{Workload: "W1", Engine: "swarmops", Model: "one goroutine",
			Metrics: map[string]float64{"commits_per_s": 1234.5, "p50_us": 810, "p99_us": 0.0123}}}}
	rep.Summary = summarize(rep.Results)
	return rep, []engine.Engine{engine.SwarmOps{}}
}

// TestMarkdownMatchesTheGoldenReports keeps the rendering of a full and a
// sparse report fixed, so a change to the writer that alters its output is
// seen; rewrite the golden files with -update when the change is meant.
func TestMarkdownMatchesTheGoldenReports(t *testing.T) {
	for name, build := range map[string]func() (*Report, []engine.Engine){
		"report-full.md":   fullReport,
		"report-sparse.md": sparseReport,
	} {
		rep, engines := build()
		got := markdown(rep, engines)
		path := filepath.Join("testdata", name)
		if *updateReport {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; create it with: go test ./cmd/peerbench -run TestMarkdown -update", err)
		}
		if got != string(want) {
			t.Errorf("markdown differs from %s; if the change is meant, rewrite it with: go test ./cmd/peerbench -run TestMarkdown -update\ngot:\n%s", path, got)
		}
	}
}
