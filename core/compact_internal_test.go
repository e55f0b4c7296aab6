package core

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/faultfs"
)

// TestCheckpointsGoOnWhileAnotherProcessCompacts: checkpoints do not wait
// for compaction. With MERGELOCK held by another process, every checkpoint
// still publishes (the frames past the newest one stay under K) and the
// runs pile up past compact.MaxRuns; once it is released the next compaction
// merges them back to at most compact.MaxRuns and removes what crashed work left
// in index/ (a temp file and a run no checkpoint names, both at or below
// the checkpoint's sequence number), keeping a run file named past it (a
// checkpoint in progress could be writing it). With merges made whether or
// not MERGELOCK was had, as when the checkpoint merged, the runs never
// passed compact.MaxRuns ("1 runs with compaction held off"); without
// removeLeftovers the leftovers stayed.
func TestCheckpointsGoOnWhileAnotherProcessCompacts(t *testing.T) {
	const k = 4
	m := faultfs.NewMem()
	o := Options{FS: m, CheckpointEvery: k, InlineCheckpoint: true, SegmentSize: 1 << 20}
	s, err := Create("/s", o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var head ID
	var ids []ID
	commit := func(n int) {
		for range n {
			req := CommitRequest{Changes: []Change{{Path: "f", Data: []byte(fmt.Sprint(len(ids)))}}, Advance: "main"}
			if head != (ID{}) {
				req.Parents = []ID{head}
			}
			if head, err = s.Commit(req); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, head)
		}
	}
	commit(k)
	l, err := m.Lock("/s/"+compact.LockName, 0)
	if err != nil {
		t.Fatal(err)
	}
	commit(k * (compact.MaxRuns + 4))
	c, err := ckpt.ReadFile(m, "/s")
	if err != nil {
		t.Fatal(err)
	}
	if last := uint64(len(ids)); c.NextSeq+k <= last {
		t.Fatalf("checkpoint at frame %d after %d commits with compaction held off; want within K = %d", c.NextSeq, last, k)
	}
	if len(c.Runs) <= compact.MaxRuns {
		t.Fatalf("%d runs with compaction held off; want more than %d (a checkpoint merged)", len(c.Runs), compact.MaxRuns)
	}
	leftovers := []string{
		ckpt.RunName(2, c.Epoch, "m") + ".tmp",
		ckpt.RunName(c.NextSeq-1, c.Epoch, "mm"),
	}
	future := ckpt.RunName(c.NextSeq+1000, c.Epoch, "")
	for _, n := range append(leftovers, future) {
		if err := afero.WriteFile(m, "/s/index/"+n, []byte("leftover"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	commit(k)
	if c, err = ckpt.ReadFile(m, "/s"); err != nil {
		t.Fatal(err)
	}
	if len(c.Runs) > compact.MaxRuns {
		t.Fatalf("%d runs after compaction; want at most %d", len(c.Runs), compact.MaxRuns)
	}
	for _, n := range leftovers {
		if _, err := m.Stat("/s/index/" + n); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("leftover %s: %v; want it removed", n, err)
		}
	}
	if _, err := m.Stat("/s/index/" + future); err != nil {
		t.Errorf("run %s named past the checkpoint: %v; want it kept", future, err)
	}
	names, err := afero.ReadDir(m, "/s/index")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(c.Runs)+1 {
		t.Errorf("index/ holds %d files for %d runs and one future run", len(names), len(c.Runs))
	}
	if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("Verify: %v %+v", err, rep)
	}
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if _, err := sn.Changeset(id); err != nil {
			t.Fatalf("changeset %d after compaction: %v", i, err)
		}
	}
}

// twoHandles creates a store on a memory FS with checkpoints every k
// frames, written inline, and opens it twice: two processes, in effect.
func twoHandles(t *testing.T, k int) (*Store, *Store) {
	t.Helper()
	o := Options{FS: faultfs.NewMem(), CheckpointEvery: k, InlineCheckpoint: true, SegmentSize: 1 << 20}
	a := MustCreate(t, "/s", o)
	b := MustOpen(t, "/s", o)
	return a, b
}

// tailOf returns how many changesets s's in-memory tail holds, and the
// frames its runs cover (below ckpt) and it has replayed (below next).
func tailOf(s *Store) (changesets int64, ckpt, next uint64) {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	_, changesets, _ = s.view.proj.Idx.Mem.Count()
	return changesets, s.view.proj.CkptSeq, s.view.proj.NextSeq
}

// TestWritersAdoptOtherProcessesCheckpoints checks that a writer whose
// checkpoint another process already wrote swaps its tail for that
// checkpoint's runs. Each handle here stands for a process: a writes most
// frames and the checkpoints, b commits now and then. Before the swap, b
// kept every frame it replayed in its tail (130 changesets here, and in a
// busy store, without end).
func TestWritersAdoptOtherProcessesCheckpoints(t *testing.T) {
	const k, rounds = 4, 10
	a, b := twoHandles(t, k)
	var err error
	n := 0
	heads := map[string]ID{}
	commit := func(s *Store, ref string) {
		t.Helper()
		n++
		req := CommitRequest{Changes: []Change{{Path: "f", Data: []byte(fmt.Sprint(n))}}, Advance: ref}
		if h, ok := heads[ref]; ok {
			req.Parents = []ID{h}
		}
		if heads[ref], err = s.Commit(req); err != nil {
			t.Fatal(err)
		}
	}
	for range rounds {
		for range 3 * k {
			commit(a, "a")
		}
		commit(b, "b")
	}
	tail, ckpt, next := tailOf(b)
	if tail > 2*k+1 {
		t.Fatalf("b's tail holds %d changesets after %d commits (its runs cover frames below %d of %d); want at most %d: "+
			"it did not take the other writer's checkpoints", tail, n, ckpt, next, 2*k+1)
	}
	// The swap lost nothing: b still reads every changeset.
	snap, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"a", "b"} {
		head, err := snap.Ref(ref)
		if err != nil {
			t.Fatal(err)
		}
		log, err := snap.Log(head, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"a": rounds * 3 * k, "b": rounds}[ref]; len(log) != want {
			t.Fatalf("%s: %d changesets in its log; want %d", ref, len(log), want)
		}
	}
}

// TestReadersAdoptCheckpoints checks that a handle that only reads swaps
// its tail for a newer checkpoint's runs once the tail holds more than 2K
// frames, and still sees everything. Without the swap its tail held every
// frame it replayed (here 120 changesets, and in a long-lived reader
// beside busy writers, without end).
func TestReadersAdoptCheckpoints(t *testing.T) {
	const k, n = 4, 120
	w, r := twoHandles(t, k)
	var err error
	var head ID
	for i := range n {
		req := CommitRequest{Changes: []Change{{Path: "f", Data: []byte(fmt.Sprint(i))}}, Advance: "main"}
		if i > 0 {
			req.Parents = []ID{head}
		}
		if head, err = w.Commit(req); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	tail, ckpt, next := tailOf(r)
	if tail > 4*k {
		t.Fatalf("the reader's tail holds %d changesets after %d commits (its runs cover frames below %d of %d); want at most %d",
			tail, n, ckpt, next, 4*k)
	}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := snap.Ref("main")
	if err != nil || got != head {
		t.Fatalf("main: %v %v; want %v", got, err, head)
	}
	log, err := snap.Log(head, 0)
	if err != nil || len(log) != n {
		t.Fatalf("log: %d changesets, %v; want %d", len(log), err, n)
	}
}

// TestRetiredRunsStayOpenWhilePinned is the race a deep Verify ran into:
// it checks the projection's runs without the store's lock held, and a
// checkpoint or merge installed meanwhile used to close them under it
// ("file already closed"). A pinned proj.RunIdx that is retired stays open until
// its last borrower unpins it, and is closed then.
func TestRetiredRunsStayOpenWhilePinned(t *testing.T) {
	const k = 4
	m := faultfs.NewMem()
	s, err := Create("/s", Options{FS: m, CheckpointEvery: k, InlineCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var head ID
	for i := range 3 * k {
		req := CommitRequest{Changes: []Change{{Path: "f", Data: []byte(fmt.Sprint(i))}}, Advance: "main"}
		if head != (ID{}) {
			req.Parents = []ID{head}
		}
		if head, err = s.Commit(req); err != nil {
			t.Fatal(err)
		}
	}
	s.view.mu.Lock()
	pinned := s.view.proj.Idx
	x := pinned.Pin()
	s.view.mu.Unlock()
	if x == nil {
		t.Fatal("no index runs after three checkpoints")
	}
	// Install the current checkpoint's runs again, as another process's
	// checkpoint would: the projection retires the pinned RunIdx.
	cur, err := ckpt.Read(m, "/s")
	if err != nil {
		t.Fatal(err)
	}
	nx := cur.Proj.Idx.Detach()
	s.installIndex(nx, cur.Runs, cur.NextSeq, cur.Epoch, cur.ReflogLen)
	if s.view.proj.Idx == pinned {
		t.Fatal("installIndex kept the old RunIdx; the test needs it replaced")
	}
	if err := x.View().Verify(); err != nil {
		t.Fatalf("pinned runs read after the projection dropped them: %v", err)
	}
	s.view.mu.Lock()
	pinned.Unpin()
	s.view.mu.Unlock()
	if err := x.View().Verify(); err == nil {
		t.Fatal("the runs are still readable after their last borrower unpinned them; they were never closed")
	}
}
