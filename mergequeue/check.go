package mergequeue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// DefaultOutputLimit is how much of a check's combined output is kept
// when Options.OutputLimit is zero: its last 64 KiB.
const DefaultOutputLimit = 64 << 10

// checkResult is one run of the check.
type checkResult struct {
	pass     bool
	exit     int
	timedOut bool
	output   string
}

// runCheck checks out tip in a new scratch directory, runs the check there
// with sh -c, and removes the directory. A check that cannot be started,
// or a tree that cannot be checked out, is an error, not a failed check:
// nothing is ejected for it.
func (r *runner) runCheck(sn *core.Snapshot, tip core.ID) (checkResult, error) {
	r.checks++
	if h := testknobs.QueueCheck; h != nil {
		return hookCheck(h, sn, r.target, tip)
	}
	sweepScratch(r.o.TempDir)
	scratch, release, kept := keptScratch(r.o.TempDir, r.s.Dir()+"\x00"+r.target)
	if !kept {
		var err error
		if scratch, release, err = newScratch(r.o.TempDir); err != nil {
			return checkResult{}, err
		}
	}
	defer release()
	dir, err := readyTree(sn, tip, scratch)
	if err != nil {
		return checkResult{}, fmt.Errorf("check out %s for the check: %w", short(tip), err)
	}
	ctx, cancel := context.Background(), func() {}
	if r.o.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, r.o.Timeout)
	}
	defer cancel()
	out := &tail{limit: r.o.OutputLimit}
	if out.limit <= 0 {
		out.limit = DefaultOutputLimit
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", r.o.Check)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.Env = append(os.Environ(), "SWARMOPS_CHECK_TARGET="+r.target, "SWARMOPS_CHECK_TIP="+tip.String())
	// The check runs in a process group of its own, killed whole at the
	// timeout: a test runner's children must not outlive it.
	// A runner killed outright leaves the group running; the next
	// runner's sweep ends it (sweepScratch).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return checkResult{}, fmt.Errorf("run the check: %w", err)
	}
	notePgid(scratch, cmd.Process.Pid)
	err = cmd.Wait()
	res := checkResult{output: out.String(), timedOut: ctx.Err() != nil}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.pass = true
	case errors.As(err, &ee):
		res.exit = ee.ExitCode()
	case res.timedOut:
		res.exit = -1
	default:
		return checkResult{}, fmt.Errorf("run the check: %w", err)
	}
	return res, nil
}

// hookCheck runs the test hook testknobs.QueueCheck on tip's paths in
// place of the check command.
func hookCheck(h func(string, []string) (int, string), sn *core.Snapshot, target string, tip core.ID) (checkResult, error) {
	flat, err := sn.Flatten(tip)
	if err != nil {
		return checkResult{}, fmt.Errorf("check out %s for the check: %w", short(tip), err)
	}
	paths := make([]string, 0, len(flat))
	for p := range flat {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	exit, out := h(target, paths)
	return checkResult{pass: exit == 0, exit: exit, output: out}, nil
}

// tail keeps the last limit bytes written to it.
type tail struct {
	limit int
	buf   []byte
	cut   bool
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return n, nil
}

func (t *tail) String() string {
	if t.cut {
		return "[... output cut: its last " + fmt.Sprint(t.limit) + " bytes follow]\n" + string(t.buf)
	}
	return string(t.buf)
}
