package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/internal/testknobs"
)

func traceText(r *Result) string {
	var b strings.Builder
	for _, e := range r.Trace {
		fmt.Fprintln(&b, e)
	}
	for _, f := range r.Findings {
		fmt.Fprintln(&b, f)
	}
	return b.String()
}

func TestSeedsHold(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		r, err := Run(Config{Seed: seed, Crash: seed%2 == 0})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, f := range r.Findings {
			t.Errorf("seed %d: %s", seed, f)
		}
		t.Logf("seed %d: %d steps", seed, len(r.Trace))
	}
}

// TestReplay runs one seed ten times: the trace and the findings must be
// the same every time.
func TestReplay(t *testing.T) {
	for _, c := range []Config{{Seed: 7}, {Seed: 11, Crash: true}, {Seed: 68, Weaken: testknobs.QueueSkipWaiter}} {
		first := ""
		for i := 0; i < 10; i++ {
			r, err := Run(c)
			if err != nil {
				t.Fatal(err)
			}
			if c.Weaken != 0 && !r.Failed() {
				t.Fatalf("%s: run %d holds, the canary's seed must fail", ReplayCommand(c), i+1)
			}
			got := traceText(r)
			if i == 0 {
				first = got
				continue
			}
			if got != first {
				t.Fatalf("%s: run %d differs from run 1", ReplayCommand(c), i+1)
			}
		}
	}
}

// TestSchedCanariesAreCaught: each canary no sweep catches fails some of
// seeds 1 to 200, and those seeds hold on the correct store.
func TestSchedCanariesAreCaught(t *testing.T) {
	for _, c := range crashsweep.Canaries {
		if !c.Sched {
			continue
		}
		caught := false
		for seed := int64(1); seed <= 200 && !caught; seed++ {
			r, err := Run(Config{Seed: seed, Weaken: c.Weaken})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Failed() {
				continue
			}
			base, err := Run(Config{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			caught = !base.Failed()
		}
		if !caught {
			t.Errorf("canary %s: no seed of 1 to 200 fails with it and holds without it", c.Name)
		}
	}
}
