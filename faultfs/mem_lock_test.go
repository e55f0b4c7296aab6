package faultfs_test

import (
	"testing"

	"github.com/swarmops/swarmops/faultfs"
)

// TestLockLeavesNoOpenHandle: taking and releasing a lock many times, as a
// long crash sweep does, leaves no file handle open.
func TestLockLeavesNoOpenHandle(t *testing.T) {
	m := faultfs.NewMem()
	for i := 0; i < 100; i++ {
		l, err := m.Lock("/LOCK", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if n := m.OpenHandles(); n != 1 {
		t.Fatalf("%d open handles with one file open, want 1", n)
	}
	f.Close()
	f.Close() // a second close fails and must not count twice
	if n := m.OpenHandles(); n != 0 {
		t.Fatalf("%d handles left open after 100 locks, want 0", n)
	}
}
