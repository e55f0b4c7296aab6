//go:build lockorder

package lockorder

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
)

// Enabled reports whether this build checks the lock order.
const Enabled = true

// Mutex is a sync.Mutex of rank R in the lock order: Lock panics when the
// calling goroutine holds a lock of rank R or above.
type Mutex[R Ranker] struct{ mu sync.Mutex }

// Lock checks the order, then locks m.
func (m *Mutex[R]) Lock() {
	var r R
	acquire(r.Rank(), m, "", true)
	m.mu.Lock()
}

// TryLock locks m if it is free, without waiting (and so without a check:
// a try cannot deadlock); it records m as held when it succeeds.
func (m *Mutex[R]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	var r R
	acquire(r.Rank(), m, "", false)
	return true
}

// Unlock unlocks m.
func (m *Mutex[R]) Unlock() {
	release(m)
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex of rank R in the lock order; a read lock is
// checked as a lock.
type RWMutex[R Ranker] struct{ mu sync.RWMutex }

// Lock checks the order, then locks m.
func (m *RWMutex[R]) Lock() {
	var r R
	acquire(r.Rank(), m, "", true)
	m.mu.Lock()
}

// Unlock unlocks m.
func (m *RWMutex[R]) Unlock() {
	release(m)
	m.mu.Unlock()
}

// RLock checks the order, then read-locks m.
func (m *RWMutex[R]) RLock() {
	var r R
	acquire(r.Rank(), m, "", true)
	m.mu.RLock()
}

// RUnlock read-unlocks m.
func (m *RWMutex[R]) RUnlock() {
	release(m)
	m.mu.RUnlock()
}

// WrapFS returns fsys with its file locks checked: the rank of a lock is
// its name's (FileRank); other files' locks pass unchecked.
func WrapFS(fsys vfs.FS) vfs.FS {
	if _, ok := fsys.(checkedFS); ok {
		return fsys
	}
	return checkedFS{fsys}
}

type checkedFS struct{ vfs.FS }

func (c checkedFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	r, ok := FileRank(name)
	if !ok {
		return c.FS.Lock(name, timeout)
	}
	key := new(byte) // identifies this acquisition
	label := path.Join(path.Base(path.Dir(name)), path.Base(name))
	g := gid()
	if timeout > 0 {
		check(g, r, label)
	}
	l, err := c.FS.Lock(name, timeout)
	if err != nil {
		return nil, err
	}
	// A queue ticket is no goroutine's: a place kept for a retry outlives
	// the goroutine that queued, and another one waits from it or gives
	// it up. Its acquisition is checked against what the goroutine holds
	// (nothing but a ticket may be held), but it is not recorded.
	if r == GuardRank || r == TicketRank {
		return l, nil
	}
	record(g, r, key, label)
	return &checkedLock{Locked: l, key: key}, nil
}

type checkedLock struct {
	vfs.Locked
	key *byte
}

func (l *checkedLock) Unlock() error {
	release(l.key)
	return l.Locked.Unlock()
}

// held is one lock a goroutine holds.
type held struct {
	rank  Rank
	key   any
	label string // a file lock's name (lockq/ and base)
}

func (h held) String() string {
	if h.label != "" {
		return fmt.Sprintf("%s (%s)", h.label, h.rank)
	}
	return fmt.Sprintf("a %s mutex", h.rank)
}

var (
	mu      sync.Mutex
	holders = map[int64][]held{} // by goroutine (gid)
	checked atomic.Int64
)

// Checked returns how many acquisitions were checked.
func Checked() int64 { return checked.Load() }

// acquire checks (when wait) that the calling goroutine may take a lock of
// rank r, then records it as held.
func acquire(r Rank, key any, label string, wait bool) {
	g := gid()
	if wait {
		check(g, r, label)
	}
	record(g, r, key, label)
}

// record notes that goroutine g holds key, of rank r.
func record(g int64, r Rank, key any, label string) {
	if r == unranked {
		panic("lockorder: a lock without a rank")
	}
	mu.Lock()
	holders[g] = append(holders[g], held{rank: r, key: key, label: label})
	mu.Unlock()
}

// check panics if goroutine g holds a lock that r may not be taken under:
// one of rank r or above.
func check(g int64, r Rank, label string) {
	checked.Add(1)
	mu.Lock()
	hs := append([]held(nil), holders[g]...)
	mu.Unlock()
	for _, h := range hs {
		if h.rank < r {
			continue
		}
		var b strings.Builder
		for _, x := range hs {
			fmt.Fprintf(&b, "\n\t%s", x)
		}
		what := held{rank: r, label: label}
		panic(fmt.Sprintf("lockorder: goroutine %#x takes %s while it holds %s, against the lock order (core's package documentation); it holds:%s",
			g, what, h, b.String()))
	}
}

// release forgets the lock key: the calling goroutine's, or another's (a
// mutex may be unlocked by another goroutine than the one that locked it).
func release(key any) {
	g := gid()
	mu.Lock()
	defer mu.Unlock()
	if forget(g, key) {
		return
	}
	for o := range holders {
		if forget(o, key) {
			return
		}
	}
}

// forget removes key from goroutine g's held locks. Caller holds mu.
func forget(g int64, key any) bool {
	hs := holders[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].key == key {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(holders, g)
			} else {
				holders[g] = hs
			}
			return true
		}
	}
	return false
}
