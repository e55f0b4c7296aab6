package server

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// stallFor sets the stall watch to check every 5 ms, give up after 30 ms,
// and see the server's process as stopped when stopped says so.
func stallFor(t *testing.T, stopped func(int) bool) {
	check, limit, was := stallCheck, stallLimit, processStopped
	stallCheck, stallLimit, processStopped = 5*time.Millisecond, 30*time.Millisecond, stopped
	t.Cleanup(func() { stallCheck, stallLimit, processStopped = check, limit, was })
}

// TestAClientGivesUpOnAStoppedServer: a stopped server process answers
// nothing, and the kernel queues the request for it; the client ends its
// wait with ErrGone (ErrStalled) instead of waiting for ever.
func TestAClientGivesUpOnAStoppedServer(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := start(t, t.TempDir(), func(inv *Invocation) int { <-release; return 0 })
	stallFor(t, func(int) bool { return true })
	done := make(chan error, 1)
	go func() {
		_, err := Run(s.cfg.Dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrGone) || !errors.Is(err, ErrStalled) {
			t.Fatalf("Run: %v, want ErrGone and ErrStalled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client waited for the stopped server for ever")
	}
}

// TestAClientWaitsForARunningServerHoweverLong: a command that runs longer
// than the stall limit on a server that is not stopped is waited for.
func TestAClientWaitsForARunningServerHoweverLong(t *testing.T) {
	s := start(t, t.TempDir(), func(inv *Invocation) int { time.Sleep(150 * time.Millisecond); return 7 })
	stallFor(t, func(int) bool { return false })
	st, err := Run(s.cfg.Dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard)
	if err != nil || st != 7 {
		t.Fatalf("Run: %d %v, want 7", st, err)
	}
}

// TestProcessStoppedReadsTheServersState: the server's pid comes from the
// connection, and a running process does not read as stopped.
func TestProcessStoppedReadsTheServersState(t *testing.T) {
	s := start(t, t.TempDir(), echo)
	c, err := Dial(s.cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if pid := peerPID(c.c); pid != os.Getpid() {
		t.Fatalf("peer pid %d, want this process's %d (the server runs in it)", pid, os.Getpid())
	}
	if processStopped(os.Getpid()) || processStopped(0) {
		t.Fatal("a running process, or none, reads as stopped")
	}
}
