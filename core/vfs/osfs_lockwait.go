package vfs

import (
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll bounds one round of waitClose: a release that made no inotify
// event (a holder that unlocked with flock(LOCK_UN) but kept its
// descriptor open, which no code of this store does, or a filesystem whose
// closes inotify does not see) is still seen within this long. A variable
// for tests.
var lockPoll = 100 * time.Millisecond

// missLimit is how many waits in a row may find the lock free after a
// poll round, a close having gone unreported, before the process gives up
// on inotify and polls LOCK_NB instead (pollFlock): a filesystem that
// reports no closes must not cost every wait a poll round.
const missLimit = 3

// watchMask is what the inotify watch reports; a variable so that a test
// can watch for nothing a holder does and see the waits fall back.
var watchMask uint32 = unix.IN_CLOSE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// lockPolls counts the rounds of waitClose that its timer ended, not a
// close (a test of the wake-up reads it); misses counts the waits in a row
// that found the lock free after such a round; noInotify makes every wait
// poll instead (pollFlock; set by a test, or by missLimit misses).
var (
	lockPolls atomic.Int64
	noInotify atomic.Bool
	misses    atomic.Int32
)

// waitClose waits until fd, an open file description of name, takes
// LOCK_EX, or deadline passes (ErrBusy). It waits for the holder's close,
// not in flock: the process's inotify descriptor reports every close of
// the file, and a holder lets go of a flock by closing its descriptor
// (Unlock) or by dying, which closes it too. After each close the waiter
// tries LOCK_NB again.
//
// Why not a blocking flock: a goroutine blocked in a system call keeps its
// P, and while another P is idle the Go runtime's monitor wakes every 20 µs
// for the first millisecond of the call and then backs off slowly. With 32
// writer processes each blocked most of the time in the writer queue, those
// wake-ups are most of the machine's context switches. The inotify
// descriptor is read through the runtime's poller instead: the waiting
// goroutine parks, its P goes idle, and the monitor sleeps. (The
// process's first system call after the wake-up wakes the monitor into
// 20 µs polling again; the runtime gives no way to avoid that, and those
// wake-ups remain half of a queued writer's context switches.)
//
// handled is false when inotify cannot be used (no inotify instance or
// watch to be had): the caller then polls (pollFlock).
func waitClose(fd int, name string, deadline time.Time) (handled bool, err error) {
	if noInotify.Load() {
		return false, nil
	}
	w, ok := closes.watch(name)
	if !ok {
		return false, nil
	}
	defer closes.unwatch(w)
	var timer *time.Timer
	polled := false // the last round ended on the timer
	for {
		// The watch is on before this try, so a close between the try
		// and the wait below is not missed: it closes w's channel.
		closed := closes.next(w)
		err := ignoringEINTR(func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
		if err == nil {
			if !polled {
				misses.Store(0)
			} else if misses.Add(1) >= missLimit {
				noInotify.Store(true)
			}
			return true, nil
		}
		if err != unix.EWOULDBLOCK {
			return true, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return true, ErrBusy
		}
		round := min(left, lockPoll)
		if timer == nil {
			timer = time.NewTimer(round)
			defer timer.Stop()
		} else {
			timer.Reset(round)
		}
		select {
		case <-closed:
			polled = false
		case <-timer.C:
			lockPolls.Add(1)
			polled = true
		}
	}
}

// closeWatcher is the process's one inotify descriptor, shared by every
// waitClose: closing an inotify descriptor waits for an RCU grace period
// (about 10 ms), too long to pay per wait. One goroutine reads its events
// through the poller and wakes the waiters of each watch.
type closeWatcher struct {
	once sync.Once
	fd   int // -1: inotify is not to be had
	mu   sync.Mutex
	byWD map[int32]*closeWatch
}

// closeWatch is one watched file: its waiters, and a channel closed (and
// replaced) at each event.
type closeWatch struct {
	wd      int32
	waiters int
	closed  chan struct{}
}

// wake closes w's channel and arms a new one. Caller holds closes.mu.
func (w *closeWatch) wake() {
	if w.closed != nil {
		close(w.closed)
		w.closed = make(chan struct{})
	}
}

var closes closeWatcher

func (c *closeWatcher) start() {
	c.fd = -1
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return
	}
	c.fd = fd
	c.byWD = map[int32]*closeWatch{}
	// os.NewFile registers a non-blocking descriptor with the poller, so
	// the reader parks instead of holding a thread.
	go c.read(os.NewFile(uintptr(fd), "inotify"))
}

// read wakes the waiters of each event's watch, for as long as the process
// lives. If the descriptor fails, every watch is woken for good, and the
// waiters go on at lockPoll.
func (c *closeWatcher) read(f *os.File) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		c.mu.Lock()
		if err != nil {
			for _, w := range c.byWD {
				close(w.closed)
				w.closed = nil
			}
			c.fd = -1
			c.mu.Unlock()
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			off += unix.SizeofInotifyEvent + nameLen
			if mask&unix.IN_Q_OVERFLOW != 0 {
				// Events were lost: every waiter tries again.
				for _, w := range c.byWD {
					w.wake()
				}
			} else if w := c.byWD[wd]; w != nil {
				w.wake()
			}
		}
		c.mu.Unlock()
	}
}

// watch adds a watch on name's closes, or joins the one there is.
func (c *closeWatcher) watch(name string) (*closeWatch, bool) {
	c.once.Do(c.start)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, false
	}
	wd, err := unix.InotifyAddWatch(c.fd, name, watchMask)
	if err != nil {
		return nil, false
	}
	w := c.byWD[int32(wd)]
	if w == nil {
		w = &closeWatch{wd: int32(wd), closed: make(chan struct{})}
		c.byWD[w.wd] = w
	}
	w.waiters++
	return w, true
}

// next returns the channel the next event on w closes (nil once the
// descriptor failed: the waiter polls).
func (c *closeWatcher) next(w *closeWatch) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.closed
}

// unwatch leaves w, and removes the watch with its last waiter. The kernel
// drops a watch by itself when its file goes (IN_IGNORED); removing it
// again fails harmlessly.
func (c *closeWatcher) unwatch(w *closeWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.waiters--; w.waiters > 0 {
		return
	}
	delete(c.byWD, w.wd)
	if c.fd >= 0 {
		unix.InotifyRmWatch(c.fd, uint32(w.wd))
	}
}
