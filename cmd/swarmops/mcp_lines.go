package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// parseErrorLine is the JSON-RPC answer to a line that is not JSON: the
// request cannot be identified, so its id is null (JSON-RPC 2.0, 5.1).
var parseErrorLine = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not a JSON value"}}` + "\n")

// mcpLines is the stdio transport's input with every line that is not a
// JSON value answered by a parse error and left out. MCP's stdio messages
// are one a line; the SDK decodes them as one stream of JSON values, which
// a single malformed line would end, and the session with it, before the
// requests ahead of it were answered.
type mcpLines struct {
	in   *bufio.Reader
	out  io.Writer // shared with the SDK's writes (syncWriter)
	line []byte    // what is left of the line being read out
	err  error     // the input's error, returned once line is read out
}

func newMCPLines(in io.Reader, out io.Writer) *mcpLines {
	return &mcpLines{in: bufio.NewReaderSize(in, 64<<10), out: out}
}

func (l *mcpLines) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, err := l.in.ReadBytes('\n')
		l.err = err
		if t := bytes.TrimSpace(line); len(t) > 0 && !json.Valid(t) {
			if _, werr := l.out.Write(parseErrorLine); werr != nil {
				return 0, werr
			}
			continue
		}
		l.line = line
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

// syncWriter serializes writes: the SDK writes each message in one call,
// and mcpLines writes its parse errors between them, never inside one.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) Close() error { return nil }
