package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// requestTimeout bounds how long a connected client may take to send its
// request, so an idle connection cannot hold a server goroutine forever.
const requestTimeout = 10 * time.Second

// serveConn runs one invocation on c.
func (s *Server) serveConn(c *net.UnixConn) {
	defer c.Close()
	if err := s.checkPeer(c); err != nil {
		s.logf("refused a connection: %v", err)
		writeJSON(c, fError, errorMsg{Code: codePeer, Message: err.Error()})
		return
	}
	select {
	case <-s.stopping:
		writeJSON(c, fError, errorMsg{Code: codeStopping, Message: "the server is stopping"})
		return
	default:
	}
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	t, p, err := readFrame(c)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.logf("reading a request: %v", err)
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	if t != fRequest {
		writeJSON(c, fError, errorMsg{Code: codeProtocol, Message: "the first frame is not a request"})
		return
	}
	req, err := decodeRequest(p)
	if err != nil {
		code := codeProtocol
		if errors.Is(err, errVersion) {
			code = codeVersion
		}
		s.logf("refused a request: %v", err)
		writeJSON(c, fError, errorMsg{Code: code, Message: err.Error()})
		return
	}
	cc := newConnIO(c)
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	go func() {
		cc.readLoop()
		finish()
	}()
	go func() {
		select {
		case <-s.stopping:
			finish()
		case <-done:
		}
	}()
	inv := &Invocation{Request: *req, Stdin: &stdinReader{cc: cc}, Done: done,
		Stdout: &streamWriter{cc: cc, t: fStdout}, Stderr: &streamWriter{cc: cc, t: fStderr}}
	status := s.cfg.Handler(inv)
	// A handler that stopped reading stdin early leaves readLoop blocked
	// in the pipe; closing the read side releases it.
	cc.pr.Close()
	cc.write(fExit, mustJSON(exitMsg{Status: status}))
	finish()
}

// connIO is the server's side of one connection once a request runs:
// writes of the handler's streams are serialized, and the client's stdin
// arrives through a pipe fed by readLoop.
type connIO struct {
	c      *net.UnixConn
	wmu    sync.Mutex
	werr   error
	pr     *io.PipeReader
	pw     *io.PipeWriter
	wanted sync.Once
}

func newConnIO(c *net.UnixConn) *connIO {
	pr, pw := io.Pipe()
	return &connIO{c: c, pr: pr, pw: pw}
}

// write sends one frame; after the first failure every write fails with
// it, so a handler streaming to a client that went away stops soon.
func (cc *connIO) write(t frameType, p []byte) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	if cc.werr != nil {
		return cc.werr
	}
	cc.werr = writeFrame(cc.c, t, p)
	return cc.werr
}

// readLoop feeds the client's stdin frames into the pipe until the client
// says it is exhausted, and then watches for the connection's end: any
// frame other than stdin, or a read error, ends the loop.
func (cc *connIO) readLoop() {
	for {
		t, p, err := readFrame(cc.c)
		if err != nil {
			cc.pw.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		switch t {
		case fStdin:
			if _, err := cc.pw.Write(p); err != nil {
				// The handler stopped reading; drop the rest.
				continue
			}
		case fStdinEOF:
			cc.pw.Close()
		default:
			cc.pw.CloseWithError(ErrProtocol)
			return
		}
	}
}

// stdinReader asks the client for its stdin on the first read.
type stdinReader struct{ cc *connIO }

func (r *stdinReader) Read(b []byte) (int, error) {
	var err error
	r.cc.wanted.Do(func() { err = r.cc.write(fStdinWant, nil) })
	if err != nil {
		return 0, err
	}
	return r.cc.pr.Read(b)
}

// streamWriter sends a handler's stdout or stderr in frames of at most
// chunk bytes.
type streamWriter struct {
	cc *connIO
	t  frameType
}

func (w *streamWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		k := min(len(b), chunk)
		if err := w.cc.write(w.t, b[:k]); err != nil {
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
