package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/crashsweep"
)

// TestGeneratedBadInputExitsTwo: malformed generated-workload knobs are
// usage errors.
func TestGeneratedBadInputExitsTwo(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--generated", "--depth", "0"}, "--depth 0"},
		{[]string{"--generated", "--depth", "9"}, "--depth 9"},
		{[]string{"--generated", "--agents", "4"}, "--agents 4"},
		{[]string{"--sweep", "--depth", "2"}, "--depth and --agents need --generated"},
		{[]string{"--quick", "--sample", "-1"}, "--sample -1"},
		{[]string{"--generated", "--scenarios", "."}, "not both"},
		{[]string{"--generated", "--scenario", "gen-adv1-fly2"}, `unknown operation "fly2"`},
		{[]string{"--generated", "--scenario", "gen-undo1-land1"}, "cannot run"},
		{[]string{"--generated", "--depth", "1", "--shard", "3/2"}, `--shard "3/2"`},
	}
	for _, c := range cases {
		code, out := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("crashsim %s: exit %d (want %d), output lacks %q:\n%s", strings.Join(c.args, " "), code, exitUsage, c.want, out)
		}
	}
}

// TestGeneratedSweepPrintsItsCount: --generated sweeps the enumeration and
// prints workloads, points and models; --shard splits the workloads.
func TestGeneratedSweepPrintsItsCount(t *testing.T) {
	code, out := runCLI(t, "--generated", "--depth", "1", "--stride", "1000", "--torn-seeds", "1")
	if code != exitOK || !strings.Contains(out, "crashsim --generated: depth 1, 3 agents: 10 workloads (of 26 sequences: 16 agent renamings and 0 that cannot run left out), 10 crash points in all, 3 models") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out = runCLI(t, "--generated", "--depth", "1", "--stride", "1000", "--torn-seeds", "1", "--shard", "1/4")
	if code != exitOK || !strings.Contains(out, "shard 1/4: 3 workloads") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestQuickSamplesGenerated: --quick adds --sample workloads drawn with
// the seed, prints them, and the same seed draws the same ones.
func TestQuickSamplesGenerated(t *testing.T) {
	draw := func(seed string) string {
		o, err := parse([]string{"--quick", "--seed", seed}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		scs, err := addSample(nil, o, &out)
		if err != nil || len(scs) != 4 {
			t.Fatalf("seed %s: %d scenarios, %v", seed, len(scs), err)
		}
		for _, sc := range scs {
			if sc.File != crashsweep.GeneratedFile || !strings.Contains(out.String(), sc.Name) {
				t.Errorf("seed %s: %s (%s) is not printed: %s", seed, sc.Name, sc.File, out.String())
			}
		}
		return out.String()
	}
	a, b, c := draw("1"), draw("1"), draw("2")
	if a != b || a == c || !strings.Contains(a, "--seed 1") {
		t.Errorf("draws: %q, %q, %q", a, b, c)
	}
}

// TestGeneratedReproductionNamesTheFlag: a violation in a generated
// workload reproduces with --generated.
func TestGeneratedReproductionNamesTheFlag(t *testing.T) {
	v := &crashsweep.Violation{Claim: "C1", Scenario: "gen-adv1-land1", File: crashsweep.GeneratedFile, At: 40, Model: "strict", Seed: 1}
	if got := repro(v); got != reproPrefix+" --generated --scenario gen-adv1-land1 --at 40 --model strict --seed 1" {
		t.Errorf("repro: %s", got)
	}
}
