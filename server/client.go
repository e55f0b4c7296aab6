package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"time"
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

// Run sends req to the server of the store in dir, copies the command's
// output to stdout and stderr as it comes, feeds it stdin if it asks, and
// returns the command's exit status. Errors: ErrNoServer or a
// *RefusedError when nothing ran (NotRun), ErrGone when the server went
// away mid-request, ErrProtocol for a confused server.
func Run(dir string, req *Request, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c, err := dial(dir)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req.Version = Version
	if err := writeJSON(c, fRequest, req); err != nil {
		// A request that did not leave whole cannot have run. A server
		// that refused the connection at once (a peer of another user,
		// a server stopping) may have said why before it closed.
		if t, p, rerr := readFrame(c); rerr == nil && t == fError {
			var m errorMsg
			if decodeJSON(p, &m) == nil {
				return 0, &RefusedError{Code: m.Code, Message: m.Message}
			}
		}
		return 0, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	stdinSent := false
	for {
		t, p, err := readFrame(c)
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				return 0, err
			}
			return 0, fmt.Errorf("%w: %w", ErrGone, err)
		}
		switch t {
		case fStdout:
			stdout.Write(p)
		case fStderr:
			stderr.Write(p)
		case fStdinWant:
			if !stdinSent {
				stdinSent = true
				go sendStdin(c, stdin)
			}
		case fExit:
			var m exitMsg
			if err := decodeJSON(p, &m); err != nil {
				return 0, err
			}
			return m.Status, nil
		case fError:
			var m errorMsg
			if err := decodeJSON(p, &m); err != nil {
				return 0, err
			}
			return 0, &RefusedError{Code: m.Code, Message: m.Message}
		default:
			return 0, fmt.Errorf("%w: unexpected frame type %d from the server", ErrProtocol, t)
		}
	}
}

// dial connects to the store's socket.
func dial(dir string) (*net.UnixConn, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	var c net.Conn
	err = shortPath(abs, SocketName, func(p string) error {
		var err error
		c, err = net.DialTimeout("unix", p, dialTimeout)
		return err
	})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTDIR) {
			return nil, ErrNoServer
		}
		return nil, fmt.Errorf("%w: %w", ErrNoServer, err)
	}
	return c.(*net.UnixConn), nil
}

// sendStdin streams stdin to the server, then says it is exhausted. A
// write error means the connection is gone, which Run's reads report.
func sendStdin(c *net.UnixConn, stdin io.Reader) {
	buf := make([]byte, chunk)
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
