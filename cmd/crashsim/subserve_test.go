package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestServeSweepPasses crashes `swarmops serve` at a strided subset of its
// calls while clients commit through it (SWARMOPS_TEST_SERVE_STRIDE, default
// 7; SWARMOPS_TEST_BINARY, a swarmops binary to crash instead of one built
// from ../swarmops); every crash must leave what the clients were told.
func TestServeSweepPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the swarmops binary a few hundred times; -short skips it")
	}
	stride := int64(7)
	if v := os.Getenv("SWARMOPS_TEST_SERVE_STRIDE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			t.Fatalf("SWARMOPS_TEST_SERVE_STRIDE=%q: want a positive integer", v)
		}
		stride = n
	}
	tmp := t.TempDir()
	bin := os.Getenv("SWARMOPS_TEST_BINARY") // a binary to try the oracle on
	if bin == "" {
		bin = filepath.Join(tmp, "swarmops")
		if out, err := exec.Command("go", "build", "-o", bin, "../swarmops").CombinedOutput(); err != nil {
			t.Fatalf("go build ../swarmops: %v\n%s", err, out)
		}
	}
	e := &cliEnv{bin: bin, labels: map[string]string{}}
	points, vs, err := e.serveSweep(context.Background(), tmp, stride, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crash points (stride %d)", points, stride)
	if points == 0 {
		t.Fatal("no crash point")
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestServeCanaryCaught builds the canary binary and runs the server part
// with each server canary, as the self-test does: each must be caught by
// a point the correct binary passes.
func TestServeCanaryCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two swarmops binaries and crashes them a few dozen times; -short skips it")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir("../.."); err != nil { // canaryBinary builds ./cmd/swarmops
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	res, err := serveCanaries(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(serverCanaries) {
		t.Fatalf("%d results for %d server canaries", len(res), len(serverCanaries))
	}
	for _, r := range res {
		if !r.caught {
			t.Errorf("server canary %s not caught in %d points", r.name, r.points)
			continue
		}
		t.Logf("%s caught at call %d: %s", r.name, r.at, r.detail)
	}
}
