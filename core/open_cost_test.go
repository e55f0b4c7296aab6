package core_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// TestOpenAndFirstLookupAreBounded: opening a store and looking up its
// oldest changeset reads the checkpoint, the index run headers and one bucket
// of a run, plus at most K frames of journal, whatever the history's size
// (C7, P5). It counts reads and the checkpoint's bytes at two history sizes
// with the same K. Every commit advances a ref, so the reflog grows with
// history too. With the whole projection in the checkpoint (checkpoint
// version 1) it failed: the checkpoint grew from 504,946 to 2,016,946 bytes;
// with every reflog in it (version 2), from 134,644 to 595,445 bytes.
func TestOpenAndFirstLookupAreBounded(t *testing.T) {
	const k = 256
	type cost struct{ reads, journal, index, ckptBytes, runs int64 }
	measure := func(history int, cache int64) cost {
		m := faultfs.NewMem()
		// A fixed clock makes the ids, and so which lookups the runs'
		// filters let through, the same in the measures compared below.
		tick := time.Unix(1_700_000_000, 0)
		now := func() time.Time { tick = tick.Add(time.Second); return tick }
		o := core.Options{FS: m, CheckpointEvery: k, InlineCheckpoint: true, SegmentSize: 1 << 20, CacheBytes: cache, Now: now}
		s, err := core.Create("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		var first, head core.ID
		for i := 0; i < history; i++ {
			req := core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}, Advance: "main"}
			if i > 0 {
				req.Parents = []core.ID{head}
			}
			head = mustCommit(t, s, req)
			if i == 0 {
				first = head
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := m.Stat("/s/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		c := faultfs.NewCounting(m)
		o.FS = c
		s, err = core.Open("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		sn := snap(t, s)
		if _, err := sn.Changeset(first); err != nil {
			t.Fatalf("first lookup: %v", err)
		}
		ents, err := afero.ReadDir(m, "/s/index")
		if err != nil {
			t.Fatal(err)
		}
		got := cost{reads: c.Count(faultfs.OpRead), ckptBytes: st.Size()}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "run-") {
				got.runs++
			}
		}
		reads := readsByPart(c, "/s")
		got.journal, got.index = reads["journal"], reads["index"]
		s.Close()
		t.Logf("history %d, K %d, cache %d: %d reads (%d journal, %d in %d index runs), checkpoint %d bytes", history, k, cache, got.reads, got.journal, got.index, got.runs, got.ckptBytes)
		return got
	}
	// 8144 = 31*256 + 208: the same 208 frames past the last checkpoint as
	// 2000. The number of runs depends on where compaction stands (at most
	// maxRuns = 8), so run reads are compared per run. The bound is
	// structural, so it is measured without the read caches (whose hits
	// depend on how the records fall into buckets); with them, open + first
	// lookup may only read less.
	a, b := measure(2000, -1), measure(8144, -1)
	if ac, bc := measure(2000, 0), measure(8144, 0); ac.reads > a.reads || bc.reads > b.reads {
		t.Fatalf("the read caches add reads: %d and %d reads with them, %d and %d without", ac.reads, bc.reads, a.reads, b.reads)
	}
	// At most K frames past the checkpoint (two reads each) and the tail
	// check; the replay's duplicate check costs one run lookup (one or two
	// reads) per object per run, and the run list is bounded by compaction,
	// so the run reads are O(K), not O(history), too.
	const journalBound, indexBound = 2*k + 64, 24 * k
	for _, c := range []cost{a, b} {
		if c.journal > journalBound || c.index > indexBound || c.ckptBytes > 4096 {
			t.Fatalf("open + first lookup: %+v at 2000 changesets, %+v at 8144; want <= %d journal reads, <= %d index reads and a checkpoint <= 4096 bytes at both", a, b, journalBound, indexBound)
		}
	}
	if b.journal > a.journal+2 || b.index*a.runs > (a.index+8)*b.runs {
		t.Fatalf("open + first lookup reads grow with history: %+v at 2000 changesets, %+v at 8144", a, b)
	}
	// The checkpoint names its runs (at most maxRuns = 8, 40 bytes each);
	// apart from that it must not grow.
	if b.ckptBytes > a.ckptBytes+16+40*max(0, b.runs-a.runs) {
		t.Fatalf("checkpoint grows with history: %d bytes at 2000 changesets (%d runs), %d at 8144 (%d runs)", a.ckptBytes, a.runs, b.ckptBytes, b.runs)
	}
}

// TestDeepVerifyChecksIndexRuns: a flipped byte inside an index run's records
// is reported by Verify(deep), naming the run.
func TestDeepVerifyChecksIndexRuns(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, CheckpointEvery: 4, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	// Eight frames, K=4: the last checkpoint covers every frame, so the
	// open replays nothing and only Verify reads the runs' records.
	for i := 0; i < 8; i++ {
		mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := m.Open("/s/index")
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) == 0 {
		t.Fatalf("no index runs: %v %v", names, err)
	}
	run := "/s/index/" + names[0]
	xorByte(t, m, run, 300, 0x40)
	s = mustOpen(t, "/s", o)
	rep, err := s.Verify(true, nil)
	if err != nil {
		// The replay before the verify touched the damaged record: it must
		// fail closed, typed, naming the run.
		if !errors.Is(err, core.ErrCorrupt) || !strings.Contains(err.Error(), names[0]) {
			t.Fatalf("Verify: %v (is corrupt: %v), want a corruption naming %s", err, errors.Is(err, core.ErrCorrupt), run)
		}
		return
	}
	found := false
	for _, p := range rep.Problems {
		if strings.Contains(p.Reason, names[0]) {
			found = true
		}
	}
	if !found {
		t.Fatalf("Verify(deep) missed a flipped byte in %s: %+v", run, rep.Problems)
	}
}

// TestChangesetLookupReadsOneTablePerRun: looking up a changeset that sits
// in the oldest of several index runs reads, in each run, only the
// changeset table: its fanout entries and one bucket, two reads per run
// (P5). Asking every run's object table first, as a lookup of unknown kind
// does, made it 4 reads per run (16 at 4 runs).
func TestChangesetLookupReadsOneTablePerRun(t *testing.T) {
	s, c, ids, runs := openOnShrinkingRuns(t)
	sn := snap(t, s)
	c.Reset()
	if _, err := sn.Changeset(ids[0]); err != nil {
		t.Fatal(err)
	}
	index := indexReads(c)
	t.Logf("%d index runs: %d index reads for the first lookup of the oldest changeset", runs, index)
	if runs < 2 || index > int64(2*runs) {
		t.Fatalf("first lookup of the oldest changeset: %d index reads at %d runs; want at most 2 per run (and at least 2 runs)", index, runs)
	}
}

// openOnShrinkingRuns builds shrinkingRuns on a memory filesystem and opens
// it through a counting one, as a fresh process would. It returns the
// store, the counter, the changesets oldest first and the number of runs.
func openOnShrinkingRuns(t *testing.T) (*core.Store, *faultfs.Counting, []core.ID, int) {
	t.Helper()
	m := faultfs.NewMem()
	o := core.Options{FS: m, InlineCheckpoint: true}
	ids := shrinkingRuns(t, o, "/s")
	c := faultfs.NewCounting(m)
	o.FS = c
	s := mustOpen(t, "/s", o)
	t.Cleanup(func() { s.Close() })
	d, err := m.Open("/s/index")
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := d.Readdirnames(-1)
	d.Close()
	return s, c, ids, len(runs)
}

// indexReads returns the reads of index run files c counted.
func indexReads(c *faultfs.Counting) int64 {
	return readsByPart(c, "/s")["index"]
}

// TestCheckpointLeavesNothingToReplay: after Store.Checkpoint the next open
// replays no frame, where without it the open replays every frame since the
// last automatic checkpoint.
func TestCheckpointLeavesNothingToReplay(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		m := faultfs.NewMem()
		o := core.Options{FS: m, InlineCheckpoint: true}
		s, err := core.Create("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		var head core.ID
		for i := 0; i < 100; i++ {
			req := core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}, Advance: "main"}
			if i > 0 {
				req.Parents = []core.ID{head}
			}
			head = mustCommit(t, s, req)
		}
		if explicit {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			in, err := s.Info()
			if err != nil {
				t.Fatal(err)
			}
			if in.CheckpointSeq != in.DurableSeq+1 && in.CheckpointSeq != in.DurableSeq {
				t.Fatalf("after Checkpoint: checkpoint at %d, durable %d", in.CheckpointSeq, in.DurableSeq)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = core.Open("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		n := core.FramesApplied(s)
		s.Close()
		t.Logf("explicit checkpoint %v: open replayed %d frames", explicit, n)
		if explicit && n != 0 {
			t.Fatalf("open after Checkpoint replayed %d frames; want 0", n)
		}
		if !explicit && n < 99 {
			t.Fatalf("open without Checkpoint replayed %d frames: the test no longer tells the two apart", n)
		}
	}
}

// TestCheckpointWaitsForTheLockThenIsBusy: Checkpoint waits up to
// LockTimeout for a checkpoint another process is writing, then fails with
// ErrBusy; once the lock is free it succeeds.
func TestCheckpointWaitsForTheLockThenIsBusy(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, LockTimeout: 50 * time.Millisecond}
	s := mustCreate(t, "/s", o)
	mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "1")}})
	l, err := m.Lock("/s/CKPTLOCK", 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Checkpoint(); !errors.Is(err, core.ErrBusy) || time.Since(start) < o.LockTimeout {
		t.Fatalf("Checkpoint with CKPTLOCK held: %v after %v; want ErrBusy after at least %v", err, time.Since(start), o.LockTimeout)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatalf("Checkpoint with CKPTLOCK free: %v", err)
	}
}

// TestFirstCommitChecksOneTablePerRun: a fresh process's first commit
// checks each new object it adds (the blob, the root tree, the changeset)
// against the runs in the table of its kind only: at most 2 reads a run
// for each. The lookup of any kind it used before searched both tables
// and read each run 4 times per object (38 index reads at 3 runs, against 8).
func TestFirstCommitChecksOneTablePerRun(t *testing.T) {
	s, c, ids, runs := openOnShrinkingRuns(t)
	c.Reset()
	mustCommit(t, s, core.CommitRequest{Parents: []core.ID{ids[len(ids)-1]}, Changes: []core.Change{put("g", "a file no commit had")}})
	index := indexReads(c)
	const objs = 3 // blob, root tree, changeset
	t.Logf("%d index runs: %d index reads for a first commit of %d new objects", runs, index, objs)
	if runs < 2 || index > int64(2*objs*runs) {
		t.Fatalf("%d index reads at %d runs for %d new objects; want at most 2 a run for each (and at least 2 runs)", index, runs, objs)
	}
}
