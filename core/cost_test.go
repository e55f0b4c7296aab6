package core_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
)

// Deterministic cost tests: they count filesystem calls through
// faultfs.Counting and fail if a count rises above the design's.

// TestSteadyStateCommitSyncsOnce: a small commit makes exactly one data
// sync, no full fsync and no directory sync, across zero-fill window
// crossings (the window's zeros ride on the crossing frame's sync).
func TestSteadyStateCommitSyncsOnce(t *testing.T) {
	c := faultfs.NewCounting(faultfs.NewMem())
	s, err := core.Create("/s", core.Options{FS: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	head := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "0")}, Advance: "main"})
	// 600 commits of ~1 KiB frames cross two 256 KiB windows.
	for i := 1; i <= 600; i++ {
		c.Reset()
		head = mustCommit(t, s, core.CommitRequest{Parents: []core.ID{head}, Advance: "main",
			Changes: []core.Change{put(fmt.Sprintf("dir/f%d", i%7), fmt.Sprint(i))}})
		ds, fs, sd := c.Count(faultfs.OpDatasync), c.Count(faultfs.OpSync), c.Count(faultfs.OpSyncDir)
		if ds != 1 || fs != 0 || sd != 0 {
			t.Fatalf("commit %d: %d datasyncs, %d fsyncs, %d dir syncs; want exactly 1, 0, 0 (trace: go test -run %s)", i, ds, fs, sd, t.Name())
		}
	}
}

// TestCheckpointSyncsAmortize: over 1,024 commits the checkpoint work adds
// at most 0.1 sync per commit, at the default interval and at a short one.
func TestCheckpointSyncsAmortize(t *testing.T) {
	for _, k := range []int{0, 64} {
		t.Run(fmt.Sprintf("every=%d", k), func(t *testing.T) {
			c := faultfs.NewCounting(faultfs.NewMem())
			s, err := core.Create("/s", core.Options{FS: c, CheckpointEvery: k})
			if err != nil {
				t.Fatal(err)
			}
			c.Reset()
			const n = 1024
			for i := 0; i < n; i++ {
				mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", fmt.Sprint(i))}})
			}
			s.Close() // waits for background checkpoints
			syncs := c.Count(faultfs.OpDatasync) + c.Count(faultfs.OpSync) + c.Count(faultfs.OpSyncDir)
			extra := float64(syncs-n) / n
			in := mustInfo(t, c)
			if extra > 0.1 || in.CheckpointSeq == 0 {
				t.Fatalf("%d syncs for %d commits: %.3f extra per commit (want <= 0.1), checkpoint at %d", syncs, n, extra, in.CheckpointSeq)
			}
			t.Logf("%d syncs for %d commits (%.4f extra per commit), last checkpoint covers frame %d", syncs, n, extra, in.CheckpointSeq)
		})
	}
}

func mustInfo(t *testing.T, fs *faultfs.Counting) *core.Info {
	s, err := core.Open("/s", core.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// recoveryHistories are the two history sizes whose recovery reads are
// compared (SWARMOPS_RECOVERY_HISTORY="small,large", default "1000,4000").
func recoveryHistories(t *testing.T) (int, int) {
	v := os.Getenv("SWARMOPS_RECOVERY_HISTORY")
	if v == "" {
		return 1000, 4000
	}
	var a, b int
	if _, err := fmt.Sscanf(v, "%d,%d", &a, &b); err != nil || a < 1 || b <= a {
		t.Fatalf("SWARMOPS_RECOVERY_HISTORY=%q: want two increasing counts like 1000,4000", v)
	}
	return a, b
}

// TestRecoveryReadsAreBoundedByK: recovery after a power loss reads the
// checkpoint plus O(K) frames, whatever the history's size. It counts the
// reads of journal segments at two history sizes with the same K and the
// same distance past the last checkpoint.
func TestRecoveryReadsAreBoundedByK(t *testing.T) {
	const k = 128
	small, large := recoveryHistories(t)
	reads := func(history int) int64 {
		m := faultfs.NewMem()
		s, err := core.Create("/s", core.Options{FS: m, CheckpointEvery: k, SegmentSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < history; i++ {
			mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}})
		}
		s.Close()
		c := faultfs.NewCounting(m.CrashClone(faultfs.Strict, 0))
		s, err = core.Open("/s", core.Options{FS: c, CheckpointEvery: k, SegmentSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		segs, _ := (&journal.Config{FS: c, Dir: "/s/journal"}).Segments()
		var n int64
		for _, sg := range segs {
			n += c.PathCount(faultfs.OpRead, fmt.Sprintf("/s/journal/seg-%012d", sg))
		}
		t.Logf("history %d, K %d: %d journal reads in %d segments", history, k, n, len(segs))
		return n
	}
	a, b := reads(small), reads(large)
	// Two reads per frame, at most K frames past the checkpoint, plus the
	// bounded tail check of the last segment.
	bound := int64(2*k + 64)
	if b > bound || a > bound {
		t.Fatalf("recovery journal reads: %d at %d changesets, %d at %d; want both <= %d and no growth with history", a, small, b, large, bound)
	}
}
