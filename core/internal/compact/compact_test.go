package compact

import (
	"math"
	"testing"
)

// TestMergeCountBoundsRunsAndRewrites drives the compaction policy through
// a store's life of equal-sized checkpoints (and of uneven ones) and checks
// both of its promises: a checkpoint never names more than MaxRuns runs,
// and the bytes compaction rewrites stay within a small multiple of
// log2(checkpoints) per byte ingested. Merging every run whenever there are
// too many fails the second bound by two orders of magnitude.
func TestMergeCountBoundsRunsAndRewrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		size func(i int) int64
	}{
		{"equal", func(int) int64 { return 1000 }},
		{"uneven", func(i int) int64 { return int64(200 + (i*7919)%1800) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const checkpoints = 4000
			var runs []int64 // newest first
			var ingested, rewritten int64
			for i := 0; i < checkpoints; i++ {
				in := tc.size(i)
				ingested += in
				runs = append([]int64{in}, runs...)
				if n := MergeCount(runs); n > 1 {
					var m int64
					for _, s := range runs[:n] {
						m += s
					}
					rewritten += m
					runs = append([]int64{m}, runs[n:]...)
				}
				if len(runs) > MaxRuns {
					t.Fatalf("checkpoint %d names %d runs, more than %d", i, len(runs), MaxRuns)
				}
			}
			amp := float64(rewritten) / float64(ingested)
			bound := 2 * math.Log2(checkpoints)
			t.Logf("%d checkpoints: %d runs at the end, %.1f bytes rewritten per byte ingested (bound %.1f)", checkpoints, len(runs), amp, bound)
			if amp > bound {
				t.Fatalf("compaction rewrote %.1f bytes per byte ingested, more than %.1f", amp, bound)
			}
		})
	}
}

func TestMergeCount(t *testing.T) {
	for _, tc := range []struct {
		sizes []int64
		want  int
	}{
		{nil, 0},
		{[]int64{5}, 0},
		{[]int64{1, 1}, 2},             // like sizes merge
		{[]int64{1, 3}, 0},             // an older run over twice the size stays
		{[]int64{1, 1, 3}, 3},          // 1+1 = 2 gathered, 3 <= 4
		{[]int64{1, 100, 100, 100}, 0}, // big older runs are left alone
		{[]int64{1, 1000, 900, 800, 700, 600, 500, 400, 300}, 2}, // nine runs: capped at MaxRuns
	} {
		if got := MergeCount(tc.sizes); got != tc.want {
			t.Errorf("MergeCount(%v) = %d, want %d", tc.sizes, got, tc.want)
		}
	}
}
