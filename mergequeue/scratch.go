package mergequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/swarmops/swarmops/core/vfs"
)

// A check's scratch directory holds, beside the tree, a lock its runner
// holds while the check runs and the check's process group. A runner
// killed outright (SIGKILL, a server killed) leaves both behind: the
// directory a whole checkout of the target, the check still running. The
// next runner on the host finds such a directory by its free lock and
// clears it.
const (
	scratchPrefix = "swarmops-check-"
	scratchLock   = "lock"
	scratchPgid   = "pgid"
)

// newScratch makes a scratch directory under tempDir and takes its lock;
// release removes the directory and lets the lock go. The directory gets
// its lock under a name the sweep passes over, then its own name: a sweep
// never finds it without its lock held.
func newScratch(tempDir string) (dir string, release func(), err error) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	tmp, err := os.MkdirTemp(tempDir, "."+scratchPrefix)
	if err != nil {
		return "", nil, err
	}
	l, err := vfs.OS().Lock(filepath.Join(tmp, scratchLock), 0)
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("lock the check's scratch directory: %w", err)
	}
	dir = filepath.Join(tempDir, strings.TrimPrefix(filepath.Base(tmp), "."))
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		l.Unlock()
		return "", nil, err
	}
	return dir, func() {
		os.RemoveAll(dir)
		l.Unlock()
	}, nil
}

// notePgid records the check's process group in its scratch directory.
func notePgid(dir string, pgid int) {
	_ = os.WriteFile(filepath.Join(dir, scratchPgid), []byte(strconv.Itoa(pgid)), 0o600)
}

// sweepScratch clears the scratch directories under tempDir that no
// runner holds: it kills what is left of their checks and removes them.
// (A directory a crash left between its making and its name keeps only
// an empty tree and the lock file: it is left.)
func sweepScratch(tempDir string) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tempDir, scratchPrefix+"*"))
	for _, dir := range dirs {
		l, err := vfs.OS().Lock(filepath.Join(dir, scratchLock), 0)
		if err != nil {
			continue // a runner holds it, or it is not ours to judge
		}
		killOrphanedCheck(dir)
		os.RemoveAll(dir)
		l.Unlock()
	}
}

// killOrphanedCheck kills the process group recorded in dir, if a process
// of it still works in dir: a recorded number a new process has since
// taken is left alone.
func killOrphanedCheck(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, scratchPgid))
	if err != nil {
		return
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pgid <= 1 {
		return
	}
	real, err := filepath.EvalSymlinks(dir) // what /proc shows as a cwd
	if err != nil {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join(p, "cwd")); err == nil && within(cwd, real) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
	}
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
