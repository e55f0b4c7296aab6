package core

import (
	"testing"
	"time"

	"github.com/swarmops/swarmops/faultfs"
)

// TestSnapshotTakesNoMutexWhenCaughtUp: once the projection holds the
// durable prefix, Snapshot answers without the store mutex, which a writer
// of this process holds while it checks, publishes and applies a frame, and
// a checkpoint while it gathers its batch. The mutex is held here for the
// whole call. A snapshot that needs frames the projection lacks still
// takes it (a second handle's commit makes one). It fails (the snapshot
// times out) when Snapshot always takes the mutex.
func TestSnapshotTakesNoMutexWhenCaughtUp(t *testing.T) {
	fsys := faultfs.NewMem()
	s := MustCreate(t, "/s", Options{FS: fsys})
	id, err := s.Commit(CommitRequest{Agent: "a", Changes: []Change{{Path: "f", Data: []byte("1")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	var got chan *Snapshot
	snapshot := func() (*Snapshot, bool) {
		got = make(chan *Snapshot, 1)
		go func() {
			sn, err := s.Snapshot()
			if err != nil {
				t.Error(err)
			}
			got <- sn
		}()
		select {
		case sn := <-got:
			return sn, true
		case <-time.After(time.Second):
			return nil, false
		}
	}
	s.view.mu.Lock()
	sn, ok := snapshot()
	s.view.mu.Unlock()
	if !ok {
		t.Fatal("Snapshot waited for the store mutex with the projection caught up")
	}
	if sn.seq != 1 {
		t.Fatalf("snapshot at frame %d, want 1", sn.seq)
	}
	if _, err := sn.Changeset(id); err != nil {
		t.Fatal(err)
	}

	other := MustOpen(t, "/s", Options{FS: fsys})
	if _, err := other.Commit(CommitRequest{Parents: []ID{id}, Agent: "b", Changes: []Change{{Path: "f", Data: []byte("2")}}, Advance: "main"}); err != nil {
		t.Fatal(err)
	}
	s.view.mu.Lock()
	_, ok = snapshot()
	s.view.mu.Unlock()
	if ok {
		t.Fatal("Snapshot answered without the store mutex while the projection lacked a durable frame")
	}
	// The pending Snapshot goes on once the mutex is free, and catches up.
	if sn = <-got; sn == nil || sn.seq != 2 {
		t.Fatalf("snapshot %+v after the other handle's commit, want one at frame 2", sn)
	}
}
