// Package wire reads the varint-framed bodies of the store's small
// metadata files (the checkpoint, the reflog's chunks) field by field.
//
// A Reader remembers its first failure instead of returning an error per
// field: a field that does not fit marks the Reader bad and reads as zero,
// so a decoder is written top to bottom, the file's layout in order, and
// checks Bad once at the end (and in its loop conditions, so a damaged
// count cannot make it loop long).
package wire

import "encoding/binary"

// maxJunk bounds the zeroed slice Take returns for a field that does not
// fit: a damaged length must not allocate much, and a fixed-size field (a
// 32-byte id, a 1-byte flag) must still have its length so that the
// decoder's conversions do not panic before it checks Bad.
const maxJunk = 64

// Reader reads fields from a body. Pos is the offset of the next field
// (after a failure, of the first field that did not parse); Bad is set by
// the first field that does not fit, or by the decoder when a field's
// value is invalid.
type Reader struct {
	body []byte
	Pos  int
	Bad  bool
}

// NewReader returns a Reader of body starting at offset pos.
func NewReader(body []byte, pos int) *Reader { return &Reader{body: body, Pos: pos} }

// Len is the body's length; a decoder bounds counts by it, since no
// count of non-empty items can exceed it.
func (r *Reader) Len() uint64 { return uint64(len(r.body)) }

// Uvarint reads an unsigned varint, or marks r bad and returns 0.
func (r *Reader) Uvarint() uint64 { return varint(r, binary.Uvarint) }

// Varint reads a signed (zigzag) varint, or marks r bad and returns 0.
func (r *Reader) Varint() int64 { return varint(r, binary.Varint) }

func varint[T uint64 | int64](r *Reader, dec func([]byte) (T, int)) T {
	v, n := dec(r.body[r.Pos:])
	if n <= 0 {
		r.Bad = true
		return 0
	}
	r.Pos += n
	return v
}

// Take returns the next n bytes (aliasing the body). If r is already bad
// or fewer than n bytes remain, it marks r bad and returns n%64 zero bytes.
func (r *Reader) Take(n uint64) []byte {
	if r.Bad || uint64(len(r.body)-r.Pos) < n {
		r.Bad = true
		return make([]byte, n%maxJunk)
	}
	s := r.body[r.Pos : r.Pos+int(n)]
	r.Pos += int(n)
	return s
}

// Done reports whether every field parsed and the body is used to its
// last byte.
func (r *Reader) Done() bool { return !r.Bad && r.Pos == len(r.body) }
