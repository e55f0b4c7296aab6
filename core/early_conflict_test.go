package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestALostCompareAndSwapDoesNotWaitForTheLock: a ref update, or a commit
// advancing a ref, whose expected value another writer has already replaced
// fails with a ConflictError naming the current value without waiting for
// its turn of the writer lock. Another handle holds the lock throughout, so
// a writer that queued would get ErrBusy after LockTimeout instead, as both
// did before earlyConflicts. A transaction that would win still waits.
func TestALostCompareAndSwapDoesNotWaitForTheLock(t *testing.T) {
	m := faultfs.NewMem()
	s1, err := Create("/s", Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	const timeout = 300 * time.Millisecond
	s2, err := Open("/s", Options{FS: m, LockTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	a, err := s1.Commit(CommitRequest{Changes: []Change{{Path: "a", Data: []byte("a")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	release, err := s1.holdWriterLock()
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	lost := map[string]func() error{
		"ref update": func() error { return s2.UpdateRefs(RefUpdate{Name: "main", New: a}) },
		"commit --advance": func() error {
			_, err := s2.Commit(CommitRequest{Changes: []Change{{Path: "b", Data: []byte("b")}}, Advance: "main"})
			return err
		},
	}
	for name, op := range lost {
		start := time.Now()
		err := op()
		took := time.Since(start)
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Current != a {
			t.Fatalf("%s expecting an absent main: %v after %v; want a conflict with current %s", name, err, took, short(a))
		}
		if took >= timeout {
			t.Fatalf("%s: the conflict took %v, as long as the lock timeout", name, took)
		}
	}
	if err := s2.UpdateRefs(RefUpdate{Name: "other", New: a}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a ref update that would win, with the lock held elsewhere: %v, want ErrBusy", err)
	}
}

// TestALoserLeavesTheQueueWhenTheWinnerPublishes: a commit advancing main
// from its current value queues behind a handle holding the writer lock;
// that handle then moves main itself and keeps the lock. The queued commit
// has lost, and must learn it from the publish (its ref's publish beacon),
// with the lock still held; before the beacons it learned only at its
// turn. Without the beacon write or the wake-up in the queue, the loser
// waits out its 10 s lock timeout ("still queued").
func TestALoserLeavesTheQueueWhenTheWinnerPublishes(t *testing.T) {
	for name, fsys := range map[string]vfs.FS{"os": vfs.OS(), "mem": faultfs.NewMem()} {
		t.Run(name, func(t *testing.T) {
			dir := "/s"
			if name == "os" {
				dir = t.TempDir() + "/s"
			}
			s1, err := Create(dir, Options{FS: fsys})
			if err != nil {
				t.Fatal(err)
			}
			defer s1.Close()
			s2, err := Open(dir, Options{FS: fsys, LockTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			a, err := s1.Commit(CommitRequest{Changes: []Change{{Path: "a", Data: []byte("a")}}, Advance: "main"})
			if err != nil {
				t.Fatal(err)
			}
			release, err := s1.holdWriterLock()
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			// The holder may hold a ticket or, had the queue been idle,
			// only LOCK: the loser has queued when one more ticket shows.
			tickets := func() int {
				d, err := fsys.Open(dir + "/lockq")
				if err != nil {
					return 0
				}
				defer d.Close()
				names, _ := d.Readdirnames(-1)
				n := 0
				for _, name := range names {
					if strings.HasPrefix(name, "t") {
						n++
					}
				}
				return n
			}
			base := tickets()
			lost := make(chan error, 1)
			go func() {
				_, err := s2.Commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "b", Data: []byte("b")}}, Advance: "main"})
				lost <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); tickets() == base; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the second writer never queued")
				}
			}
			b, err := s1.Commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "c", Data: []byte("c")}}, Advance: "main"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-lost:
				var ce *ConflictError
				if !errors.As(err, &ce) || ce.Current != b {
					t.Fatalf("the queued commit: %v; want a conflict with current %s", err, short(b))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the queued commit is still queued 5 s after main moved, the lock still held")
			}
		})
	}
}
