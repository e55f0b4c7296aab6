package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitLost waits for s to stop on its own and checks that it says why.
func waitLost(t *testing.T, s *Server) {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- s.Wait() }()
	select {
	case err := <-got:
		if !errors.Is(err, ErrLost) {
			t.Fatalf("Wait: %v, want ErrLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server went on serving")
	}
	if err := s.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestAServerWhoseSocketWasDeletedStops: nobody can reach a server whose
// socket's name is gone, and no second server may start while it holds
// the lock; it stops, and the lock goes with it.
func TestAServerWhoseSocketWasDeletedStops(t *testing.T) {
	dir := t.TempDir()
	s := mustStart(t, Config{Dir: dir, Handler: echo, WatchEvery: 10 * time.Millisecond})
	if err := os.Remove(s.Socket()); err != nil {
		t.Fatal(err)
	}
	waitLost(t, s)
	again := mustStart(t, Config{Dir: dir, Handler: echo})
	again.Stop(time.Second)
}

// TestAServerWhoseDirectoryMovedStopsAndLeavesTheOldPathAlone: the store
// directory was moved away and a new one made at its path, with a server
// of its own. The old server stops, and removes neither the socket nor
// the lock that now stand at its old paths.
func TestAServerWhoseDirectoryMovedStopsAndLeavesTheOldPathAlone(t *testing.T) {
	root := t.TempDir()
	dir, moved := filepath.Join(root, "a"), filepath.Join(root, "b")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := mustStart(t, Config{Dir: dir, Handler: echo, WatchEvery: 10 * time.Millisecond})
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := mustStart(t, Config{Dir: dir, Handler: echo})
	defer other.Stop(time.Second)
	waitLost(t, s)
	for _, name := range []string{SocketName, LockName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the moved server's stop removed the new server's %s: %v", name, err)
		}
	}
}
