package mergequeue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// A check's scratch directory holds, beside the tree, a lock its runner
// holds while the check runs and the check's process group. A runner
// killed outright (SIGKILL, a server killed) leaves the check running and,
// for a directory of its own, a whole checkout of the target. The next
// runner on the host finds such a directory by its free lock, kills what
// is left of the check and removes the directory, unless it is a target's
// kept tree (keptScratch) in use within keptIdle.
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
// runner holds: it kills what is left of their checks and removes them
// (a kept tree only once idle for keptIdle).
// (A directory a crash left between its making and its name keeps only
// an empty tree and the lock file: it is left.)
func sweepScratch(tempDir string) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tempDir, scratchPrefix+"*"))
	for _, dir := range dirs {
		lock := filepath.Join(dir, scratchLock)
		l, err := vfs.OS().Lock(lock, 0)
		if err != nil {
			continue // a runner holds it, or it is not ours to judge
		}
		killOrphanedCheck(dir)
		// A kept directory stays for its next check, unless idle long.
		kept := strings.HasPrefix(filepath.Base(dir), keptPrefix)
		if fi, err := os.Stat(lock); !kept || err != nil || time.Since(fi.ModTime()) > keptIdle {
			os.RemoveAll(dir)
		}
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

// keptPrefix names the scratch directory a store's queue keeps for one
// target from check to check: switching it to the next tip writes what
// differs, where a fresh checkout of a large tree writes every file.
const keptPrefix = scratchPrefix + "kept-"

// keptIdle is how long a kept directory no runner used stays: a store
// removed, or a target no longer landed on, does not hold a whole
// checkout for ever.
const keptIdle = 24 * time.Hour

// keptScratch takes the kept directory of key under tempDir. ok is false
// when another runner holds it (the caller then makes a directory of its
// own).
func keptScratch(tempDir, key string) (dir string, release func(), ok bool) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(key))
	dir = filepath.Join(tempDir, keptPrefix+hex.EncodeToString(sum[:8]))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", nil, false
	}
	// The name is predictable in a shared directory: only a real
	// directory of this user's, closed to others, is taken.
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return "", nil, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return "", nil, false
	}
	lock := filepath.Join(dir, scratchLock)
	l, err := vfs.OS().Lock(lock, 0)
	if err != nil {
		return "", nil, false
	}
	now := time.Now()
	os.Chtimes(lock, now, now) // its use, for the sweep
	return dir, func() { l.Unlock() }, true
}

// readyTree makes the work tree in dir/tree hold exactly tip: the kept
// tree switched to tip, with what the last check left untracked removed,
// or, where that cannot be made clean (the check changed a tracked file),
// a fresh checkout.
func readyTree(sn *core.Snapshot, tip core.ID, dir string) (string, error) {
	tree := filepath.Join(dir, "tree")
	o := worktree.Options{NoIgnore: true, Force: true}
	if t, err := worktree.Open(tree, o); err == nil {
		clean := switchClean(t, sn, tip)
		t.Close()
		if clean {
			return tree, nil
		}
	}
	if err := os.RemoveAll(tree); err != nil {
		return "", err
	}
	_, err := worktree.Checkout(sn, tip, tree, worktree.Options{NoIgnore: true})
	return tree, err
}

// switchClean switches t to tip and removes the untracked paths; it
// reports whether t then holds exactly tip.
func switchClean(t *worktree.Tree, sn *core.Snapshot, tip core.ID) bool {
	if _, err := t.Switch(sn, tip); err != nil {
		return false
	}
	st, err := t.Status()
	if err != nil {
		return false
	}
	for _, c := range st.Changes {
		if c.Kind != worktree.Added {
			return false
		}
		if err := os.RemoveAll(filepath.Join(t.Dir(), filepath.FromSlash(c.Path))); err != nil {
			return false
		}
	}
	if len(st.Changes) == 0 {
		return true
	}
	st, err = t.Status()
	return err == nil && len(st.Changes) == 0 && len(st.Skipped) == 0
}
