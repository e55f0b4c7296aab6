package vfs_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
)

// TestOSLockWaitWakesOnClose checks that a waiter is woken by the holder's
// Unlock itself, not by the poll that backs the wake-up: the holder lets go
// well inside one poll round, and no round may end on its timer.
func TestOSLockWaitWakesOnClose(t *testing.T) {
	defer vfs.SetLockPoll(time.Minute)()
	name := filepath.Join(t.TempDir(), "LOCK")
	polls := vfs.LockPolls()
	waitsForRelease(t, name, 5)
	if n := vfs.LockPolls() - polls; n != 0 {
		t.Errorf("%d lock-wait rounds ended on the poll timer; each wait should end on the holder's close", n)
	}
}

// TestOSLockWaitersShareAWatch runs many goroutines through one lock at
// once, so several wait on one watched file: each gets the lock in turn,
// one at a time, woken by closes.
func TestOSLockWaitersShareAWatch(t *testing.T) {
	defer vfs.SetLockPoll(time.Minute)()
	name := filepath.Join(t.TempDir(), "LOCK")
	polls := vfs.LockPolls()
	var mu sync.Mutex
	holders := 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				l, err := vfs.OS().Lock(name, 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders++
				if holders != 1 {
					t.Errorf("%d holders at once", holders)
				}
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				holders--
				mu.Unlock()
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := vfs.LockPolls() - polls; n != 0 {
		t.Errorf("%d lock-wait rounds ended on the poll timer", n)
	}
}

// TestOSLockWaitWithoutInotify checks the fallback that polls LOCK_NB: the
// lock is still granted on release and still times out with ErrBusy.
func TestOSLockWaitWithoutInotify(t *testing.T) {
	defer vfs.SetNoInotify(true)()
	name := filepath.Join(t.TempDir(), "LOCK")
	held, err := vfs.OS().Lock(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.OS().Lock(name, 10*time.Millisecond); !errors.Is(err, vfs.ErrBusy) {
		t.Fatalf("Lock while held: got %v, want ErrBusy", err)
	}
	held.Unlock()
	waitsForRelease(t, name, 1)
}

// TestATimedOutWaitLeavesNothingHoldingTheLock: without inotify, a wait
// that timed out must not take the lock afterwards: once the holder lets
// go, a try succeeds at once. (A wait blocked in flock in a helper could
// not be called off, took the lock on the holder's release and held it
// until it noticed.)
func TestATimedOutWaitLeavesNothingHoldingTheLock(t *testing.T) {
	defer vfs.SetNoInotify(true)()
	name := filepath.Join(t.TempDir(), "LOCK")
	for i := 0; i < 20; i++ {
		held, err := vfs.OS().Lock(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := vfs.OS().Lock(name, time.Millisecond); !errors.Is(err, vfs.ErrBusy) {
			t.Fatalf("Lock while held: got %v, want ErrBusy", err)
		}
		held.Unlock()
		l, err := vfs.OS().Lock(name, 0)
		if err != nil {
			t.Fatalf("round %d: a try right after the holder let go: %v (a timed-out wait took the lock)", i, err)
		}
		l.Unlock()
	}
}

// TestOSLockWaitFallsBackWhenClosesGoUnreported runs lock waits where no
// close is reported: each of the first waits finds the lock free only
// after a poll round, and after missLimit of them in a row the process
// polls LOCK_NB, which sees the release within milliseconds.
func TestOSLockWaitFallsBackWhenClosesGoUnreported(t *testing.T) {
	defer vfs.SetUnreportedCloses(20 * time.Millisecond)()
	name := filepath.Join(t.TempDir(), "LOCK")
	polls := vfs.LockPolls()
	waitsForRelease(t, name, 6)
	if n := vfs.LockPolls() - polls; n != 3 {
		t.Errorf("%d poll rounds, want 3: one a wait until the process falls back to flock", n)
	}
	if !vfs.InotifyOff() {
		t.Error("lock waits still watch for closes after three unreported ones")
	}
}

// waitsForRelease takes the lock on name n times, each time while another
// holder keeps it for 2 ms more.
func waitsForRelease(t *testing.T, name string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		held, err := vfs.OS().Lock(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(2 * time.Millisecond)
			held.Unlock()
		}()
		l, err := vfs.OS().Lock(name, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
}
