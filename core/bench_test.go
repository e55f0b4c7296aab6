package core_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// benchDir is where real-OS benchmarks put their files
// (SWARMOPS_BENCH_DIR; default the test's temp dir). It must be on the disk
// being measured, not a tmpfs.
func benchDir(b *testing.B) string {
	if d := os.Getenv("SWARMOPS_BENCH_DIR"); d != "" {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			b.Fatalf("SWARMOPS_BENCH_DIR=%q is not a directory: %v", d, err)
		}
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkCommitRealOS is the single-writer durable commit on the real
// filesystem, with the raw probe it is judged against measured in the same
// run: an fdatasync of a 512-byte overwrite in pre-zeroed space (the best a
// one-sync commit can do). Compare with benchstat, e.g.
//
//	go test ./core -run '^$' -bench 'CommitRealOS' -count 6 | benchstat -
func BenchmarkCommitRealOS(b *testing.B) {
	b.Run("probe=overwrite-fdatasync", func(b *testing.B) {
		fsys := vfs.OS()
		p := filepath.Join(benchDir(b), "probe")
		f, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		const window = 256 << 10
		if _, err := f.WriteAt(make([]byte, window), 0); err != nil {
			b.Fatal(err)
		}
		if err := vfs.Datasync(f); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 512)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			buf[0] = byte(i)
			if _, err := f.WriteAt(buf, int64(i%(window/512))*512); err != nil {
				b.Fatal(err)
			}
			if err := vfs.Datasync(f); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(1, "syncs/op")
	})
	b.Run("store=commit-advance", func(b *testing.B) {
		c := faultfs.NewCounting(vfs.OS())
		s, err := core.Create(filepath.Join(benchDir(b), "s"), core.Options{FS: c})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		head, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("f", "0")}, Advance: "main"})
		if err != nil {
			b.Fatal(err)
		}
		c.Reset()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			head, err = s.Commit(core.CommitRequest{Parents: []core.ID{head}, Advance: "main",
				Changes: []core.Change{put(fmt.Sprintf("d/f%d", i%16), strconv.Itoa(i))}})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		syncs := c.Count(faultfs.OpDatasync) + c.Count(faultfs.OpSync) + c.Count(faultfs.OpSyncDir)
		b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
	})
}

// BenchmarkCommitCPU is the same commit on the memory FS: the CPU part of a
// commit (build, hash, encode, lock, append, publish), without the disk.
func BenchmarkCommitCPU(b *testing.B) {
	c := faultfs.NewCounting(faultfs.NewMem())
	s, err := core.Create("/s", core.Options{FS: c})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	head, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("f", "0")}, Advance: "main"})
	if err != nil {
		b.Fatal(err)
	}
	c.Reset()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		head, err = s.Commit(core.CommitRequest{Parents: []core.ID{head}, Advance: "main",
			Changes: []core.Change{put(fmt.Sprintf("d/f%d", i%16), strconv.Itoa(i))}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(c.Total())/float64(b.N), "fscalls/op")
	b.ReportMetric(float64(c.Count(faultfs.OpDatasync))/float64(b.N), "syncs/op")
}

// benchChangesets is the history size of the lookup benchmarks
// (SWARMOPS_BENCH_CHANGESETS, default 100000).
func benchChangesets(b *testing.B) int {
	v := os.Getenv("SWARMOPS_BENCH_CHANGESETS")
	if v == "" {
		return 100000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("SWARMOPS_BENCH_CHANGESETS=%q: want a positive integer", v)
	}
	return n
}

// historyStore builds a store of n changesets on a memory FS (the lookup
// path does not sync) without per-commit syncs, which only the build needs.
func historyStore(b *testing.B, n int) (*faultfs.MemFS, []core.ID) { return historyStoreT(b, n) }

func historyStoreT(b testing.TB, n int) (*faultfs.MemFS, []core.ID) {
	m := faultfs.NewMem()
	s, err := core.Create("/s", core.Options{FS: m, Weaken: core.WeakSkipDatasync})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]core.ID, 0, n)
	var head core.ID
	for i := 0; i < n; i++ {
		req := core.CommitRequest{Changes: []core.Change{put(fmt.Sprintf("f%d", i%4), strconv.Itoa(i))}, Advance: "main"}
		if i > 0 {
			req.Parents = []core.ID{head}
		}
		if head, err = s.Commit(req); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, head)
	}
	s.Close()
	return m, ids
}

// BenchmarkLookup resolves ids and unique prefixes and reads changesets
// in a history of SWARMOPS_BENCH_CHANGESETS changesets, and measures open
// plus the first lookup.
func BenchmarkLookup(b *testing.B) {
	n := benchChangesets(b)
	m, ids := historyStore(b, n)
	s, err := core.Open("/s", core.Options{FS: m})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sn, _ := s.Snapshot()
	b.Run(fmt.Sprintf("changesets=%d/by=id", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := sn.Changeset(ids[(i*7919)%len(ids)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("changesets=%d/by=prefix12", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := sn.Resolve(ids[(i*7919)%len(ids)].String()[:12]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("changesets=%d/open+first-lookup", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := core.Open("/s", core.Options{FS: m})
			if err != nil {
				b.Fatal(err)
			}
			sn, err := s.Snapshot()
			if err == nil {
				_, err = sn.Resolve("main")
			}
			s.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

var _ afero.Fs = vfs.OS()
