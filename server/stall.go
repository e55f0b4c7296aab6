package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrStalled is wrapped in ErrGone when a client stopped waiting for a
// server whose process was stopped (SIGSTOP, a debugger) for stallLimit:
// the kernel queues connections and requests for a stopped process, so
// nothing else would ever end the wait. Whether the request ran, or will
// once the process is continued, is not known.
var ErrStalled = errors.New("server: the server process is stopped")

// How often a client waiting for its answer looks at the server's
// process, and how long it waits for one that is stopped. A server that
// runs is waited for however long its command takes (a land's check).
var (
	stallCheck = time.Second
	stallLimit = 10 * time.Second
)

// processStopped reports whether the server of the store in dir is a
// stopped process, by the pid in its lock file. A pid it cannot read or
// look up (another pid namespace) counts as running.
var processStopped = func(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, LockName))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'T' || stat[i+2] == 't'
}

// stallWatch ends a client's wait for a server process that stays stopped:
// it shuts the connection down, which ends the blocked read.
type stallWatch struct {
	mu      sync.Mutex
	dir     string
	conn    *os.File
	t       *time.Timer
	stopped time.Duration
	done    bool
	stalled bool
}

// watchStall starts watching for the request just sent on conn.
func watchStall(dir string, conn *os.File) *stallWatch {
	w := &stallWatch{dir: dir, conn: conn}
	w.t = time.AfterFunc(stallCheck, w.check)
	return w
}

func (w *stallWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if processStopped(w.dir) {
		w.stopped += stallCheck
	} else {
		w.stopped = 0
	}
	if w.stopped < stallLimit {
		w.t.Reset(stallCheck)
		return
	}
	w.stalled = true
	if rc, err := w.conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

// end stops the watch and reports whether it gave up on the server.
func (w *stallWatch) end() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.t.Stop()
	return w.stalled
}
