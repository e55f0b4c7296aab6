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
