package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String() + errb.String()
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBadInputExitsTwo checks that every kind of bad input is a clear error
// with exit status 2, distinct from a violation (1).
func TestBadInputExitsTwo(t *testing.T) {
	unknownClaim := writeScenario(t, "name: x\nclaims: [C1, C7]\nsteps:\n  - init:\n")
	malformed := writeScenario(t, "name: x\nclaims: [C1\n")
	unknownLabel := writeScenario(t, "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {parents: [ghost], files: {a: b}}\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--quick", "--scenarios", unknownClaim}, `bad.yaml:2:14: unknown claim "C7"`},
		{[]string{"--quick", "--scenarios", malformed}, "bad.yaml:1:1: malformed YAML"},
		{[]string{"--quick", "--scenarios", unknownLabel}, `bad.yaml:5:24: parent: unknown label "ghost"`},
		{[]string{"--quick", "--shard", "2/2"}, `--shard "2/2"`},
		{[]string{"--quick", "--shard", "x"}, `--shard "x"`},
		{[]string{"--quick", "--seed", "banana"}, `invalid value "banana" for flag -seed`},
		{[]string{"--quick", "--seed", "-4"}, "--seed -4"},
		{[]string{"--quick", "--model", "meteor"}, `unknown crash model "meteor"`},
		{[]string{"--quick", "--scenario", "no-such-*"}, `no scenario matches "no-such-*"`},
		{[]string{"--quick", "--canary", "nope"}, `unknown canary "nope"`},
		{[]string{"--fault", "op=write,err=gremlins"}, "field err"},
		{[]string{"--recover-at", "3"}, "--recover-at needs --at"},
		{[]string{}, "nothing to do"},
		{[]string{"--quick", "--sweep"}, "give one of"},
		{[]string{"--quick", "stray"}, `unexpected argument "stray"`},
		{[]string{"--sched", "--sched-seeds", "0"}, "--sched-seeds 0"},
		{[]string{"--sched", "--sched-agents", "9"}, "--sched-agents 9"},
		{[]string{"--sweep", "--sched-ops", "3"}, "need --sched or --quick"},
		{[]string{"--sched", "--canary", "ack-before-sync"}, "ack-before-sync syncs on a goroutine"},
		{[]string{"--part", "nope"}, `unknown part "nope"`},
		{[]string{"--subprocess", "--canary", "skip-datasync"}, "want a server canary (server-early-reply)"},
		{[]string{"--subprocess", "--canary", "nope"}, "want a server canary"},
		{[]string{"--part", "queue", "--quick"}, "give one of"},
	}
	for _, c := range cases {
		code, out := runCLI(t, c.args...)
		if code != exitUsage {
			t.Errorf("crashsim %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, exitUsage, out)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("crashsim %s: output does not name the problem %q:\n%s", strings.Join(c.args, " "), c.want, out)
		}
	}
}

// TestViolationPrintsReproductionAndExitsOne sweeps a canary to find its
// first bad point (the point moves whenever the store's call sequence
// changes), then reproduces that point alone: the output must name the
// claim, scenario, model, crash point, the trace around it, and a command
// that reproduces it; the exit status is 1.
func TestViolationPrintsReproductionAndExitsOne(t *testing.T) {
	code, out := runCLI(t, "--sweep", "--scenario", "commit-advance", "--model", "strict", "--seed", "1",
		"--canary", "early-durable", "--no-faults", "--recovery-points", "0", "--flips", "0")
	if code != exitViolation {
		t.Fatalf("the canary sweep: exit %d, want %d\n%s", code, exitViolation, out)
	}
	at := firstReproAt(t, out)
	code, out = runCLI(t, "--scenario", "commit-advance", "--at", at, "--model", "strict", "--seed", "1", "--canary", "early-durable")
	if code != exitViolation {
		t.Fatalf("exit %d, want %d\n%s", code, exitViolation, out)
	}
	for _, want := range []string{"VIOLATION C4", "scenario commit-advance", "crash point " + at + " ", "model strict",
		"=> #" + at + " ", "reproduce: go run ./cmd/crashsim --scenario commit-advance --at " + at + " --model strict --seed 1 --canary early-durable",
		"1 crash points"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The printed command, run as printed, reproduces the same violation.
	line := out[strings.Index(out, "reproduce: ")+len("reproduce: "):]
	line = line[:strings.Index(line, "\n")]
	args := strings.Fields(strings.TrimPrefix(line, reproPrefix+" "))
	code2, out2 := runCLI(t, args...)
	if code2 != exitViolation || !strings.Contains(out2, "VIOLATION C4") {
		t.Fatalf("the printed reproduction %q did not reproduce (exit %d):\n%s", line, code2, out2)
	}
	// Without the canary the same point is clean.
	code, out = runCLI(t, "--scenario", "commit-advance", "--at", at, "--model", "strict")
	if code != exitOK || !strings.Contains(out, "0 violations") {
		t.Fatalf("the same point without the canary: exit %d:\n%s", code, out)
	}
}

// firstReproAt returns the crash point of the first reproduction line in a
// sweep's output.
func firstReproAt(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "reproduce: ")
	if i < 0 {
		t.Fatalf("no reproduction line:\n%s", out)
	}
	f := strings.Fields(out[i:])
	for j := 0; j+1 < len(f); j++ {
		if f[j] == "--at" {
			return f[j+1]
		}
	}
	t.Fatalf("the reproduction line names no --at:\n%s", out)
	return ""
}

// TestSubprocessSweepPasses crashes the real binary at a strided subset of
// the calls of every CLI write command (the full set is the release job's
// crashsim --subprocess).
func TestSubprocessSweepPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the swarmops binary a few hundred times; -short skips it")
	}
	bin := filepath.Join(t.TempDir(), "swarmops")
	build := exec.Command("go", "build", "-o", bin, "../swarmops")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../swarmops: %v\n%s", err, out)
	}
	code, out := runCLI(t, "--subprocess", "--binary", bin, "--stride", "25")
	if code != exitOK || !strings.Contains(out, "0 violations") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	t.Log(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
}

// TestSchedReplaysAFailingSeed: a scheduler seed that fails prints the
// line that replays it, and that line fails the same way.
func TestSchedReplaysAFailingSeed(t *testing.T) {
	code, out := runCLI(t, "--sched", "--seed", "1", "--sched-seeds", "100", "--canary", "queue-skip-waiter")
	if code != exitViolation {
		t.Fatalf("exit %d, want %d\n%s", code, exitViolation, out)
	}
	_, line, ok := strings.Cut(out, "reproduce: go run ./cmd/crashsim ")
	line, _, _ = strings.Cut(line, "\n")
	first, _, _ := strings.Cut(out, "\n")
	if !ok || !strings.HasPrefix(first, "VIOLATION fifo") {
		t.Fatalf("no fifo violation with a reproduction line:\n%s", out)
	}
	code, again := runCLI(t, strings.Fields(line)...)
	if code != exitViolation || !strings.HasPrefix(again, first) {
		t.Fatalf("crashsim %s: exit %d, want the violation %q again:\n%s", line, code, first, again)
	}
	if code, out := runCLI(t, "--sched", "--seed", "1", "--sched-seeds", "20"); code != exitOK {
		t.Fatalf("the correct store: exit %d\n%s", code, out)
	}
}

// TestAPartViolationReproducesFromItsLine: a part swept with its canary
// prints a violation whose reproduction line, run as printed, finds it
// again alone; without the canary that point is clean.
func TestAPartViolationReproducesFromItsLine(t *testing.T) {
	code, out := runCLI(t, "--part", "queue", "--canary", "queue-two-frames")
	if code != exitViolation || !strings.Contains(out, "VIOLATION queue [canary queue-two-frames]: part queue, crash point ") {
		t.Fatalf("exit %d, want %d and a queue violation:\n%s", code, exitViolation, out)
	}
	at := firstReproAt(t, out)
	line := out[strings.Index(out, "reproduce: ")+len("reproduce: "):]
	line = line[:strings.Index(line, "\n")]
	if want := reproPrefix + " --part queue --at " + at + " --canary queue-two-frames"; line != want {
		t.Fatalf("reproduction line %q, want %q", line, want)
	}
	code, again := runCLI(t, strings.Fields(strings.TrimPrefix(line, reproPrefix+" "))...)
	if code != exitViolation || !strings.Contains(again, "crash point "+at+",") || !strings.Contains(again, "1 crash points") {
		t.Fatalf("crashsim %s: exit %d, want the violation at %s alone:\n%s", line, code, at, again)
	}
	if code, out := runCLI(t, "--part", "queue", "--at", at); code != exitOK || !strings.Contains(out, "0 violations") {
		t.Fatalf("the same point without the canary: exit %d:\n%s", code, out)
	}
}
