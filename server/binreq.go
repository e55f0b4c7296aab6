package server

import (
	"encoding/binary"
	"fmt"
)

// The binary request encoding (protocol version 3). A request payload
// whose first byte is binaryTag is binary; a JSON request starts with '{'
// or white space, so the two never collide and a server tells them apart
// by that byte alone.
//
//	tag u8 (= 3) | flags u8 | cwd str | argc uvarint | argc × str |
//	envc uvarint | envc × (key str, value str) | stdin str
//
// A str is a uvarint length and that many bytes. Flags: bit 0 StdoutTTY,
// bit 1 StderrTTY, bit 2 StdinInline; the other bits are zero. Nothing
// follows stdin. The request's version is 3. Decoding needs no reflection
// and allocates the strings and the stdin bytes only; a count larger than
// the bytes left could hold is refused before anything is allocated.
const binaryTag = 3

const (
	flagStdoutTTY   = 1 << 0
	flagStderrTTY   = 1 << 1
	flagStdinInline = 1 << 2
	flagsKnown      = flagStdoutTTY | flagStderrTTY | flagStdinInline
)

// appendBinaryRequest appends r's binary encoding to dst; r.Version is
// not encoded (it is 3).
func appendBinaryRequest(dst []byte, r *Request) []byte {
	var flags byte
	if r.StdoutTTY {
		flags |= flagStdoutTTY
	}
	if r.StderrTTY {
		flags |= flagStderrTTY
	}
	if r.StdinInline {
		flags |= flagStdinInline
	}
	dst = append(dst, binaryTag, flags)
	dst = appendStr(dst, r.Cwd)
	dst = binary.AppendUvarint(dst, uint64(len(r.Args)))
	for _, a := range r.Args {
		dst = appendStr(dst, a)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Env)))
	for k, v := range r.Env {
		dst = appendStr(appendStr(dst, k), v)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Stdin)))
	return append(dst, r.Stdin...)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// binReader consumes a binary request; the first error sticks.
type binReader struct {
	p   []byte
	err error
}

func (b *binReader) fail(what string) {
	if b.err == nil {
		b.err = fmt.Errorf("%w: binary request: %s", ErrProtocol, what)
	}
}

// count reads a uvarint that counts items of at least min bytes each.
func (b *binReader) count(what string, min int) int {
	if b.err != nil {
		return 0
	}
	n, k := binary.Uvarint(b.p)
	if k <= 0 {
		b.fail(what + ": malformed length")
		return 0
	}
	b.p = b.p[k:]
	if n > uint64(len(b.p)/min) {
		b.fail(fmt.Sprintf("%s: %d exceeds the %d bytes left", what, n, len(b.p)))
		return 0
	}
	return int(n)
}

func (b *binReader) bytes(what string) []byte {
	n := b.count(what, 1)
	if b.err != nil {
		return nil
	}
	s := b.p[:n:n]
	b.p = b.p[n:]
	return s
}

func (b *binReader) str(what string) string { return string(b.bytes(what)) }

// decodeBinaryRequest decodes a binary request payload (p[0] is
// binaryTag). The request does not keep p.
func decodeBinaryRequest(p []byte) (*Request, error) {
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: binary request of %d bytes", ErrProtocol, len(p))
	}
	flags := p[1]
	if flags&^flagsKnown != 0 {
		return nil, fmt.Errorf("%w: binary request: unknown flags %#x", ErrProtocol, flags)
	}
	r := &Request{Version: binaryTag, StdoutTTY: flags&flagStdoutTTY != 0,
		StderrTTY: flags&flagStderrTTY != 0, StdinInline: flags&flagStdinInline != 0}
	b := &binReader{p: p[2:]}
	r.Cwd = b.str("working directory")
	if n := b.count("argument count", 1); n > 0 {
		r.Args = make([]string, n)
		for i := range r.Args {
			r.Args[i] = b.str("argument")
		}
	}
	if n := b.count("environment count", 2); n > 0 {
		r.Env = make(map[string]string, n)
		for range n {
			k := b.str("environment name")
			r.Env[k] = b.str("environment value")
		}
	}
	if stdin := b.bytes("stdin"); len(stdin) > 0 {
		r.Stdin = append([]byte(nil), stdin...)
	}
	if b.err == nil && len(b.p) > 0 {
		b.fail(fmt.Sprintf("%d bytes after stdin", len(b.p)))
	}
	if b.err != nil {
		return nil, b.err
	}
	return r, nil
}
