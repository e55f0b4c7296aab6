package gitx

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// The export benchmarks read the store from a memory filesystem, so what
// they time is the export itself (walk, diff, stream, git fast-import, the
// mapping's rewrite and its syncs on the real disk under b.TempDir), not
// the store's page cache.

// BenchmarkExport exports a generated history of N changesets into a new
// repository per iteration.
func BenchmarkExport(b *testing.B) {
	requireGit(b)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("changesets=%d", n), func(b *testing.B) {
			s := memStore(b)
			h := genHistory(b, s, n, 7)
			sn := snap(b, s)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := mustExport(b, sn, filepath.Join(b.TempDir(), "out.git"), ExportOptions{})
				if res.CommitsWritten != h.count {
					b.Fatalf("wrote %d commits, want %d", res.CommitsWritten, h.count)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "changesets/s")
		})
	}
}

// BenchmarkExportIncremental exports one new changeset on top of an
// exported history of 1000 per iteration (the commit is not timed).
func BenchmarkExportIncremental(b *testing.B) {
	requireGit(b)
	s := memStore(b)
	genHistory(b, s, 1000, 8)
	dir := filepath.Join(b.TempDir(), "out.git")
	mustExport(b, snap(b, s), dir, ExportOptions{})
	tip, _ := snap(b, s).Ref("main")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var err error
		tip, err = s.Commit(core.CommitRequest{Parents: []core.ID{tip}, Advance: "main",
			Changes: []core.Change{{Path: "bench/counter", Data: fmt.Appendf(nil, "%d\n", i)}}})
		if err != nil {
			b.Fatal(err)
		}
		sn := snap(b, s)
		b.StartTimer()
		if res := mustExport(b, sn, dir, ExportOptions{}); res.CommitsWritten != 1 {
			b.Fatalf("wrote %d commits, want 1", res.CommitsWritten)
		}
	}
}
