package lockq_test

import (
	"errors"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/lockq"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// filesystems runs a test against the real OS and the memory filesystem:
// the store runs on both, and their locks are implemented apart.
func filesystems(t *testing.T, f func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { f(t, vfs.OS(), path.Join(t.TempDir(), "lockq")) })
	t.Run("mem", func(t *testing.T) { f(t, faultfs.NewMem(), "/s/lockq") })
}

func join(t *testing.T, q *lockq.Queue, d time.Duration) *lockq.Ticket {
	t.Helper()
	tk, err := q.Join(time.Now().Add(d), nil)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return tk
}

// queued returns how many tickets the directory holds.
func queued(t *testing.T, fsys vfs.FS, dir string) int {
	t.Helper()
	d, err := fsys.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, x := range names {
		if x[0] == 't' {
			n++
		}
	}
	return n
}

func waitQueued(t *testing.T, fsys vfs.FS, dir string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); queued(t, fsys, dir) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d tickets never appeared (have %d)", n, queued(t, fsys, dir))
		}
		time.Sleep(time.Millisecond)
	}
}

// queueBehindAHead holds the queue in dir with a head ticket, starts n
// waiters one after another, each in its own goroutine with its own Queue
// (as a process would have) and queued before the next starts, lets the
// head leave once all are queued, and returns when every waiter is done.
// Waiter i runs wait(i, q), which joins q and reports its own failures.
func queueBehindAHead(t *testing.T, fsys vfs.FS, dir string, n int, wait func(i int, q *lockq.Queue)) {
	t.Helper()
	head := join(t, lockq.New(fsys, dir), time.Second)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait(i, lockq.New(fsys, dir))
		}()
		waitQueued(t, fsys, dir, i+2)
	}
	if err := head.Leave(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// turns records the waiters a test serves, in the order served, and checks
// that no two hold their turn at once.
type turns struct {
	mu     sync.Mutex
	order  []int
	inside atomic.Int32
}

// serve is waiter i's turn on ticket tk: it records i, holds the turn for
// a moment, so that a waiter let in early would overlap it, and leaves.
func (ts *turns) serve(t *testing.T, i int, tk *lockq.Ticket) {
	if ts.inside.Add(1) != 1 {
		t.Errorf("waiter %d served while another was inside", i)
	}
	ts.mu.Lock()
	ts.order = append(ts.order, i)
	ts.mu.Unlock()
	time.Sleep(200 * time.Microsecond)
	ts.inside.Add(-1)
	if err := tk.Leave(); err != nil {
		t.Errorf("waiter %d: Leave: %v", i, err)
	}
}

// TestServedInArrivalOrder: waiters that arrive one after another while the
// lock is held are served in the order they arrived, each after the one
// before it has left — the FIFO hand-off C8 rests on. A bare flock fails
// this: it wakes every waiter and lets the first scheduled one through.
func TestServedInArrivalOrder(t *testing.T) {
	t.Run("without progress", func(t *testing.T) { servedInArrivalOrder(t, false) })
	t.Run("with progress", func(t *testing.T) { servedInArrivalOrder(t, true) })
}

func servedInArrivalOrder(t *testing.T, withProgress bool) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		var progressed atomic.Int32
		var progress func() bool
		if withProgress {
			progress = func() bool { progressed.Add(1); return false }
		}
		const n = 12
		var ts turns
		queueBehindAHead(t, fsys, dir, n, func(i int, q *lockq.Queue) {
			tk, err := q.Join(time.Now().Add(10*time.Second), progress)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			ts.serve(t, i, tk)
		})
		served := ts.order
		for i, w := range served {
			if w != i {
				t.Fatalf("served in order %v, want arrival order", served)
			}
		}
		if len(served) != n {
			t.Fatalf("served %d of %d", len(served), n)
		}
		if k := queued(t, fsys, dir); k != 0 {
			t.Fatalf("%d tickets left behind", k)
		}
		// Every waiter more than Lookahead places back is told of progress
		// at least once before its turn.
		if want := int32(n - lockq.Lookahead); withProgress && progressed.Load() < want {
			t.Fatalf("progress called %d times, want at least %d", progressed.Load(), want)
		}
	})
}

// TestProgressCanLeaveTheQueue: a waiter whose progress asks to leave gets
// ErrLeft without its turn and leaves no ticket, and the waiters behind it
// are served in arrival order all the same. Without the leave in Join,
// every waiter is served ("waiter 6: <nil>, want ErrLeft").
func TestProgressCanLeaveTheQueue(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		const n = 16
		var (
			ts   turns
			left atomic.Int32
		)
		queueBehindAHead(t, fsys, dir, n, func(i int, q *lockq.Queue) {
			// Even waiters far back leave at their first progress.
			leave := i%2 == 0 && i > lockq.Lookahead
			tk, err := q.Join(time.Now().Add(10*time.Second), func() bool { return leave })
			if leave {
				if !errors.Is(err, lockq.ErrLeft) {
					t.Errorf("waiter %d: %v, want ErrLeft", i, err)
					if err == nil {
						tk.Leave()
					}
					return
				}
				left.Add(1)
				return
			}
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			ts.serve(t, i, tk)
		})
		served := ts.order
		for i := 1; i < len(served); i++ {
			if served[i] < served[i-1] {
				t.Fatalf("served in order %v, want arrival order", served)
			}
		}
		if int(left.Load())+len(served) != n || left.Load() == 0 {
			t.Fatalf("%d left and %d served of %d", left.Load(), len(served), n)
		}
		if k := queued(t, fsys, dir); k != 0 {
			t.Fatalf("%d tickets left behind", k)
		}
	})
}

// TestTimeoutLeavesTheQueue: a waiter that gives up at its deadline gets
// ErrBusy and takes its ticket with it, so the waiter behind it is served
// as soon as the head leaves, not after the one that gave up.
func TestTimeoutLeavesTheQueue(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := lockq.New(fsys, dir)
		head := join(t, q, time.Second)
		busy := make(chan error, 1)
		go func() {
			_, err := lockq.New(fsys, dir).Join(time.Now().Add(100*time.Millisecond), nil)
			busy <- err
		}()
		waitQueued(t, fsys, dir, 2)
		got := make(chan *lockq.Ticket, 1)
		go func() {
			tk, err := lockq.New(fsys, dir).Join(time.Now().Add(10*time.Second), nil)
			if err != nil {
				t.Error(err)
			}
			got <- tk
		}()
		waitQueued(t, fsys, dir, 3)
		if err := <-busy; !errors.Is(err, vfs.ErrBusy) {
			t.Fatalf("the waiter past its deadline got %v, want ErrBusy", err)
		}
		select {
		case <-got:
			t.Fatal("the third waiter was served while the head still held its ticket")
		case <-time.After(20 * time.Millisecond):
		}
		if err := head.Leave(); err != nil {
			t.Fatal(err)
		}
		select {
		case tk := <-got:
			if err := tk.Leave(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the third waiter was not served after the head left")
		}
	})
}

// TestLeftoverTicketOfADeadOwner: a ticket file whose flock nobody holds
// (its process died) is passed over and removed.
func TestLeftoverTicketOfADeadOwner(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.Create(path.Join(dir, "t00000000000000000007"))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		done := make(chan error, 1)
		go func() {
			tk, err := lockq.New(fsys, dir).Join(time.Now().Add(5*time.Second), nil)
			if err == nil {
				if tk.Name() <= "t00000000000000000007" {
					t.Errorf("new ticket %s does not sort after the leftover", tk.Name())
				}
				err = tk.Leave()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Join waited on a ticket nobody holds")
		}
		if k := queued(t, fsys, dir); k != 0 {
			t.Fatalf("%d tickets left behind", k)
		}
	})
}

// TestExclusion: many goroutines, each with its own Queue, joining and
// leaving in a loop are never served two at a time.
func TestExclusion(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		var inside, max atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := lockq.New(fsys, dir)
				for range 40 {
					tk, err := q.Join(time.Now().Add(10*time.Second), nil)
					if err != nil {
						t.Error(err)
						return
					}
					if n := inside.Add(1); n > max.Load() {
						max.Store(n)
					}
					time.Sleep(20 * time.Microsecond)
					inside.Add(-1)
					if err := tk.Leave(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if m := max.Load(); m != 1 {
			t.Fatalf("%d waiters were served at once", m)
		}
	})
}

// TestIdle: the queue is idle when every ticket taken has been served (the
// last one served may still hold it: the caller's real lock decides), not
// while one waits; a ticket that gave up keeps it busy until a later one is
// served (Idle errs toward queueing).
func TestIdle(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := lockq.New(fsys, dir)
		idle := func() bool {
			t.Helper()
			ok, err := q.Idle()
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if idle() {
			t.Fatal("a queue that does not exist yet is idle")
		}
		head := join(t, q, time.Second)
		done := make(chan error, 1)
		go func() {
			tk, err := lockq.New(fsys, dir).Join(time.Now().Add(10*time.Second), nil)
			if err == nil {
				err = tk.Leave()
			}
			done <- err
		}()
		waitQueued(t, fsys, dir, 2)
		if idle() {
			t.Fatal("idle while a ticket waits")
		}
		if err := head.Leave(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !idle() {
			t.Fatal("not idle after every ticket was served")
		}
		head = join(t, q, time.Second)
		if _, err := lockq.New(fsys, dir).Join(time.Now().Add(20*time.Millisecond), nil); !errors.Is(err, vfs.ErrBusy) {
			t.Fatalf("a second ticket got %v, want ErrBusy", err)
		}
		if err := head.Leave(); err != nil {
			t.Fatal(err)
		}
		if idle() {
			t.Fatal("idle while a ticket that gave up was never served")
		}
		tk := join(t, q, time.Second)
		if err := tk.Leave(); err != nil {
			t.Fatal(err)
		}
		if !idle() {
			t.Fatal("not idle after every ticket was served or gave up")
		}
	})
}

// TestAWaiterThatLeftItsTurnKeepsItsPlace: a Wait whose progress declines
// the turn returns ErrLeft with the ticket still in the queue, unserved:
// the queue is not Idle, a later ticket waits behind it, and the owner can
// Wait again from the same place. A Wait that left the ticket, or served
// it, fails this.
func TestAWaiterThatLeftItsTurnKeepsItsPlace(t *testing.T) {
	filesystems(t, func(t *testing.T, fsys vfs.FS, dir string) {
		q := lockq.New(fsys, dir)
		kept, err := q.Take(time.Now().Add(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := kept.Wait(time.Now().Add(10*time.Second), func() bool { return true }); !errors.Is(err, lockq.ErrLeft) {
			t.Fatalf("Wait whose progress declined the turn: %v, want ErrLeft", err)
		}
		if idle, err := q.Idle(); err != nil || idle {
			t.Fatalf("Idle with a kept ticket: %v %v, want false", idle, err)
		}
		later, err := lockq.New(fsys, dir).Take(time.Now().Add(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := later.Wait(time.Now().Add(50*time.Millisecond), nil); !errors.Is(err, vfs.ErrBusy) {
			t.Fatalf("a later ticket behind the kept one: %v, want ErrBusy", err)
		}
		if err := kept.Wait(time.Now().Add(10*time.Second), nil); err != nil {
			t.Fatalf("Wait again from the kept place: %v", err)
		}
		if err := kept.Leave(); err != nil {
			t.Fatal(err)
		}
		if n := queued(t, fsys, dir); n != 0 {
			t.Fatalf("%d tickets after both left; want 0", n)
		}
	})
}

// TestVanishedTicketMeansItsOwnerLeft: a waiter that finds the ticket
// ahead of it gone at any step of its wait (its Lock or the Lock that
// clears a dead owner's ticket fails with ENOENT, as on a FUSE filesystem
// when the owner unlinks the name between lookup and open) moves on and
// is served; it does not fail with an I/O error. The injection fires on
// the exact call; removing the gone checks in waitGone fails each case
// with "lock /s/lockq/t00000000000000000001: ... no such file or
// directory".
func TestVanishedTicketMeansItsOwnerLeft(t *testing.T) {
	const pred = "/s/lockq/t00000000000000000001"
	for _, c := range []struct {
		name string
		// nth is the Lock call on pred that fails: the owner's own Take
		// is call 1 when the owner is alive.
		nth int64
		// dead: the owner died without leaving (its ticket file stays,
		// unlocked), so the waiter's second Lock, the one that clears
		// it, is the one that races.
		dead bool
	}{
		{"the wait for the ticket ahead", 2, false},
		{"the clearing of a dead owner's ticket", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := faultfs.NewMem()
			in := faultfs.NewInjecting(mem, faultfs.Rule{Op: faultfs.OpLock, Path: pred, Nth: c.nth, Err: faultfs.FaultENOENT})
			q := lockq.New(in, "/s/lockq")
			var owner *lockq.Ticket
			if c.dead {
				if err := mem.MkdirAll("/s/lockq", 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := mem.Create(pred)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			} else {
				owner = join(t, q, time.Second)
			}
			waiter, err := lockq.New(in, "/s/lockq").Take(time.Now().Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if owner != nil {
				if err := owner.Leave(); err != nil {
					t.Fatal(err)
				}
			}
			if err := waiter.Wait(time.Now().Add(time.Second), nil); err != nil {
				t.Fatalf("Wait after the ticket ahead vanished: %v, want its turn", err)
			}
			if n := len(in.Injections()); n != 1 {
				t.Fatalf("%d injections fired, want 1 (the race was not reached)", n)
			}
			if err := waiter.Leave(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
