package core_test

import (
	"fmt"
	"os"
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

// appendGateFS holds the next write into a journal segment, once armed,
// until released: a commit stopped inside its append.
type appendGateFS struct {
	vfs.FS
	mu      sync.Mutex
	armed   bool
	held    chan struct{} // closed when a write is held
	release chan struct{}
}

func (g *appendGateFS) arm() {
	g.mu.Lock()
	g.armed, g.held, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *appendGateFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "/journal/") {
		return f, err
	}
	return &appendGateFile{File: f, g: g}, nil
}

type appendGateFile struct {
	afero.File
	g *appendGateFS
}

func (f *appendGateFile) WriteAt(b []byte, off int64) (int, error) {
	g := f.g
	g.mu.Lock()
	hold := g.armed
	g.armed = false
	held, release := g.held, g.release
	g.mu.Unlock()
	if hold {
		close(held)
		<-release
	}
	return f.File.WriteAt(b, off)
}

func (f *appendGateFile) Datasync() error             { return vfs.Datasync(f.File) }
func (f *appendGateFile) Allocate(off, n int64) error { return vfs.Allocate(f.File, off, n) }

// TestReadersDoNotWaitForAnAppend: a commit of this process stopped inside
// its journal append (a write that waits for a page under writeback, or
// zero-fills a new window) holds no lock a reader of the same Store needs.
// A fresh snapshot, its changeset, ref and log lookups all answer, from the
// durable prefix, while the append is held; after it, the commit is seen.
// It fails (the reads time out) when the append runs under the store mutex.
func TestReadersDoNotWaitForAnAppend(t *testing.T) {
	g := &appendGateFS{FS: faultfs.NewMem()}
	s := mustCreate(t, "/s", core.Options{FS: g})
	first, err := s.Commit(core.CommitRequest{Agent: "a", Changes: []core.Change{put("f", "1")}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	g.arm()
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(core.CommitRequest{Parents: []core.ID{first}, Agent: "a", Changes: []core.Change{put("f", "2")}, Advance: "main"})
		done <- err
	}()
	select {
	case <-g.held:
	case err := <-done:
		t.Fatalf("the second commit ended before its append: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the second commit never reached its append")
	}
	read := make(chan error, 1)
	go func() {
		read <- func() error {
			sn, err := s.Snapshot()
			if err != nil {
				return err
			}
			if _, err := sn.Changeset(first); err != nil {
				return err
			}
			id, err := sn.Ref("main")
			if err != nil {
				return err
			}
			if id != first {
				t.Errorf("main during the append = %s, want the durable %s", id, first)
			}
			_, err = sn.RefLog("main")
			return err
		}()
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(g.release)
		<-done
		t.Fatal("a reader waited for a commit's append")
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	if id, err := sn.Ref("main"); err != nil || id == first {
		t.Fatalf("main after the append = %s, %v; want the second commit", id, err)
	}
}

// TestSnapshotsSeeEveryAcknowledgedCommit: readers on one handle take fresh
// snapshots while writers on another commit. Every commit acknowledged
// before a snapshot was taken is in it, whether the snapshot caught its
// projection up or found it caught up already (Snapshot's path without
// the mutex). It fails when that path trusts a projection one frame short.
//
// In the same-handle case the readers share the writers' Store (whose
// appends run outside the store mutex), with a checkpoint every 8 frames
// installing runs into the projection between appends.
func TestSnapshotsSeeEveryAcknowledgedCommit(t *testing.T) {
	t.Run("other handle", func(t *testing.T) { snapshotsSeeAcknowledged(t, false) })
	t.Run("same handle", func(t *testing.T) { snapshotsSeeAcknowledged(t, true) })
}

func snapshotsSeeAcknowledged(t *testing.T, same bool) {
	fsys := faultfs.NewMem()
	o := core.Options{FS: fsys}
	if same {
		o.CheckpointEvery = 8
	}
	w := mustCreate(t, "/s", o)
	r := w
	if !same {
		r = mustOpen(t, "/s", o)
	}
	const writers, commits, readers = 2, 150, 2
	var acked [writers]atomic.Pointer[core.ID]
	var wg sync.WaitGroup
	var done atomic.Int32
	errs := make(chan error, writers+readers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			var parents []core.ID
			for k := range commits {
				id, err := w.Commit(core.CommitRequest{Parents: parents, Agent: "w",
					Changes: []core.Change{put(fmt.Sprintf("w%d", i), fmt.Sprint(k))}, Advance: fmt.Sprintf("w%d", i)})
				if err != nil {
					errs <- err
					return
				}
				parents = []core.ID{id}
				acked[i].Store(&id)
			}
		}()
	}
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < writers {
				var want []core.ID
				for i := range writers {
					if id := acked[i].Load(); id != nil {
						want = append(want, *id)
					}
				}
				sn, err := r.Snapshot()
				if err != nil {
					errs <- err
					return
				}
				for _, id := range want {
					if _, err := sn.Changeset(id); err != nil {
						errs <- fmt.Errorf("snapshot at frame %d: acknowledged commit %s: %w", sn.Seq(), id, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep, err := r.Verify(true, nil)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify after the run: %v %+v", err, rep)
	}
}
