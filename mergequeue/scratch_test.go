package mergequeue

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startIn starts a long sleep in a process group of its own, working in
// dir, as a check does in its tree.
func startIn(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sleep", "60")
	c.Dir = dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
	return c
}

// TestASweepClearsWhatAKilledRunnerLeft: a scratch directory no runner
// holds (its runner was killed) loses its check's process group and goes;
// one a runner holds keeps both.
func TestASweepClearsWhatAKilledRunnerLeft(t *testing.T) {
	tmp := t.TempDir()
	orphan := filepath.Join(tmp, scratchPrefix+"orphan")
	o := startIn(t, filepath.Join(orphan, "tree"))
	notePgid(orphan, o.Process.Pid)
	live, release, err := newScratch(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	l := startIn(t, filepath.Join(live, "tree"))
	notePgid(live, l.Process.Pid)

	sweepScratch(tmp)

	done := make(chan error, 1)
	go func() { done <- o.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the orphaned check still runs after the sweep")
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the orphaned scratch directory is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the held scratch directory went: %v", err)
	}
	if err := syscall.Kill(l.Process.Pid, 0); err != nil {
		t.Fatalf("the held directory's check was killed: %v", err)
	}
}
