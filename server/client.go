package server

import (
	"bufio"
	"encoding/json"
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
	c    *net.UnixConn
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
	b, err := json.Marshal(req)
	if err == nil {
		cl.wbuf, err = appendFrame(cl.wbuf[:0], fRequest, b)
	}
	if err != nil {
		return 0, false, err
	}
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
	for {
		t, p, err := readFrame(cl.br)
		if err != nil {
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
			var m exitMsg
			if err := decodeJSON(p, &m); err != nil {
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
