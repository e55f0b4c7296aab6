package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Version is the protocol version this package's clients speak. The
// server speaks every version from MinVersion to Version (doc.go,
// Versions).
const Version = 3

// MinVersion is the oldest protocol version the server still serves.
const MinVersion = 1

// MaxPayload bounds one frame's payload. Streams are cut into frames of at
// most this size; a request (arguments, working directory, environment)
// must fit in one.
const MaxPayload = 4 << 20

// chunk is the largest stream payload a writer puts in one frame.
const chunk = 256 << 10

// frameType says what a frame carries.
type frameType uint8

const (
	fRequest   frameType = 1 // client: JSON Request
	fStdout    frameType = 2 // server: bytes for the client's stdout
	fStderr    frameType = 3 // server: bytes for the client's stderr
	fStdinWant frameType = 4 // server: the command reads stdin; send it
	fStdin     frameType = 5 // client: bytes of its stdin
	fStdinEOF  frameType = 6 // client: its stdin is exhausted
	fExit      frameType = 7 // server: JSON exitMsg; the invocation is over
	fError     frameType = 8 // server: JSON errorMsg; nothing was run
)

func (t frameType) valid() bool { return t >= fRequest && t <= fError }

// ErrProtocol is a malformed frame or message: an unknown frame type, a
// length over MaxPayload, a payload that does not decode, a frame out of
// order. The connection is closed; nothing is retried on it.
var ErrProtocol = errors.New("server: protocol error")

// Request is one CLI invocation as the client sends it.
type Request struct {
	Version int               `json:"v"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env,omitempty"`
	// StdoutTTY and StderrTTY say whether the client's streams are
	// terminals, which decides human text colouring and progress bars.
	StdoutTTY bool `json:"stdout_tty,omitempty"`
	StderrTTY bool `json:"stderr_tty,omitempty"`
	// StdinInline (version 2) says Stdin is the command's whole stdin:
	// the server never asks for more, which saves a round trip when the
	// client has its input in hand (a change list in memory).
	StdinInline bool   `json:"stdin_inline,omitempty"`
	Stdin       []byte `json:"stdin,omitempty"`
}

// validate checks what the decoder cannot: a request must name an absolute
// working directory and carry only valid UTF-8 without NUL bytes, which no
// command line can hold.
func (r *Request) validate() error {
	if r.Version < MinVersion || r.Version > Version {
		return fmt.Errorf("%w: protocol version %d, server speaks %d to %d", errVersion, r.Version, MinVersion, Version)
	}
	if (r.StdinInline || len(r.Stdin) > 0) && r.Version < 2 {
		return fmt.Errorf("%w: inline stdin needs protocol version 2", ErrProtocol)
	}
	if len(r.Stdin) > 0 && !r.StdinInline {
		return fmt.Errorf("%w: stdin bytes without stdin_inline", ErrProtocol)
	}
	if len(r.Cwd) == 0 || r.Cwd[0] != '/' {
		return fmt.Errorf("%w: working directory %q is not absolute", ErrProtocol, r.Cwd)
	}
	check := func(what, s string) error {
		if !utf8.ValidString(s) || bytes.IndexByte([]byte(s), 0) >= 0 {
			return fmt.Errorf("%w: %s holds a NUL byte or invalid UTF-8", ErrProtocol, what)
		}
		return nil
	}
	if err := check("working directory", r.Cwd); err != nil {
		return err
	}
	for i, a := range r.Args {
		if err := check(fmt.Sprintf("argument %d", i), a); err != nil {
			return err
		}
	}
	for k, v := range r.Env {
		if err := check("environment variable "+k, k+v); err != nil {
			return err
		}
	}
	return nil
}

// errVersion is a request in a version this server does not speak.
var errVersion = errors.New("server: unsupported protocol version")

// exitMsg ends an invocation that ran.
type exitMsg struct {
	Status int `json:"status"`
}

// errorMsg ends an invocation that did not run.
type errorMsg struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Codes of error frames.
const (
	codeVersion  = "version"  // the request's version is not spoken
	codeProtocol = "protocol" // the request was malformed
	codePeer     = "peer"     // the peer is another user
	codeStopping = "stopping" // the server is shutting down
)

// writeFrame writes one frame. The header and payload go out in one write,
// so concurrent writers serialized by the caller never interleave a frame.
func writeFrame(w io.Writer, t frameType, payload []byte) error {
	b, err := appendFrame(make([]byte, 0, 5+len(payload)), t, payload)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// appendFrame appends one frame to dst.
func appendFrame(dst []byte, t frameType, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayload {
		return dst, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, len(payload), MaxPayload)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, byte(t))
	return append(dst, payload...), nil
}

// writeJSON writes a frame whose payload is v encoded as JSON.
func writeJSON(w io.Writer, t frameType, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, t, b)
}

// readFrame reads one frame. A length over MaxPayload or an unknown type is
// ErrProtocol, found before the payload is allocated; a connection that ends
// between frames is io.EOF, and one that ends inside a frame
// io.ErrUnexpectedEOF.
func readFrame(r io.Reader) (frameType, []byte, error) {
	return readFrameInto(r, nil)
}

// readFrameInto is readFrame reading the payload into buf when it fits
// (the payload is then buf's prefix, valid until buf is used again).
func readFrameInto(r io.Reader, buf []byte) (frameType, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	t := frameType(h[4])
	if !t.valid() {
		return 0, nil, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h[4])
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, n, MaxPayload)
	}
	var p []byte
	if int(n) <= cap(buf) {
		p = buf[:n]
	} else {
		p = make([]byte, n)
	}
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return t, p, nil
}

// decodeJSON decodes a frame's JSON payload strictly: unknown fields and
// trailing data are protocol errors, so a confused peer is found at once.
func decodeJSON(p []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(p))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if d.More() {
		return fmt.Errorf("%w: trailing data after the message", ErrProtocol)
	}
	return nil
}

// decodeRequest decodes and validates a request frame's payload, binary
// (version 3, binreq.go) or JSON (any version). The request does not keep
// p.
func decodeRequest(p []byte) (*Request, error) {
	var r *Request
	if len(p) > 0 && p[0] == binaryTag {
		var err error
		if r, err = decodeBinaryRequest(p); err != nil {
			return nil, err
		}
	} else {
		r = new(Request)
		if err := decodeJSON(p, r); err != nil {
			return nil, err
		}
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeExit decodes an exit frame's payload. The server writes it as
// {"status":N}, which is parsed without the JSON decoder; anything else
// goes through decodeJSON and is held to the same rules.
func decodeExit(p []byte) (exitMsg, error) {
	const pre = `{"status":`
	if d, ok := bytes.CutPrefix(p, []byte(pre)); ok && len(d) > 1 && len(d) <= 11 && d[len(d)-1] == '}' {
		d = d[:len(d)-1]
		neg := d[0] == '-'
		if neg {
			d = d[1:]
		}
		n, ok := 0, len(d) > 0 && len(d) <= 9 && (d[0] != '0' || len(d) == 1)
		for _, c := range d {
			ok = ok && c >= '0' && c <= '9'
			n = n*10 + int(c-'0')
		}
		if ok && !(neg && n == 0) {
			if neg {
				n = -n
			}
			return exitMsg{Status: n}, nil
		}
	}
	var m exitMsg
	err := decodeJSON(p, &m)
	return m, err
}
