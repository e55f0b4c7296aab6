package writelock

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/lockq"
	"github.com/swarmops/swarmops/faultfs"
)

func newLock(t *testing.T, m *faultfs.MemFS, timeout, retryPlace time.Duration) *Lock {
	t.Helper()
	l := New(Config{FS: m, Dir: "/s", Timeout: timeout, RetryPlace: retryPlace,
		CatchUp: func() error { return nil }, Closed: new(atomic.Bool)})
	t.Cleanup(l.Close)
	return l
}

func newDir(t *testing.T) *faultfs.MemFS {
	t.Helper()
	m := faultfs.NewMem()
	if err := m.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// tickets counts the live tickets of the queue.
func tickets(t *testing.T, m *faultfs.MemFS) int {
	t.Helper()
	n, err := lockq.New(m, "/s/"+QueueDir).Len()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHoldKeepsTheLockForTheProcess: while one goroutine holds the writer
// lock, the process's other sections run under it without queueing, and
// another handle (process) gets ErrBusy at its timeout; after the release
// it gets the lock.
func TestHoldKeepsTheLockForTheProcess(t *testing.T) {
	m := newDir(t)
	a, b := newLock(t, m, time.Second, -1), newLock(t, m, 100*time.Millisecond, -1)
	release, err := a.Hold()
	if err != nil {
		t.Fatal(err)
	}
	if !a.Held() {
		t.Fatal("Held is false during a Hold")
	}
	ran := false
	if err := a.With(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("a section of the holding process: %v, ran %v", err, ran)
	}
	if err := b.With(func() error { return nil }); !errors.Is(err, errs.ErrBusy) {
		t.Fatalf("another process during the Hold: %v; want ErrBusy", err)
	}
	release()
	if err := b.With(func() error { return nil }); err != nil {
		t.Fatalf("another process after the release: %v", err)
	}
}

// TestAPlaceIsKeptForItsRetryOnly: a writer that stops needing its turn
// while it queues (its compare-and-swap lost) keeps its ticket; the next
// turn moving one of the refs it queued for waits from it, and one moving
// other refs gives it up. Without the kept place the queue holds no ticket
// after the loss.
func TestAPlaceIsKeptForItsRetryOnly(t *testing.T) {
	m := newDir(t)
	a, ahead := newLock(t, m, time.Second, time.Minute), newLock(t, m, time.Second, -1)
	// A ticket ahead of a's makes a queue, so a waits with lookahead.
	t0, err := ahead.Queue().Take(time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- a.WithIf(func() error { return nil }, func() bool { return false }, true, []string{"main"})
	}()
	time.Sleep(20 * time.Millisecond)
	t0.Leave()
	if err := <-done; !errors.Is(err, ErrNotNeeded) {
		t.Fatalf("a turn no longer needed: %v; want ErrNotNeeded", err)
	}
	if n := tickets(t, m); n != 1 {
		t.Fatalf("%d tickets after the loss; want 1, the kept place", n)
	}
	a.FitPlace(slices.Values([]string{"main"}))
	if n := tickets(t, m); n != 1 {
		t.Fatalf("%d tickets after a retry of main fit the place; want 1", n)
	}
	a.FitPlace(slices.Values([]string{"side"}))
	if n := tickets(t, m); n != 0 {
		t.Fatalf("%d tickets after a turn for another ref; want 0 (the place given up)", n)
	}
}
