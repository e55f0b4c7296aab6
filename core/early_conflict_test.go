package core

import (
	"errors"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
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
	s1 := MustCreate(t, "/s", Options{FS: m})
	const timeout = 300 * time.Millisecond
	s2 := MustOpen(t, "/s", Options{FS: m, LockTimeout: timeout})
	a, err := s1.Commit(CommitRequest{Changes: []Change{{Path: "a", Data: []byte("a")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	release, err := s1.writer.Hold()
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
			t.Fatalf("%s expecting an absent main: %v after %v; want a conflict with current %s", name, err, took, errs.Short(a))
		}
		if took >= timeout {
			t.Fatalf("%s: the conflict took %v, as long as the lock timeout", name, took)
		}
	}
	if err := s2.UpdateRefs(RefUpdate{Name: "other", New: a}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a ref update that would win, with the lock held elsewhere: %v, want ErrBusy", err)
	}
}
