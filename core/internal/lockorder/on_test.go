//go:build lockorder

package lockorder

import (
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// checkedMem is a memory filesystem holding the directory dir, its locks
// checked for order.
func checkedMem(t *testing.T, dir string) vfs.FS {
	t.Helper()
	m := faultfs.NewMem()
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return WrapFS(m)
}

// mustLock takes the lock file name on fsys, failing the test if it
// cannot.
func mustLock(t *testing.T, fsys vfs.FS, name string) vfs.Locked {
	t.Helper()
	l, err := fsys.Lock(name, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustPanic runs f and returns the panic's message, failing if it does
// not panic.
func mustPanic(t *testing.T, what string, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("%s: no panic", what)
		}
		msg, _ = r.(string)
	}()
	f()
	return ""
}

// TestTheOrderIsAllowed: locks taken in rank order, and released, pass.
func TestTheOrderIsAllowed(t *testing.T) {
	var hold Mutex[Hold]
	var proj Mutex[Projection]
	var leaf Mutex[Leaf]
	hold.Lock()
	proj.Lock()
	leaf.Lock()
	leaf.Unlock()
	proj.Unlock()
	hold.Unlock()
	proj.Lock() // nothing held any more
	proj.Unlock()
}

// TestAReversedAcquisitionPanics: a goroutine that holds the projection
// mutex and takes the hold mutex, ranked before it, panics, naming both;
// so does taking a second leaf under a leaf, and a file lock ranked before
// a mutex held.
func TestAReversedAcquisitionPanics(t *testing.T) {
	var hold Mutex[Hold]
	var proj Mutex[Projection]
	proj.Lock()
	msg := mustPanic(t, "hold under the projection", hold.Lock)
	if !strings.Contains(msg, "Hold") || !strings.Contains(msg, "Projection") {
		t.Fatalf("the report names neither lock: %s", msg)
	}
	proj.Unlock()

	var a, b Mutex[Leaf]
	a.Lock()
	mustPanic(t, "a leaf under a leaf", b.Lock)
	a.Unlock()

	fs := checkedMem(t, "/s/lockq")
	proj.Lock()
	mustPanic(t, "SYNCLOCK under the projection", func() { fs.Lock("/s/SYNCLOCK", time.Second) })
	proj.Unlock()
	sync := mustLock(t, fs, "/s/SYNCLOCK")
	mustPanic(t, "LOCK under SYNCLOCK", func() { fs.Lock("/s/LOCK", time.Second) })
	sync.Unlock()
}

// TestATicketIsTakenOutsideTheStoreLocks: a queue ticket may be taken
// while the goroutine holds another ticket (a waiter takes the one ahead
// of its own), never under LOCK or a mutex.
func TestATicketIsTakenOutsideTheStoreLocks(t *testing.T) {
	fs := checkedMem(t, "/s/lockq")
	own := mustLock(t, fs, "/s/lockq/t00000000000000000002")
	ahead := mustLock(t, fs, "/s/lockq/t00000000000000000001")
	ahead.Unlock()
	own.Unlock()
	lock := mustLock(t, fs, "/s/LOCK")
	mustPanic(t, "a ticket under LOCK", func() { fs.Lock("/s/lockq/t00000000000000000003", time.Second) })
	lock.Unlock()
	var leaf Mutex[Leaf]
	leaf.Lock()
	mustPanic(t, "GUARD under a mutex", func() { fs.Lock("/s/lockq/GUARD", time.Second) })
	leaf.Unlock()
}

// TestAReleaseByAnotherGoroutineIsForgotten: a lock released by another
// goroutine than the one that took it (a kept ticket given up by its
// timer) no longer counts as held by the first.
func TestAReleaseByAnotherGoroutineIsForgotten(t *testing.T) {
	fs := checkedMem(t, "/s")
	l := mustLock(t, fs, "/s/SYNCLOCK")
	done := make(chan struct{})
	go func() { l.Unlock(); close(done) }()
	<-done
	lock, err := fs.Lock("/s/LOCK", time.Second)
	if err != nil {
		t.Fatalf("LOCK after SYNCLOCK was released by another goroutine: %v", err)
	}
	lock.Unlock()
}
