package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/swarmops/swarmops/internal/testknobs"
)

// File names in the store directory.
const (
	SocketName = "serve.sock"
	LockName   = "serve.lock"
)

// ErrRunning is returned by Start when another server holds the store.
var ErrRunning = errors.New("server: a server is already running for this store")

// Invocation is one request as a Handler sees it.
type Invocation struct {
	Request
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Done is closed when the client goes away or the server stops; a
	// command that runs until told (watch) returns then.
	Done <-chan struct{}
	// Stopping is closed when the server stops: a command that Done
	// ended can tell its client that the server went, not that it is
	// finished.
	Stopping <-chan struct{}
}

// Handler runs one invocation and returns its exit status. It is called
// concurrently, once a connection.
type Handler func(inv *Invocation) int

// Config configures a server.
type Config struct {
	Dir     string  // the store directory, where the socket and lock live
	Handler Handler // runs each invocation
	// Logf, if not nil, receives one line per refused connection or
	// protocol error. The server never logs request contents.
	Logf func(format string, args ...any)
	// Stream, if not nil, says whether a request's output must reach the
	// client as it is written (a stream, a progress bar on a terminal).
	// Other requests' output is held until the invocation ends (or fills
	// a frame), so a short command's output and exit status reach the
	// client in one write. Nil streams every request's output.
	Stream func(*Request) bool
	// PeerUID is the uid a peer must have; nil means the server's own
	// (os.Getuid). Tests set it to check the refusal.
	PeerUID *uint32
	// WatchEvery is how often the server checks that its socket and lock
	// still stand at their paths (0: every second). One removed or
	// replaced (the socket deleted by hand, the store directory moved
	// away) leaves the server unreachable or serving another directory's
	// path: it stops, and Wait returns ErrLost.
	WatchEvery time.Duration

	// weaken holds the test-only canaries of the server
	// (internal/testknobs.ServerCanaries), set only through
	// testknobs.Weaken; the zero value is the correct server.
	weaken testknobs.Weakening
}

func init() {
	testknobs.RegisterOptions(func(c *Config) *testknobs.Weakening { return &c.weaken })
}

// Server is a running server.
type Server struct {
	cfg      Config
	lock     *os.File
	ln       *net.UnixListener
	sock     string
	stopping chan struct{}
	stopOnce sync.Once
	conns    sync.WaitGroup
	done     chan struct{}
	acceptEr error
	sockInfo os.FileInfo // what bindSocket left at sock
	lost     atomic.Bool // the watch found the socket or lock gone
	// ending serializes the watch's closing of the listener with Stop:
	// once Stop has begun, the watch leaves the listener to it (its
	// drain tells queued clients the server stops; a close would reset
	// them).
	ending sync.Mutex
}

// ErrLost is Wait's answer when the server stopped because its socket or
// lock no longer stood at its path.
var ErrLost = errors.New("server: its socket or lock was removed or replaced, or the store directory moved")

// Start takes the store's server lock, binds the socket and starts
// serving. It fails with ErrRunning (naming the pid) when another server
// holds the lock.
func Start(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("server: no handler")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	lock, err := takeLock(filepath.Join(dir, LockName))
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, lock: lock, sock: filepath.Join(dir, SocketName),
		stopping: make(chan struct{}), done: make(chan struct{})}
	if s.ln, err = bindSocket(dir); err != nil {
		lock.Close()
		return nil, err
	}
	if s.sockInfo, err = os.Stat(s.sock); err != nil {
		s.ln.Close()
		lock.Close()
		return nil, fmt.Errorf("server socket: %w", err)
	}
	go s.acceptLoop()
	go s.watch()
	return s, nil
}

// watch checks, until the server stops, that the socket and the lock
// still stand at their paths; when one does not, it ends the accept loop
// (Wait returns ErrLost) for the owner to Stop the server.
func (s *Server) watch() {
	every := s.cfg.WatchEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case <-t.C:
		}
		if s.ownsSocket() && sameFile(s.lock, filepath.Join(s.cfg.Dir, LockName)) {
			continue
		}
		s.ending.Lock()
		select {
		case <-s.stopping:
		default:
			s.logf("the socket or lock at %s was removed or replaced, or the directory moved: stopping", s.cfg.Dir)
			s.lost.Store(true)
			s.ln.Close()
		}
		s.ending.Unlock()
		return
	}
}

// ownsSocket reports whether the socket path still names the socket this
// server bound.
func (s *Server) ownsSocket() bool {
	fi, err := os.Stat(s.sock)
	return err == nil && os.SameFile(fi, s.sockInfo)
}

// takeLock flocks path for the life of the server and records its pid in
// it. The kernel releases the lock when the process dies, however it dies,
// so a killed server never blocks the next one. A clean stop removes the
// file, so a server that locked it checks it still names the file it
// opened: one that lost that race to a stopping server locks a new one.
func takeLock(path string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("server lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			defer f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (pid %s)", ErrRunning, lockPID(f))
			}
			return nil, fmt.Errorf("server lock: %w", err)
		}
		if sameFile(f, path) {
			if err := f.Truncate(0); err == nil {
				f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return f, nil
		}
		f.Close()
		if attempt == 10 {
			return nil, fmt.Errorf("server lock: %s keeps being replaced", path)
		}
	}
}

// lockPID reads the pid a running server wrote into its lock file.
func lockPID(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// sameFile reports whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// bindSocket binds the socket under a temporary name, restricts it to its
// owner and renames it over serve.sock, replacing a stale one: the socket
// is never reachable at its final name with wider permissions, and the
// rename is atomic for clients that race it. The caller holds the lock, so
// whatever sits at serve.sock belongs to a dead server.
func bindSocket(dir string) (*net.UnixListener, error) {
	tmp := fmt.Sprintf("%s.%d.tmp", SocketName, os.Getpid())
	os.Remove(filepath.Join(dir, tmp))
	var ln *net.UnixListener
	err := shortPath(dir, tmp, func(p string) error {
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	full := filepath.Join(dir, tmp)
	if err := os.Chmod(full, 0o600); err != nil {
		ln.Close()
		os.Remove(full)
		return nil, fmt.Errorf("server socket: %w", err)
	}
	if err := os.Rename(full, filepath.Join(dir, SocketName)); err != nil {
		ln.Close()
		os.Remove(full)
		return nil, fmt.Errorf("server socket: %w", err)
	}
	return ln, nil
}

// shortPath calls f with a name for dir/name that fits a socket address
// (108 bytes on Linux): the path itself when short enough, else the same
// file reached through /proc/self/fd and a descriptor of dir, which binds
// and connects to the same inode.
func shortPath(dir, name string, f func(string) error) error {
	p := filepath.Join(dir, name)
	if len(p) < 100 {
		return f(p)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// Socket returns the path clients connect to.
func (s *Server) Socket() string { return s.sock }

func (s *Server) acceptLoop() {
	defer close(s.done)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.stopping:
			default:
				s.acceptEr = err
			}
			return
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			s.serveConn(c)
		}()
	}
}

// drainWait is how long a stopping server goes on accepting once its
// socket's name is gone, for a client whose connect was under way then;
// what is queued after it drainQueue takes.
const drainWait = 20 * time.Millisecond

// Stop removes the socket, tells the connections queued on it and every
// idle one that the server is stopping, tells running invocations to
// finish (Done), waits for them at most grace, then releases the lock.
// The socket goes before the lock, so a client never finds a socket whose
// server is gone while the lock is free to be taken by a new one.
func (s *Server) Stop(grace time.Duration) error {
	s.ending.Lock()
	s.stopOnce.Do(func() { close(s.stopping) })
	s.ending.Unlock()
	// No client connects once the socket's name is gone. One that
	// connected already but was not accepted yet would be reset by the
	// listener's close, and could not tell whether its request ran: the
	// accept loop takes those for drainWait, drainQueue what is left, and
	// each is told the server is stopping, so it runs its request itself.
	// A path that names something else now (the directory moved away
	// and another store's server took the old path) is left alone.
	var rmErr error
	if s.ownsSocket() {
		rmErr = os.Remove(s.sock)
	}
	s.ln.SetDeadline(time.Now().Add(drainWait))
	<-s.done
	s.drainQueue()
	s.ln.Close()
	waited := make(chan struct{})
	go func() { s.conns.Wait(); close(waited) }()
	var err error
	select {
	case <-waited:
	case <-time.After(grace):
		err = fmt.Errorf("server: invocations still running after %v", grace)
	}
	if rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
		err = rmErr
	}
	// The lock file goes last, while still locked: a server that opened
	// it meanwhile finds it unlinked once it gets the lock (takeLock).
	if lp := filepath.Join(s.cfg.Dir, LockName); sameFile(s.lock, lp) {
		os.Remove(lp)
	}
	s.lock.Close()
	return err
}

// drainQueue takes, without waiting, every connection still queued on the
// listener and tells each the server is stopping. The accept loop may have
// left some: a deadline that passed before the loop ran again fails
// Accept without looking at the queue.
func (s *Server) drainQueue() {
	rc, err := s.ln.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		for {
			// The listener's descriptor is non-blocking: EAGAIN, the
			// queue is empty, ends the loop.
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
			if err != nil {
				return
			}
			f := os.NewFile(uintptr(nfd), "")
			c, err := net.FileConn(f)
			f.Close()
			uc, ok := c.(*net.UnixConn)
			if err != nil || !ok {
				continue
			}
			s.conns.Add(1)
			go func() {
				defer s.conns.Done()
				defer uc.Close()
				refuse(uc, errorMsg{Code: codeStopping, Message: "the server is stopping"})
			}()
		}
	})
}

// Wait blocks until the server stops accepting, and returns the accept
// error that stopped it, if it was not Stop.
func (s *Server) Wait() error {
	<-s.done
	if s.lost.Load() {
		return ErrLost
	}
	return s.acceptEr
}

// checkPeer refuses a connection from another user. Permissions on the
// socket already keep other users out; this holds even if the store
// directory or socket were made wider by hand.
func (s *Server) checkPeer(c *net.UnixConn) error {
	want := uint32(os.Getuid())
	if s.cfg.PeerUID != nil {
		want = *s.cfg.PeerUID
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != want {
		return fmt.Errorf("peer uid %d is not the server's user (%d)", cred.Uid, want)
	}
	return nil
}
