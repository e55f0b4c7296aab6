package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/internal/testknobs"
)

// requestTimeout bounds how long a connected client may take to send its
// first request, so a connection that never says anything cannot hold a
// server goroutine forever. Between the requests of a version 2
// connection the client may idle as long as it likes; Stop ends it.
const requestTimeout = 10 * time.Second

// incoming is what a connection's reader hands its serving loop: a
// decoded request and the stdin pipe of its invocation, or why the
// request cannot run.
type incoming struct {
	req *Request
	pr  *io.PipeReader // nil when stdin came inline
	err error
}

// sconn is the server's side of one connection. One goroutine (readLoop)
// reads every frame the client sends: requests go to the serving loop
// (serveConn), stdin frames into the running invocation's pipe. Writes of
// the handler's streams and of the exit frame are serialized.
type sconn struct {
	c    *net.UnixConn
	br   *bufio.Reader
	reqs chan incoming
	// gone is closed when the reader ends: the client went away or broke
	// the protocol. done is closed when gone is or the server stops; an
	// invocation's Done.
	gone, done chan struct{}
	// busy is set by the reader when it hands over a request and cleared
	// by the serving loop before the exit frame goes out, so a request
	// that arrives while busy is a client's protocol error, never the
	// client's next request.
	busy atomic.Bool

	wmu    sync.Mutex
	werr   error
	wanted bool // the running invocation asked for stdin
	// hold says the running invocation's output waits in out until it
	// ends, asks for stdin or fills a chunk (Config.Stream).
	hold bool
	out  []byte
	// exitBuf holds the exit frame's payload, {"status":N} (decodeExit).
	exitBuf []byte
}

// refuse answers a connection with m and no more. The client's request
// is read and dropped before the close: closing a socket with unread
// bytes resets the connection, and the client, reading a reset rather than
// m, could not tell that its request did not run.
func refuse(c *net.UnixConn, m errorMsg) {
	writeJSON(c, fError, m)
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(c, MaxPayload+5))
}

// serveConn serves the requests of one connection: one for a version 1
// client, any number in sequence for a version 2 client.
func (s *Server) serveConn(c *net.UnixConn) {
	defer c.Close()
	if err := s.checkPeer(c); err != nil {
		s.logf("refused a connection: %v", err)
		refuse(c, errorMsg{Code: codePeer, Message: err.Error()})
		return
	}
	select {
	case <-s.stopping:
		refuse(c, errorMsg{Code: codeStopping, Message: "the server is stopping"})
		return
	default:
	}
	sc := &sconn{c: c, br: bufio.NewReader(c), reqs: make(chan incoming, 1),
		gone: make(chan struct{}), done: make(chan struct{})}
	go sc.readLoop()
	go func() {
		select {
		case <-sc.gone:
		case <-s.stopping:
		}
		close(sc.done)
	}()
	first := time.NewTimer(requestTimeout)
	defer first.Stop()
	firstC := first.C
	for {
		var in incoming
		select {
		case in = <-sc.reqs:
			firstC = nil
		case <-sc.gone:
			return
		case <-firstC:
			s.logf("reading a request: no request within %v", requestTimeout)
			return
		case <-s.stopping:
			// An idle connection: whatever the client sends next will not
			// run, and it learns so from this frame.
			sc.write(fError, mustJSON(errorMsg{Code: codeStopping, Message: "the server is stopping"}))
			return
		}
		if in.err != nil {
			code := codeProtocol
			if errors.Is(in.err, errVersion) {
				code = codeVersion
			}
			s.logf("refused a request: %v", in.err)
			sc.write(fError, mustJSON(errorMsg{Code: code, Message: in.err.Error()}))
			return
		}
		if !s.invoke(sc, in) || in.req.Version < 2 {
			return
		}
	}
}

// invoke runs one request's invocation and sends its exit frame; it
// reports whether the connection may carry another.
func (s *Server) invoke(sc *sconn, in incoming) bool {
	inv := &Invocation{Request: *in.req, Done: sc.done, Stopping: s.stopping,
		Stdout: &streamWriter{sc: sc, t: fStdout}, Stderr: &streamWriter{sc: sc, t: fStderr}}
	if in.pr != nil {
		inv.Stdin = &stdinReader{sc: sc, pr: in.pr}
	} else {
		inv.Stdin = bytes.NewReader(in.req.Stdin)
	}
	inv.Request.Stdin = nil
	var early *earlyReply
	if s.cfg.weaken&testknobs.ServerEarlyReply != 0 {
		early = &earlyReply{r: inv.Stdin, sc: sc}
		inv.Stdin = early
	}
	sc.wmu.Lock()
	sc.hold = s.cfg.Stream != nil && !s.cfg.Stream(in.req)
	sc.wmu.Unlock()
	status := s.cfg.Handler(inv)
	if in.pr != nil {
		// A handler that stopped reading stdin early leaves the reader
		// blocked in the pipe; closing the read side releases it.
		in.pr.Close()
	}
	sc.wmu.Lock()
	sc.wanted = false
	sc.wmu.Unlock()
	sc.busy.Store(false)
	if early != nil && early.sent {
		return false // the client was told already; the connection ends
	}
	sc.exitBuf = append(strconv.AppendInt(append(sc.exitBuf[:0], `{"status":`...), int64(status), 10), '}')
	return sc.write(fExit, sc.exitBuf) == nil
}

// readLoop reads the client's frames until the connection ends or the
// client breaks the protocol, then closes gone.
func (sc *sconn) readLoop() {
	defer close(sc.gone)
	var pw *io.PipeWriter // the running invocation's stdin, if piped
	defer func() {
		if pw != nil {
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	requests := 0
	v1 := false
	// Frames are read into one buffer: a request is decoded into copies,
	// and a stdin frame's bytes are consumed by the pipe's reader before
	// pw.Write returns.
	buf := make([]byte, 4<<10)
	for {
		t, p, err := readFrameInto(sc.br, buf)
		if err != nil {
			return
		}
		switch t {
		case fRequest:
			if v1 || sc.busy.Load() {
				if pw != nil {
					pw.CloseWithError(ErrProtocol)
					pw = nil
				}
				return
			}
			requests++
			req, err := decodeRequest(p)
			if err != nil {
				sc.reqs <- incoming{err: err}
				return
			}
			v1 = req.Version < 2
			if pw != nil {
				pw.Close()
				pw = nil
			}
			in := incoming{req: req}
			if !req.StdinInline {
				in.pr, pw = io.Pipe()
			}
			sc.busy.Store(true)
			sc.reqs <- in
		case fStdin, fStdinEOF:
			if requests == 0 {
				return // stdin before any request
			}
			if pw == nil {
				continue // stdin of an inline invocation, or after EOF
			}
			if t == fStdinEOF {
				pw.Close()
				pw = nil
				continue
			}
			// A handler that stopped reading makes this fail; the rest
			// of its stdin is dropped.
			pw.Write(p)
		default:
			return
		}
	}
}

// write sends one frame, or holds an output frame of an invocation whose
// output is held (hold); any other frame sends what is held with it, in
// one write. After the first failure every write fails with it, so a
// handler streaming to a client that went away stops soon.
func (sc *sconn) write(t frameType, p []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.werr != nil {
		return sc.werr
	}
	if sc.out, sc.werr = appendFrame(sc.out, t, p); sc.werr != nil {
		return sc.werr
	}
	if sc.hold && (t == fStdout || t == fStderr) && len(sc.out) < chunk {
		return nil
	}
	_, sc.werr = sc.c.Write(sc.out)
	if cap(sc.out) > 2*chunk {
		sc.out = nil // a large output's buffer is not kept for the next
	} else {
		sc.out = sc.out[:0]
	}
	return sc.werr
}

// stdinReader asks the client for its stdin on the first read.
type stdinReader struct {
	sc *sconn
	pr *io.PipeReader
}

func (r *stdinReader) Read(b []byte) (int, error) {
	r.sc.wmu.Lock()
	ask := !r.sc.wanted
	r.sc.wanted = true
	r.sc.wmu.Unlock()
	if ask {
		if err := r.sc.write(fStdinWant, nil); err != nil {
			return 0, err
		}
	}
	return r.pr.Read(b)
}

// streamWriter sends a handler's stdout or stderr in frames of at most
// chunk bytes.
type streamWriter struct {
	sc *sconn
	t  frameType
}

func (w *streamWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), chunk)
		if err := w.sc.write(w.t, b[:k]); err != nil {
			return n, err
		}
		n += k
		b = b[k:]
	}
	return n, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed message types are marshalled
	}
	return b
}

// earlyReply is the canary testknobs.ServerEarlyReply: a server that
// acknowledges a request once it has received it whole (its stdin read to
// the end) and runs it afterwards, as a queue that acknowledges on
// enqueue would. The client is told status 0 while the command, a commit
// say, has not yet returned, so its sync step has not run; a crash then
// loses what the client was told succeeded. Its reads are the handler's,
// on the invocation's goroutine.
type earlyReply struct {
	r    io.Reader
	sc   *sconn
	sent bool
}

func (e *earlyReply) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err == io.EOF && !e.sent {
		e.sent = true
		e.sc.write(fExit, []byte(`{"status":0}`))
	}
	return n, err
}
