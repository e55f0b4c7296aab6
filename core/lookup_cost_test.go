package core_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestChangesetCacheKeepsSnapshotVisibility: a Store's changeset cache
// never lets a snapshot see past its durable sequence (C4). Handle A caches
// a changeset that handle B committed after A's first snapshot was taken;
// that first snapshot must still not see it, by id, prefix or delta hash,
// while a fresh snapshot of A sees B's commit. A caller changing a returned
// changeset must not change what the next get returns. With the cache's
// sequence check removed (serving every cached entry) it failed: "old
// snapshot sees B's commit"; with get handing out the cached pointer it
// failed: "a caller's change reached the cache".
func TestChangesetCacheKeepsSnapshotVisibility(t *testing.T) {
	m := faultfs.NewMem()
	a := mustCreate(t, "/s", core.Options{FS: m})
	b := mustOpen(t, "/s", core.Options{FS: m})
	c1 := mustCommit(t, a, core.CommitRequest{Changes: []core.Change{put("f", "1")}, Advance: "main", Message: "one"})
	old := snap(t, a)
	if _, err := old.Changeset(c1); err != nil {
		t.Fatalf("old snapshot, own commit: %v", err)
	}
	c2 := mustCommit(t, b, core.CommitRequest{Parents: []core.ID{c1}, Changes: []core.Change{put("f", "2")}, Advance: "main"})

	fresh := snap(t, a)
	cs2, err := fresh.Changeset(c2)
	if err != nil {
		t.Fatalf("a fresh snapshot of A does not see B's commit: %v", err)
	}
	if _, err := fresh.Changeset(c2); err != nil { // now from the cache
		t.Fatalf("fresh snapshot, second get: %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := old.Changeset(c2); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("old snapshot sees B's commit (get %d): err = %v, want ErrNotFound", i, err)
		}
	}
	if _, err := old.Resolve(c2.String()[:12]); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("old snapshot resolves B's commit by prefix: err = %v, want ErrNotFound", err)
	}
	if _, err := old.ByDelta(cs2.Delta); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("old snapshot finds B's commit by delta: err = %v, want ErrNotFound", err)
	}

	got, err := fresh.Changeset(c1)
	if err != nil {
		t.Fatal(err)
	}
	got.Message = "changed"
	got.Parents = append(got.Parents, c2)
	again, err := fresh.Changeset(c1)
	if err != nil {
		t.Fatal(err)
	}
	if again.Message != "one" || len(again.Parents) != 0 {
		t.Fatalf("a caller's change reached the cache: message %q, parents %v", again.Message, again.Parents)
	}
}

// TestWarmGetReadsNothing: a long-lived Store answers a changeset its
// snapshots read before without touching the filesystem (P4), through a
// fresh snapshot too (one read: the state file's durable record); with
// Options.CacheBytes < 0 it reads the object again. Counted through
// faultfs.Counting. With the cache's put disabled it failed: 1 call per
// warm get.
func TestWarmGetReadsNothing(t *testing.T) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m})
	var ids []core.ID
	for i := 0; i < 20; i++ {
		ids = append(ids, mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}}))
	}
	s.Close()
	for _, cache := range []int64{0, -1} {
		c := faultfs.NewCounting(m)
		s, err := core.Open("/s", core.Options{FS: c, CacheBytes: cache})
		if err != nil {
			t.Fatal(err)
		}
		sn := snap(t, s)
		for _, id := range ids {
			if _, err := sn.Changeset(id); err != nil {
				t.Fatal(err)
			}
		}
		c.Reset()
		for _, id := range ids {
			if _, err := sn.Changeset(id); err != nil {
				t.Fatal(err)
			}
		}
		warm := c.Total()
		c.Reset()
		if _, err := snap(t, s).Changeset(ids[3]); err != nil {
			t.Fatal(err)
		}
		fresh := c.Total()
		s.Close()
		if cache >= 0 && (warm != 0 || fresh != 1) {
			t.Fatalf("cached: %d filesystem calls for %d warm gets, %d for a fresh snapshot + get; want 0 and 1", warm, len(ids), fresh)
		}
		if cache < 0 && warm < int64(len(ids)) {
			t.Fatalf("no cache: %d filesystem calls for %d gets; want at least one each (is the cache really off?)", warm, len(ids))
		}
	}
}

// TestLookupReadsOneBucketPerRun: with the run fanouts in memory, a
// changeset get, a miss, a 6-byte prefix and a delta lookup each read at
// most one bucket of one table per index run (plus the object itself for a
// get), whatever the other tables hold (P4). The store has several runs;
// the lookups go to the oldest changesets, the worst case. Counted through
// faultfs.Counting on a handle without the changeset cache. It failed when
// a get searched the object table and the changeset table of every run
// ("get of changeset 0 (of 330, 5 runs): 11 reads, want at most 6"), when a
// prefix scanned both tables ("prefix6 ...: 10 reads, want at most 5"), and
// when the visibility filter looked every run candidate up again (the same
// prefix failure).
func TestLookupReadsOneBucketPerRun(t *testing.T) {
	const probes = 64 // lookups per kind, of the oldest changesets
	m := faultfs.NewMem()
	o := core.Options{FS: m, InlineCheckpoint: true}
	ids := shrinkingRuns(t, o, "/s")
	ents, err := afero.ReadDir(m, "/s/index")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "run-") {
			runs++
		}
	}
	if runs < 3 {
		t.Fatalf("%d index runs; the test needs several", runs)
	}
	c := faultfs.NewCounting(m)
	o.FS, o.CacheBytes = c, -1
	s := mustOpen(t, "/s", o)
	sn := snap(t, s)
	deltas := map[core.ID]objects.Hash{}
	for _, id := range ids[:probes] { // also loads every run's fanouts
		cs, err := sn.Changeset(id)
		if err != nil {
			t.Fatal(err)
		}
		deltas[id] = cs.Delta
	}
	kinds := []struct {
		name string
		max  int64
		f    func(i int, id core.ID) error
	}{
		{"get", int64(runs) + 1, func(_ int, id core.ID) error { _, err := sn.Changeset(id); return err }},
		{"miss", int64(runs), func(i int, _ core.ID) error {
			var id core.ID
			copy(id[:], "miss-"+strconv.Itoa(i))
			if _, err := sn.Changeset(id); !errors.Is(err, core.ErrNotFound) {
				return errors.New("a miss was found")
			}
			return nil
		}},
		{"prefix6", int64(runs), func(_ int, id core.ID) error {
			got, err := sn.Resolve(id.String()[:12])
			if err == nil && got != id {
				err = errors.New("wrong changeset")
			}
			return err
		}},
		{"delta", int64(runs), func(_ int, id core.ID) error { _, err := sn.ByDelta(deltas[id]); return err }},
	}
	for _, kd := range kinds {
		for i, id := range ids[:probes] {
			c.Reset()
			if err := kd.f(i, id); err != nil {
				t.Fatalf("%s %d: %v", kd.name, i, err)
			}
			if got := c.Count(faultfs.OpRead); got > kd.max {
				t.Fatalf("%s of changeset %d (of %d, %d runs): %d reads, want at most %d", kd.name, i, len(ids), runs, got, kd.max)
			}
		}
	}
}

// TestConcurrentReadersShareTheCaches: readers on one Store, each taking
// fresh snapshots and looking changesets up by id, prefix and delta hash
// through the shared caches, while a writer commits and checkpoints (which
// swaps the index runs under them). Every changeset acknowledged before a
// snapshot was taken must be found by it, whole. Meant for the race
// detector: go test -race ./core -run TestConcurrentReadersShareTheCaches
// (with the changeset cache's Get reading its map without the read lock it reported
// "DATA RACE").
func TestConcurrentReadersShareTheCaches(t *testing.T) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m, CheckpointEvery: 16, CacheBytes: 64 << 10})
	var mu sync.Mutex
	var acked []core.ID
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		go func(r int) {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				mu.Lock()
				ids := acked
				mu.Unlock()
				if len(ids) == 0 {
					continue
				}
				sn, err := s.Snapshot()
				if err != nil {
					errs <- err
					return
				}
				id := ids[(i*7+r)%len(ids)]
				cs, err := sn.Changeset(id)
				if err != nil {
					errs <- fmt.Errorf("reader %d: acknowledged %s: %w", r, id, err)
					return
				}
				if got, err := sn.Resolve(id.String()[:12]); err != nil || got != id {
					errs <- fmt.Errorf("reader %d: prefix of %s: %v %v", r, id, got, err)
					return
				}
				if _, err := sn.ByDelta(cs.Delta); err != nil {
					errs <- fmt.Errorf("reader %d: delta of %s: %w", r, id, err)
					return
				}
			}
		}(r)
	}
	for i := 0; i < 300; i++ {
		id := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(i))}})
		mu.Lock()
		acked = append(acked, id)
		mu.Unlock()
	}
	close(done)
	for r := 0; r < 3; r++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// shrinkingRuns makes a store in dir whose index has three runs that
// compaction leaves apart: checkpoint intervals of 1,024, 256 and 64
// commits (each run under half the size of the one before it), then ten
// commits in the journal tail. It returns the changesets, oldest first.
func shrinkingRuns(t *testing.T, o core.Options, dir string) []core.ID {
	t.Helper()
	s := mustCreate(t, dir, o)
	var ids []core.ID
	commit := func() {
		ids = append(ids, mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", strconv.Itoa(len(ids)))}}))
	}
	for _, k := range []int{1024, 256, 64} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		o.CheckpointEvery = k
		s = mustOpen(t, dir, o)
		for i := 0; i < k; i++ {
			commit()
		}
	}
	for i := 0; i < 10; i++ {
		commit()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}
