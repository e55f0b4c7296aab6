// Package lockq is a first-come, first-served queue of lock waiters shared by
// every process (and goroutine) on one host, built from files and flock
// through vfs.FS.
//
// Why it exists: a bare flock is not fair. When its holder lets go, Linux
// wakes every waiter and whichever is scheduled first takes it, so with 32
// writers on 2 cores one writer can wait hundreds of hand-offs while others
// go again and again (the contention suite's spread and waits show it),
// and every hand-off wakes all 31 waiters to let one through. The queue hands
// the lock to the longest waiter and wakes only it.
//
// The queue does not give mutual exclusion by itself: the caller takes its
// real lock after Join returns, so a bug here can cost fairness but never
// exclusion.
//
// Layout of the queue directory:
//
//	GUARD      flock held for a few microseconds to take a ticket
//	NEXT       8 bytes, little endian: the next ticket number
//	t<20 digits>  one file per live ticket, flocked by its owner
//
// Join, under GUARD: list the tickets, take number max(NEXT, highest
// listed + 1), store the number after it in NEXT, create the ticket file and
// flock it. Then, without GUARD, wait for the ticket just below it: taking
// that file's flock means its owner has left (it gave up, was served, or
// died). Remove it, list again, and wait for the next lower one, until none
// is left. Numbers only grow within a boot, so no ticket created after ours
// can sort before it, and a ticket name is never reused while anyone may
// still hold an old file of that name. Only an owner removes a live ticket;
// a waiter removes a ticket only once it holds its flock, when the owner is
// gone. NEXT lives in the page cache and may go back after a power loss,
// which is harmless: no process survives a power loss, and the highest
// listed ticket still bounds the next number from below.
package lockq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// GuardName is the base name of the guard lock file. A test seam that
// interleaves writers at "the writer lock" hooks the first Lock of this file.
const GuardName = "GUARD"

const (
	nextName     = "NEXT"
	ticketPrefix = "t"
	ticketDigits = 20
)

// Queue is one queue directory.
type Queue struct {
	fs    vfs.FS
	dir   string
	ready atomic.Bool // dir is known to exist

	mu sync.Mutex
	nf afero.File // NEXT, kept open; nil after an error

	// SkipWaiter is a test-only canary (testknobs.QueueSkipWaiter): a
	// waiter ignores the ticket just ahead of it, so a hand-off can skip
	// a waiter. Set before the queue is used.
	SkipWaiter bool
}

// New returns the queue in dir. The directory is created on first use.
func New(fsys vfs.FS, dir string) *Queue {
	return &Queue{fs: fsys, dir: dir}
}

// Ticket is a place in the queue, held from Join until Leave.
type Ticket struct {
	q    *Queue
	name string
	l    vfs.Locked
	// below lists the tickets ahead of this one when it was taken, for
	// its first Wait (listed: below is set).
	below  []string
	listed bool
}

// Join takes a ticket and returns once every ticket taken before it has
// left: Take, then Wait. It fails with an error satisfying
// errors.Is(err, vfs.ErrBusy) at deadline, having left the queue. When
// progress asks to leave, Join leaves the queue and returns ErrLeft.
func (q *Queue) Join(deadline time.Time, progress func() (leave bool)) (*Ticket, error) {
	t, err := q.Take(deadline)
	if err != nil {
		return nil, err
	}
	if err := t.Wait(deadline, progress); err != nil {
		if errors.Is(err, ErrLeft) {
			if lerr := t.Leave(); lerr != nil {
				return nil, lerr
			}
		}
		return nil, err
	}
	return t, nil
}

// Take takes a ticket at the back of the queue. Its owner waits for its
// turn with Wait, and must Leave it in the end.
func (q *Queue) Take(deadline time.Time) (*Ticket, error) {
	if !q.ready.Load() {
		if err := q.fs.MkdirAll(q.dir, 0o755); err != nil {
			return nil, err
		}
		q.ready.Store(true)
	}
	t, below, err := q.take(deadline)
	if err != nil {
		return nil, err
	}
	t.below, t.listed = below, true
	return t, nil
}

// Wait returns once every ticket taken before t has left: t's turn. It
// fails with an error satisfying errors.Is(err, vfs.ErrBusy) at deadline,
// and on that or any other error it has left the queue.
//
// A waiter far back in the queue does not wait for its predecessor alone:
// it first waits for the ticket Lookahead places ahead of it, calls
// progress (if not nil), and only then waits for the one just ahead. The
// store uses progress to replay, while it queues, the frames the writers
// ahead of it appended, so its own turn replays only the last few. Each
// ticket is then waited on by at most two waiters, so a hand-off still
// wakes no more than two processes. progress is called once more at the
// turn. If progress returns true, the waiter no longer needs its turn now:
// Wait returns ErrLeft with t still in the queue, in its place, unserved.
// The owner then either leaves (the store does when every transaction it
// queued for has already lost its compare-and-swap to a writer ahead of
// it) or waits again later from the same place (the store does when the
// same process retries soon after: see core.Options.RetryPlace).
func (t *Ticket) Wait(deadline time.Time, progress func() (leave bool)) error {
	q := t.q
	below := t.below
	if !t.listed {
		var err error
		if below, err = q.list(t.name); err != nil {
			t.Leave()
			return err
		}
	}
	t.below, t.listed = nil, false
	below = q.ahead(below)
	for len(below) > 0 {
		i := len(below) - 1
		if progress != nil && i >= Lookahead {
			i -= Lookahead
		}
		pred := below[i]
		if err := q.waitGone(pred, deadline); err != nil {
			t.Leave()
			return err
		}
		if progress != nil && i < len(below)-1 && progress() {
			return ErrLeft
		}
		if i == len(below)-1 {
			// The ticket just ahead was served (not merely gone): then
			// every ticket below it is gone too, and no listing is needed.
			head, ok, err := q.head()
			if err != nil {
				t.Leave()
				return err
			}
			if ok && head >= number(pred) {
				break
			}
		}
		var err error
		if below, err = q.list(t.name); err != nil {
			t.Leave()
			return err
		}
		below = q.ahead(below)
	}
	// At its turn, once more: a turn the waiter no longer needs is not
	// served (HEAD stays), so the queue is not Idle for a writer that
	// would take the real lock past the place kept.
	if progress != nil && progress() {
		return ErrLeft
	}
	if err := q.setHead(number(t.name)); err != nil {
		t.Leave()
		return err
	}
	return nil
}

// ahead is the tickets a waiter waits for: those below it, or, under
// the SkipWaiter canary, all but the one just ahead.
func (q *Queue) ahead(below []string) []string {
	if q.SkipWaiter && len(below) > 0 {
		return below[:len(below)-1]
	}
	return below
}

// Idle reports whether every ticket ever taken has been served: NEXT is one
// past HEAD. The last ticket served may still hold its turn; a caller that
// finds the queue idle tries its real lock once without queueing (a lone
// writer pays one read instead of the queue's dozen calls), and that lock
// decides. The answer can be stale by the time it is used; the cost is that
// a writer in that instant may be overtaken once, never that two hold the
// real lock.
// A ticket that gave up is never served, so the queue is not Idle again
// until a later ticket has been: Idle errs toward queueing.
func (q *Queue) Idle() (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	nf, err := q.next()
	if errors.Is(err, fs.ErrNotExist) && !q.ready.Load() {
		return false, nil // no queue directory yet: Join makes it
	}
	if err != nil {
		return false, err
	}
	q.ready.Store(true)
	var b [headOff + 16]byte
	n, err := nf.ReadAt(b[:], 0)
	if err != nil && err != io.EOF {
		q.dropNext()
		return false, err
	}
	if n != len(b) {
		return false, nil
	}
	next := binary.LittleEndian.Uint64(b[:8])
	h := binary.LittleEndian.Uint64(b[headOff:])
	if binary.LittleEndian.Uint64(b[headOff+8:]) != ^h {
		return false, nil
	}
	return next == h+1, nil
}

// ErrLeft is the answer of Join and Wait when their progress function
// asked to leave.
var ErrLeft = errors.New("lockq: left the queue before its turn")

// Lookahead is how many places ahead of its own a waiter first waits for
// (see Join).
const Lookahead = 4

// waitGone returns once the owner of ticket name has left the queue. Taking
// the ticket's flock proves it; the flock is let go at once, because the
// waiter right behind that ticket is waiting for it too. A name still there
// after that belongs to an owner that died without leaving: it is removed
// under its flock. (Lock recreates a name it does not find; such a
// recreation names no live ticket either and is removed the same way.)
//
// Every step races with the owner's Leave, which unlinks the name, and
// with other waiters clearing it: a name found gone at any step (Lock,
// Stat or Remove fails with ENOENT) means its owner has left, and the
// waiter moves on. Lock creates a missing name, yet it can still fail
// with ENOENT: a FUSE filesystem looks the name up and opens it in two
// requests, and an unlink between them fails the open; a network
// filesystem reports ESTALE for the same race.
func (q *Queue) waitGone(name string, deadline time.Time) error {
	p := path.Join(q.dir, name)
	l, err := q.fs.Lock(p, time.Until(deadline))
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := l.Unlock(); err != nil {
		return err
	}
	if _, err := q.fs.Stat(p); gone(err) {
		return nil
	}
	l, err = q.fs.Lock(p, 0)
	if errors.Is(err, vfs.ErrBusy) || gone(err) {
		// Another waiter is clearing it (or just cleared and recreated
		// it), or cleared it: either way its owner is gone.
		return nil
	}
	if err != nil {
		return err
	}
	rerr := q.fs.Remove(p)
	return errors.Join(ignoreMissing(rerr), l.Unlock())
}

// take allocates a ticket under GUARD and returns it with the live tickets
// below it, in ascending order.
func (q *Queue) take(deadline time.Time) (*Ticket, []string, error) {
	g, err := q.fs.Lock(path.Join(q.dir, GuardName), time.Until(deadline))
	if err != nil {
		return nil, nil, err
	}
	t, below, err := q.takeGuarded()
	if uerr := g.Unlock(); uerr != nil && err == nil {
		t.Leave()
		return nil, nil, uerr
	}
	return t, below, err
}

func (q *Queue) takeGuarded() (*Ticket, []string, error) {
	names, err := q.tickets()
	if err != nil {
		return nil, nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	nf, err := q.next()
	if err != nil {
		return nil, nil, err
	}
	var buf [8]byte
	var next uint64
	if n, err := nf.ReadAt(buf[:], 0); n == len(buf) {
		next = binary.LittleEndian.Uint64(buf[:])
	} else if err != nil && err != io.EOF {
		q.dropNext()
		return nil, nil, err
	}
	if len(names) > 0 {
		if hi := number(names[len(names)-1]); hi >= next {
			next = hi + 1
		}
	}
	// HEAD may have survived a power loss that took NEXT back: a number
	// at or below it would look served before its turn.
	if head, ok, err := q.headLocked(); err != nil {
		return nil, nil, err
	} else if ok && head >= next {
		next = head + 1
	}
	if next == 0 {
		next = 1
	}
	binary.LittleEndian.PutUint64(buf[:], next+1)
	if _, err := nf.WriteAt(buf[:], 0); err != nil {
		q.dropNext()
		return nil, nil, err
	}
	name := ticketName(next)
	l, err := q.fs.Lock(path.Join(q.dir, name), 0)
	if err != nil {
		if errors.Is(err, vfs.ErrBusy) {
			// Someone holds a file of a name never issued before: the
			// directory was tampered with.
			return nil, nil, fmt.Errorf("lockq: new ticket %s is already locked: %w", path.Join(q.dir, name), fs.ErrExist)
		}
		return nil, nil, err
	}
	return &Ticket{q: q, name: name, l: l}, names, nil
}

// next returns the open NEXT file. Caller holds q.mu.
func (q *Queue) next() (afero.File, error) {
	if q.nf == nil {
		f, err := q.fs.OpenFile(path.Join(q.dir, nextName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		q.nf = f
	}
	return q.nf, nil
}

// dropNext closes NEXT after an error, so the next use reopens it. Caller
// holds q.mu.
func (q *Queue) dropNext() {
	if q.nf != nil {
		q.nf.Close()
		q.nf = nil
	}
}

// Close releases the queue's open file.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropNext()
}

// HEAD, at offset headOff of NEXT, is the number of the last ticket
// served, with its complement as a check: a read torn by a concurrent write
// fails the check and is ignored. Only the served ticket writes it, so it
// only grows. It is an optimization: a waiter whose predecessor is gone
// skips listing the queue if HEAD shows that predecessor was served.
const headOff = 8

func (q *Queue) head() (uint64, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.headLocked()
}

// headLocked reads HEAD. ok is false when it is missing or fails its
// check. Caller holds q.mu.
func (q *Queue) headLocked() (uint64, bool, error) {
	nf, err := q.next()
	if err != nil {
		return 0, false, err
	}
	var b [16]byte
	n, err := nf.ReadAt(b[:], headOff)
	if err != nil && err != io.EOF {
		q.dropNext()
		return 0, false, err
	}
	if n != len(b) {
		return 0, false, nil
	}
	h := binary.LittleEndian.Uint64(b[:8])
	if binary.LittleEndian.Uint64(b[8:]) != ^h {
		return 0, false, nil
	}
	return h, true, nil
}

func (q *Queue) setHead(n uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	nf, err := q.next()
	if err != nil {
		return err
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], n)
	binary.LittleEndian.PutUint64(b[8:], ^n)
	if _, err := nf.WriteAt(b[:], headOff); err != nil {
		q.dropNext()
		return err
	}
	return nil
}

// list returns the ticket names below mine, ascending.
func (q *Queue) list(mine string) ([]string, error) {
	names, err := q.tickets()
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(names) && names[i] < mine {
		i++
	}
	return names[:i], nil
}

// Leave gives up the ticket: served or not, the next waiter may go. The
// name is removed before the flock is released, so a waiter that lists the
// queue after Leave does not see it.
func (t *Ticket) Leave() error {
	rerr := t.q.fs.Remove(path.Join(t.q.dir, t.name))
	return errors.Join(ignoreMissing(rerr), t.l.Unlock())
}

// Name returns the ticket's file name (for diagnostics and tests).
func (t *Ticket) Name() string { return t.name }
