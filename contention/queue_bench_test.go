package contention

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// BenchmarkGatedLands times landing 16 agents' changes (2 of which fail
// the check) with a check that costs about a second (sleep 1, then a grep
// for a marker file): all 16 agent processes landing at once, so the
// queue batches them, beside the 16 landing one after another, each
// with its own check; and, to show what batching saves when nothing
// fails, the 16 batched with none failing. Each iteration is a fresh store; the commits are
// not timed. It reports the median wall time of the iterations
// (median-s; run with -benchtime=3x for the median of 3) and the load:
//
//	go test ./contention -run '^$' -bench GatedLands -benchtime=3x
func BenchmarkGatedLands(b *testing.B) {
	var err error
	if knobs, err = KnobsFromEnv(); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "swarmops")
	build := exec.Command("go", "build", "-o", bin, "./cmd/swarmops")
	build.Dir, build.Stderr = "..", os.Stderr
	if err := build.Run(); err != nil {
		b.Fatal(err)
	}
	n := knobs.QueueAgents
	for _, mode := range []struct {
		name     string
		together bool
		failing  bool
	}{{"batched", true, true}, {"one-at-a-time", false, true}, {"batched-none-failing", true, false}} {
		b.Run(mode.name, func(b *testing.B) {
			var walls []float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				root := b.TempDir()
				store, log := filepath.Join(root, "store"), filepath.Join(root, "passed.log")
				base, err := gatedStore(store)
				if err != nil {
					b.Fatal(err)
				}
				changes := make([]string, n)
				for w := range changes {
					if changes[w], err = gatedCommit(bin, store, base, w, mode.failing && (w == 1 || w == n-2)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				res, errs, wall := landAll(bin, store, changes, gatedCheck("1", log), mode.together)
				b.StopTimer()
				ejected := 0
				for w, r := range res {
					if errs[w] != nil {
						b.Fatal(errs[w])
					}
					if r.code == "E_CHECK_FAILED" {
						ejected++
					} else if r.code != "" {
						b.Fatalf("agent %d: %s", w, r.code)
					}
				}
				if want := map[bool]int{true: 2}[mode.failing]; ejected != want {
					b.Fatalf("%d ejected, want %d", ejected, want)
				}
				walls = append(walls, wall.Seconds())
				b.StartTimer()
			}
			sort.Float64s(walls)
			b.ReportMetric(walls[len(walls)/2], "median-s")
			b.Logf("%d lands %s, wall per run %v s, load %s, %s", n, mode.name, walls, LoadAvg(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
		})
	}
}
