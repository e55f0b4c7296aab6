package crashsweep

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

func pick(t *testing.T, pattern string) []*scenarios.Scenario {
	t.Helper()
	all, err := scenarios.All()
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenarios.Select(all, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return scs
}

func reportViolations(t *testing.T, rep *Report) {
	t.Helper()
	for i, v := range rep.Violations {
		if i == 10 {
			t.Errorf("... %d more", len(rep.Violations)-10)
			break
		}
		t.Errorf("%s in %s: %s\n    reproduce: go run ./cmd/crashsim %s", v.Claim, v.Scenario, v.Detail, strings.Join(v.Args(), " "))
	}
}

// TestQuickSweepPasses is the in-process form of the main CI job: every
// scenario under the quick configuration, and every claim must hold.
func TestQuickSweepPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("the quick sweep takes about 15 s; -short skips it")
	}
	rep, err := Sweep(context.Background(), pick(t, "*"), QuickConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scenarios, %d points, %d states, %d fault runs, %d recovery crashes, %d flips in %v",
		len(rep.Scenarios), rep.Points, rep.States, rep.FaultRuns, rep.Recoveries, rep.Flips, rep.Elapsed)
	if rep.Points == 0 || rep.States == 0 {
		t.Fatal("the sweep checked nothing")
	}
	reportViolations(t, rep)
}

// TestAtReplaysASweepViolation sweeps with a canary, takes a violation
// the sweep found, and checks that --at (Config.At with the violation's
// model and seed) finds the same violation alone.
func TestAtReplaysASweepViolation(t *testing.T) {
	scs := pick(t, "commit-advance")
	cfg := Config{Weaken: testknobs.EarlyDurable, RecoveryPoints: 0, TornSeeds: 2, Seed: 7}
	rep, err := Sweep(context.Background(), scs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var found *Violation
	for i := range rep.Violations {
		if v := &rep.Violations[i]; v.Claim == string(scenarios.C4) {
			found = v
			break
		}
	}
	if found == nil {
		t.Fatalf("the early-durable canary produced no C4 violation in %d points", rep.Points)
	}
	model, err := faultfs.ParseModel(found.Model)
	if err != nil {
		t.Fatal(err)
	}
	one, err := Sweep(context.Background(), scs, Config{Weaken: testknobs.EarlyDurable, At: found.At,
		Models: []faultfs.Model{model}, Seed: found.Seed, TornSeeds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if one.Points != 1 {
		t.Fatalf("--at checked %d points, want 1", one.Points)
	}
	for _, v := range one.Violations {
		if v.Key() == found.Key() && v.Detail == found.Detail {
			return
		}
	}
	t.Fatalf("--at %d --model %s --seed %d did not reproduce %q; got %d violations", found.At, found.Model, found.Seed, found.Detail, len(one.Violations))
}

// TestSelfTestCatchesEveryCanary runs each canary through the quick sweep
// of the scenarios that the self-test needs and requires every one caught.
func TestSelfTestCatchesEveryCanary(t *testing.T) {
	if testing.Short() {
		t.Skip("the self-test takes about a minute; -short skips it")
	}
	// The checkpoint and commit scenarios catch the durability canaries;
	// protect catches drop-protections, gc gc-ignores-leases,
	// CanaryWorkloads cas-if-exists and land-no-ff. The scheduler's
	// canaries are missed.
	scs := append(pick(t, "c[ho]*"), append(pick(t, "protect"), pick(t, "gc")...)...)
	for _, name := range CanaryWorkloads {
		scs = append(scs, workloadScenario(t, name))
	}
	res, _, err := SelfTest(context.Background(), scs, QuickConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(Canaries) {
		t.Fatalf("%d results for %d canaries", len(res), len(Canaries))
	}
	for _, r := range res {
		if r.Canary.Sched {
			// The sweep must miss it (else it needs no scheduler); the
			// scheduler's test catches it.
			if r.Caught {
				t.Errorf("canary %s, marked for the scheduler only, was caught by the sweep: %s", r.Canary.Name, r.Violation.Detail)
			}
			continue
		}
		if !r.Caught {
			t.Errorf("canary %s (%s) was not caught: %d points, %d states, %d faults, %d flips held every claim",
				r.Canary.Name, r.Canary.Why, r.Report.Points, r.Report.States, r.Report.FaultRuns, r.Report.Flips)
			continue
		}
		// What each canary was caught by is shown only beside a canary
		// that was not: in a passing run these lines would read as
		// failures.
		caught := fmt.Sprintf("canary %s caught by %s in %s: %s", r.Canary.Name, r.Violation.Claim, r.Violation.Scenario, r.Violation.Detail)
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(caught)
			}
		})
	}
}

// TestSweepIsDeterministic runs the same canary sweep twice and requires
// identical violations: one seed reproduces a run exactly.
func TestSweepIsDeterministic(t *testing.T) {
	scs := pick(t, "torn-tail")
	cfg := Config{Weaken: testknobs.SkipDatasync, RecoveryPoints: 0, Flips: 4, Seed: 3, TornSeeds: 2}
	var keys [2]map[string]int
	for i := range keys {
		rep, err := Sweep(context.Background(), scs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = map[string]int{}
		for _, v := range rep.Violations {
			keys[i][v.Key()+"|"+v.Detail]++
		}
	}
	if len(keys[0]) == 0 {
		t.Fatal("the skip-datasync canary produced no violation to compare")
	}
	if fmt.Sprint(keys[0]) != fmt.Sprint(keys[1]) {
		t.Fatalf("two runs with seed %d differ:\n%v\n%v", cfg.Seed, keys[0], keys[1])
	}
}

func TestBadConfigIsRejected(t *testing.T) {
	scs := pick(t, "init")
	for _, cfg := range []Config{{Shard: 2, Shards: 2}, {Shard: -1, Shards: 2}, {RecoverAt: 3}, {Fault: "op=nope"}, {Flips: -1}} {
		if _, err := Sweep(context.Background(), scs, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

// TestShardsPartitionTheSweep checks that the shards of a CI matrix together
// cover exactly the points of the unsharded sweep.
func TestShardsPartitionTheSweep(t *testing.T) {
	scs := pick(t, "init")
	cfg := Config{Models: []faultfs.Model{faultfs.Strict}, Flips: 2}
	whole, err := Sweep(context.Background(), scs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var points, flips int64
	for i := 0; i < 3; i++ {
		c := cfg
		c.Shard, c.Shards = i, 3
		rep, err := Sweep(context.Background(), scs, c)
		if err != nil {
			t.Fatal(err)
		}
		points += rep.Points
		flips += rep.Flips
	}
	if points != whole.Points || flips != whole.Flips || whole.Points == 0 {
		t.Fatalf("shards covered %d points and %d flips, the whole sweep %d and %d", points, flips, whole.Points, whole.Flips)
	}
}
