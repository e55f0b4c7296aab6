package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoServer says no server runs for the store: there is no socket, or
// nobody listens on it (a server killed before it could remove it).
// Nothing was sent.
var ErrNoServer = errors.New("server: no server is running for this store")

// ErrGone says the server went away after the request was sent: the
// command may or may not have taken effect. It is retryable; a retried
// compare-and-swap either succeeds or reports the value that is there.
var ErrGone = errors.New("server: the server went away during the request")

// RefusedError is a server's refusal to run a request: nothing ran.
type RefusedError struct {
	Code    string // "version", "protocol", "peer", "stopping"
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("server refused the request (%s): %s", e.Code, e.Message)
}

// NotRun reports whether err from Run means the command did not run at
// all, so the caller may run it itself.
func NotRun(err error) bool {
	var re *RefusedError
	return errors.Is(err, ErrNoServer) || errors.As(err, &re)
}

// dialTimeout bounds a connect to a server whose accept queue is full.
const dialTimeout = 5 * time.Second

// Run sends req to the server of the store in dir on a connection of its
// own, copies the command's output to stdout and stderr as it comes,
// feeds it stdin if it asks, and returns the command's exit status.
// Errors: ErrNoServer or a *RefusedError when nothing ran (NotRun),
// ErrGone when the server went away mid-request, ErrProtocol for a
// confused server.
func Run(dir string, req *Request, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c, err := Dial(dir)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Run(req, stdin, stdout, stderr)
}

// Client is a connection to a store's server that carries any number of
// invocations, one after another (protocol version 2): a process that
// runs many commands pays for the connection once. A Client is not safe
// for concurrent use; use one a goroutine.
type Client struct {
	dir  string
	c    *os.File
	br   *bufio.Reader
	wbuf []byte
}

// Dial connects to the server of the store in dir; ErrNoServer when none
// answers.
func Dial(dir string) (*Client, error) {
	cl := &Client{dir: dir}
	if err := cl.connect(); err != nil {
		return nil, err
	}
	return cl, nil
}

func (cl *Client) connect() error {
	c, err := dial(cl.dir)
	if err != nil {
		return err
	}
	cl.c, cl.br = c, bufio.NewReaderSize(c, 16<<10)
	return nil
}

// Close closes the connection.
func (cl *Client) Close() error {
	if cl.c == nil {
		return nil
	}
	err := cl.c.Close()
	cl.c = nil
	return err
}

// Run runs one invocation as the package's Run does, on the client's
// connection, which it keeps for the next one when the invocation ended
// cleanly. After any error the connection is dropped and the next Run
// dials again, so a client outlives a server's restart: a request that
// finds no server, or one that is stopping, is NotRun.
func (cl *Client) Run(req *Request, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if cl.c == nil {
		if err := cl.connect(); err != nil {
			return 0, err
		}
	}
	status, keep, err := cl.run(req, stdin, stdout, stderr)
	if !keep || err != nil {
		cl.Close()
	}
	return status, err
}

// run is Run on an open connection; keep says the connection is fit for
// another request (no stdin is still being sent on it).
func (cl *Client) run(req *Request, stdin io.Reader, stdout, stderr io.Writer) (status int, keep bool, err error) {
	c := cl.c
	req.Version = Version
	// The frame's header goes in front once the payload's length is
	// known: the payload is encoded in place, after room for it.
	cl.wbuf = appendBinaryRequest(append(cl.wbuf[:0], 0, 0, 0, 0, byte(fRequest)), req)
	n := len(cl.wbuf) - 5
	if n > MaxPayload {
		return 0, false, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, n, MaxPayload)
	}
	binary.BigEndian.PutUint32(cl.wbuf, uint32(n))
	if _, err := c.Write(cl.wbuf); err != nil {
		// A request that did not leave whole cannot have run. A server
		// that refused the connection at once (a peer of another user,
		// a server stopping) may have said why before it closed.
		if t, p, rerr := readFrame(cl.br); rerr == nil && t == fError {
			var m errorMsg
			if decodeJSON(p, &m) == nil {
				return 0, false, &RefusedError{Code: m.Code, Message: m.Message}
			}
		}
		return 0, false, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	var sending chan struct{} // closed when sendStdin is done
	keep = true
	stall := watchStall(c)
	defer stall.end()
	for {
		t, p, err := readFrame(cl.br)
		if err != nil {
			if stall.end() {
				return 0, false, fmt.Errorf("%w: %w for %v", ErrGone, ErrStalled, stallLimit)
			}
			if errors.Is(err, ErrProtocol) {
				return 0, false, err
			}
			return 0, false, fmt.Errorf("%w: %w", ErrGone, err)
		}
		switch t {
		case fStdout:
			stdout.Write(p)
		case fStderr:
			stderr.Write(p)
		case fStdinWant:
			if req.StdinInline {
				return 0, false, fmt.Errorf("%w: the server asked for stdin that was sent inline", ErrProtocol)
			}
			if sending == nil {
				sending = make(chan struct{})
				go func() { sendStdin(c, stdin); close(sending) }()
			}
		case fExit:
			m, err := decodeExit(p)
			if err != nil {
				return 0, false, err
			}
			if sending != nil {
				select {
				case <-sending:
				default:
					// Still sending stdin the command did not read: its
					// frames would precede the next request.
					keep = false
				}
			}
			if stall.end() {
				keep = false // the watch shut the connection down as the answer came
			}
			return m.Status, keep, nil
		case fError:
			var m errorMsg
			if err := decodeJSON(p, &m); err != nil {
				return 0, false, err
			}
			return 0, false, &RefusedError{Code: m.Code, Message: m.Message}
		default:
			return 0, false, fmt.Errorf("%w: unexpected frame type %d from the server", ErrProtocol, t)
		}
	}
}

// dial connects to the store's socket. The socket stays in blocking mode,
// outside the runtime's network poller: a client waits for one answer at
// a time, and a read that blocks in the kernel costs it less CPU than a
// goroutine parked on the poller and woken through epoll (the writers'
// profiles in docs/performance.md, P3).
func dial(dir string) (*os.File, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	var c *os.File
	err = shortPath(abs, SocketName, func(p string) error {
		var err error
		c, err = connectBlocking(p)
		return err
	})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTDIR) {
			return nil, ErrNoServer
		}
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	return c, nil
}

// connectBlocking connects a blocking Unix stream socket to path. A
// connect to a server whose accept queue is full waits at most
// dialTimeout (the socket's send timeout bounds it).
func connectBlocking(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	tv := unix.NsecToTimeval(dialTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	for {
		// A connect that waits for room in the accept queue, interrupted
		// by a signal, is not restarted (signal(7)); it starts again.
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EISCONN {
		err = nil // an interrupted connect that completed meanwhile
	}
	if err != nil {
		unix.Close(fd)
		if err == unix.EAGAIN {
			err = fmt.Errorf("no room in the server's accept queue within %v: %w", dialTimeout, err)
		}
		return nil, &os.PathError{Op: "connect", Path: path, Err: err}
	}
	// A frame's write must never time out half-way: the timeout was for
	// the connect only.
	tv = unix.Timeval{}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// sendStdin streams stdin to the server, then says it is exhausted. A
// write error means the connection is gone, which Run's reads report.
func sendStdin(c io.Writer, stdin io.Reader) {
	buf := make([]byte, 32<<10)
	for stdin != nil {
		n, err := stdin.Read(buf)
		if n > 0 {
			if writeFrame(c, fStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	writeFrame(c, fStdinEOF, nil)
}

// Running reports whether a server answers for the store in dir.
func Running(dir string) bool {
	c, err := dial(dir)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
