package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega/gexec"
	"golang.org/x/sys/unix"
)

// buildCLI builds the swarmops binary for one run of a benchmark; the
// run's cleanup removes it.
func buildCLI(b *testing.B) string {
	b.Helper()
	bin, err := gexec.Build("github.com/swarmops/swarmops/cmd/swarmops")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(gexec.CleanupBuildArtifacts)
	return bin
}

// BenchmarkCommitProcess measures an uncontended `swarmops commit` as a
// whole process, from spawn to exit: a small change list on stdin, the
// first parent from --advance main. Beside it, in the same run, the raw
// cost of the one durable operation it cannot avoid: see
// BenchmarkFdatasyncProbe. Reports the median as p50-ns.
//
//	go test ./cmd/swarmops -run '^$' -bench 'CommitProcess|FdatasyncProbe' -benchtime 200x -count 3
func BenchmarkCommitProcess(b *testing.B) {
	bin := buildCLI(b)
	dir := b.TempDir()
	store := filepath.Join(dir, "store")
	env := append(baseEnv(), "SWARMOPS_STORE="+store)
	run := func(stdin string, args ...string) {
		c := exec.Command(bin, args...)
		c.Env, c.Stdin = env, strings.NewReader(stdin)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("swarmops %v: %v: %s", args, err, out)
		}
	}
	run("", "init")
	run("put seed = \"0\"\n", "commit", "-F", "-", "--advance", "main")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run(fmt.Sprintf("put f%d = \"%d\"\n", i%64, i), "commit", "-F", "-", "--advance", "main")
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(lat).Nanoseconds()), "p50-ns")
}

// BenchmarkSpawnProcess is the floor under BenchmarkCommitProcess: the same
// binary spawned to exit with no store work (`swarmops help`), so the cost
// of process start can be subtracted.
func BenchmarkSpawnProcess(b *testing.B) {
	bin := buildCLI(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c := exec.Command(bin, "help")
		c.Env = baseEnv()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("swarmops help: %v: %s", err, out)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(lat).Nanoseconds()), "p50-ns")
}

// BenchmarkFdatasyncProbe is the raw probe: overwrite 4 KiB inside a
// pre-allocated, already-synced file and fdatasync it, on the same disk
// (the test's temp dir) as BenchmarkCommitProcess.
func BenchmarkFdatasyncProbe(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const size = 4 << 20
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i%1024)*4096); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(lat).Nanoseconds()), "p50-ns")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
