package server

import (
	"bytes"
	"errors"
	"os"
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

// processStopped reports whether process pid, the server, is stopped.
// A pid it cannot look up counts as running.
var processStopped = func(pid int) bool {
	if pid <= 0 {
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
	return stat[i+2] == 'T'
}

// peerPID returns the pid of the process at the other end of conn, as
// this process's pid namespace sees it (SO_PEERCRED; 0 when it cannot
// see it), so that a server in another namespace is never taken for an
// unrelated local process.
func peerPID(conn *os.File) int {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// stallWatch ends a client's wait for a server process that stays stopped:
// it shuts the connection down, which ends the blocked read.
type stallWatch struct {
	mu      sync.Mutex
	pid     int // the server's, looked up at the first check (-1: not yet)
	conn    *os.File
	t       *time.Timer
	stopped time.Duration
	done    bool
	stalled bool
}

// watchStall starts watching for the request just sent on conn.
func watchStall(conn *os.File) *stallWatch {
	w := &stallWatch{pid: -1, conn: conn}
	w.t = time.AfterFunc(stallCheck, w.check)
	return w
}

func (w *stallWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if w.pid < 0 {
		w.pid = peerPID(w.conn)
	}
	if processStopped(w.pid) {
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
