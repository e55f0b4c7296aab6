package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// parseErrorLine is the JSON-RPC answer to a line that is not JSON: the
// request cannot be identified, so its id is null (JSON-RPC 2.0, 5.1).
var parseErrorLine = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not a JSON value"}}` + "\n")

// drainLimit bounds how long the end of a client's input waits for the
// answers to the requests it sent (a land with a check can take minutes).
var drainLimit = 10 * time.Minute

// mcpLines is the stdio transport's input with every line that is not a
// JSON value answered by a parse error and left out. MCP's stdio messages
// are one a line; the SDK decodes them as one stream of JSON values, which
// a single malformed line would end, and the session with it, before the
// requests ahead of it were answered. The input's end, too, waits until
// every request read has its answer (out counts them): the session ends
// at it, and a client that wrote its requests and closed its end (a
// script's pipe) would otherwise get none.
type mcpLines struct {
	in   *bufio.Reader
	out  *syncWriter
	line []byte // what is left of the line being read out
	err  error  // the input's error, returned once line is read out
}

func newMCPLines(in io.Reader, out *syncWriter) *mcpLines {
	return &mcpLines{in: bufio.NewReaderSize(in, 64<<10), out: out}
}

func (l *mcpLines) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		if l.err != nil {
			l.out.drain(drainLimit)
			return 0, l.err
		}
		line, err := l.in.ReadBytes('\n')
		l.err = err
		t := bytes.TrimSpace(line)
		if len(t) > 0 && !json.Valid(t) {
			if _, werr := l.out.Write(parseErrorLine); werr != nil {
				return 0, werr
			}
			continue
		}
		l.out.asked(requests(t))
		l.line = line
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

// rpcMessage is what tells a JSON-RPC request (method and id), a
// response (id, no method) and a cancellation apart.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// messages returns the messages of a line: one, or a batch's.
func messages(line []byte) []rpcMessage {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		var ms []rpcMessage
		json.Unmarshal(line, &ms)
		return ms
	}
	var m rpcMessage
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return []rpcMessage{m}
}

// requests counts the requests of a line that expect an answer, less the
// cancellations it carries (a cancelled request may get none).
func requests(line []byte) int {
	n := 0
	for _, m := range messages(line) {
		switch {
		case m.Method == "notifications/cancelled":
			n--
		case m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null":
			n++
		}
	}
	return n
}

// responses counts the answers in a message the server writes.
func responses(msg []byte) int {
	n := 0
	for _, m := range messages(msg) {
		if m.Method == "" && len(m.ID) > 0 && string(m.ID) != "null" {
			n++
		}
	}
	return n
}

// syncWriter serializes writes: the SDK writes each message in one call,
// and mcpLines writes its parse errors between them, never inside one. It
// counts the requests read that have no answer yet.
type syncWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending int
	changed *sync.Cond
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := responses(p); n > 0 {
		s.pending = max(0, s.pending-n)
		s.cond().Broadcast()
	}
	return s.w.Write(p)
}

func (s *syncWriter) Close() error { return nil }

// asked counts n requests read (fewer when n is negative: cancelled).
func (s *syncWriter) asked(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.pending = max(0, s.pending+n)
	s.cond().Broadcast()
	s.mu.Unlock()
}

// drain waits until every request read has its answer, or limit passes.
func (s *syncWriter) drain(limit time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cond()
	t := time.AfterFunc(limit, func() {
		s.mu.Lock()
		s.pending = 0
		c.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	for s.pending > 0 {
		c.Wait()
	}
}

// cond returns s's condition variable. Caller holds s.mu.
func (s *syncWriter) cond() *sync.Cond {
	if s.changed == nil {
		s.changed = sync.NewCond(&s.mu)
	}
	return s.changed
}
