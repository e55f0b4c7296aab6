package core_test

import (
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestGroupCommitSharesSyncs: frames that other writers append while one
// writer's fdatasync is running are made durable by one more fdatasync, not
// one each (group commit across store handles, as across processes). The
// first journal sync is held until every other committer has appended its
// frame and asked for the sync lock, so the count is exact: the first sync
// covers the first frame, the next one covers all the others, and the
// remaining committers find their frames covered and return without
// syncing. It fails if the sync step (groupsync.Syncer.To) stops
// consulting the durable position (one sync per commit) or syncs only its
// own frame.
func TestGroupCommitSharesSyncs(t *testing.T) {
	for _, n := range []int{2, 8, 32} {
		t.Run(fmt.Sprintf("writers=%d", n), func(t *testing.T) { groupCommitSharesSyncs(t, n) })
	}
}

func groupCommitSharesSyncs(t *testing.T, n int) {
	c := faultfs.NewCounting(faultfs.NewMem())
	g := &gateFS{FS: c}
	stores := []*core.Store{mustCreate(t, "/s", core.Options{FS: g})}
	for len(stores) < n {
		stores = append(stores, mustOpen(t, "/s", core.Options{FS: g}))
	}
	c.Reset()
	g.arm(n)
	commitBehindAHeldSync(t, g, n, func(i int) *core.Store { return stores[i] })
	if g.timedOut.Load() {
		t.Fatalf("the held sync was released by its timeout: only %d of %d sync-lock requests arrived", g.syncLocks.Load(), n)
	}
	ds := c.Count(faultfs.OpDatasync)
	want := int64(min(n, 2))
	if ds != want {
		t.Fatalf("%d commits made %d journal datasyncs, want %d (group commit stopped grouping)", n, ds, want)
	}
	// Every commit is durable and visible to a fresh handle.
	wantRefs(t, mustOpen(t, "/s", core.Options{FS: c}), n, "the group commit")
}

// wantRefs checks that the refs w0 to w(n-1), which n writers made, are
// in a snapshot of s, after the step named after.
func wantRefs(t *testing.T, s *core.Store, n int, after string) {
	t.Helper()
	sn := snap(t, s)
	for i := range n {
		if _, err := sn.Ref(fmt.Sprintf("w%d", i)); err != nil {
			t.Fatalf("ref w%d after %s: %v", i, after, err)
		}
	}
}

// TestCommitPipelineSharesSyncs: goroutines sharing one Store handle that
// commit while a batch's fdatasync runs are appended as the next batch,
// under one writer-lock turn, and made durable by one more fdatasync. The
// first sync is held until every other committer waits in the pipeline, so
// the count is exact. It fails if the pipeline stops batching (one sync
// per commit).
func TestCommitPipelineSharesSyncs(t *testing.T) {
	const n = 16
	c := faultfs.NewCounting(faultfs.NewMem())
	g := &gateFS{FS: c}
	s := mustCreate(t, "/s", core.Options{FS: g})
	c.Reset()
	g.arm(0)
	g.until = func() bool { return core.PendingCommits(s) == n-1 }
	commitBehindAHeldSync(t, g, n, func(int) *core.Store { return s })
	if g.timedOut.Load() {
		t.Fatalf("the held sync was released by its timeout: %d of %d committers were pending", core.PendingCommits(s), n-1)
	}
	if ds, locks := c.Count(faultfs.OpDatasync), c.PathCount(faultfs.OpLock, "/s/LOCK"); ds != 2 || locks != 2 {
		t.Fatalf("%d commits made %d journal datasyncs and %d writer-lock turns, want 2 and 2 (the pipeline stopped batching)", n, ds, locks)
	}
	wantRefs(t, s, n, "the batch")
}

// gateFS holds the first journal datasync after arm until want requests for
// the sync lock have been made (the held committer's own and one from each
// other committer), or for at most 10 s.
type gateFS struct {
	vfs.FS
	armed     atomic.Bool
	want      int64
	syncLocks atomic.Int64
	held      chan struct{} // closed when the first sync is held
	once      sync.Once
	timedOut  atomic.Bool
	until     func() bool // if set, replaces the sync-lock count as the release condition
}

func (g *gateFS) arm(want int) {
	g.want = int64(want)
	g.held = make(chan struct{})
	g.syncLocks.Store(0)
	g.armed.Store(true)
}

func (g *gateFS) released() bool {
	if g.until != nil {
		return g.until()
	}
	return g.syncLocks.Load() >= g.want
}

// commitBehindAHeldSync runs n commits, commit i (on store(i)) advancing
// ref wi, each in its own goroutine: the first alone until it is inside its
// journal sync, which g holds, and then the others, so every other frame is
// appended after that sync began. It fails the test if a commit fails.
func commitBehindAHeldSync(t *testing.T, g *gateFS, n int, store func(i int) *core.Store) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	commit := func(i int) {
		defer wg.Done()
		_, errs[i] = store(i).Commit(core.CommitRequest{Agent: fmt.Sprintf("w%d", i),
			Changes: []core.Change{put(fmt.Sprintf("w%d", i), "x")}, Advance: fmt.Sprintf("w%d", i)})
	}
	wg.Add(1)
	go commit(0)
	if !g.waitHeld(10 * time.Second) {
		t.Fatal("the first commit never reached its journal sync")
	}
	for i := 1; i < n; i++ {
		wg.Add(1)
		go commit(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
}

func (g *gateFS) waitHeld(d time.Duration) bool {
	select {
	case <-g.held:
		return true
	case <-time.After(d):
		return false
	}
}

func (g *gateFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	if path.Base(name) == "SYNCLOCK" && g.armed.Load() {
		g.syncLocks.Add(1)
	}
	return g.FS.Lock(name, timeout)
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "/journal/") {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

type gateFile struct {
	afero.File
	g *gateFS
}

func (f *gateFile) Datasync() error {
	g := f.g
	first := false
	if g.armed.Load() {
		g.once.Do(func() { first = true })
	}
	if first {
		close(g.held)
		deadline := time.Now().Add(10 * time.Second)
		for !g.released() {
			if time.Now().After(deadline) {
				g.timedOut.Store(true)
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return vfs.Datasync(f.File)
}

func (f *gateFile) Allocate(off, n int64) error { return vfs.Allocate(f.File, off, n) }
