// Package b3 feeds BLAKE3 hashers on the calling goroutine.
//
// lukechampine.com/blake3's Hasher.Write hashes any write longer than one
// 1 KiB chunk on new goroutines, one per subtree. For the small inputs the
// store hashes on every commit and every replayed frame (payloads, trees,
// changesets of a few KiB) the goroutine start, wake-up and wait cost more
// than the hashing, and with 32 writer processes on two cores that overhead
// is CPU the writers do not have. Write splits such inputs into chunk-sized
// writes, which the hasher compresses inline; the digest is the same.
package b3

import (
	"sync"

	"lukechampine.com/blake3"
)

// chunk is BLAKE3's chunk size: writes up to it never start goroutines.
const chunk = 1024

// SerialMax is the largest input Write hashes on the calling goroutine.
// Above it the hasher's parallel path is kept: the vectorized compression
// of many chunks at once pays for the goroutines.
const SerialMax = 16 << 10

// Write adds p to h.
func Write(h *blake3.Hasher, p []byte) {
	if len(p) > SerialMax {
		h.Write(p)
		return
	}
	for len(p) > chunk {
		h.Write(p[:chunk])
		p = p[chunk:]
	}
	h.Write(p)
}

// hashers reuses unkeyed BLAKE3-256 hashers: a new one is a ~2 KiB
// allocation, which dominated the hashing of small objects.
var hashers = sync.Pool{New: func() any { return &Hasher{Hasher: blake3.New(32, nil)} }}

// Hasher is a pooled unkeyed BLAKE3-256 hasher with room for a digest and
// a tag byte: blake3's Sum and Write let their argument escape, so a digest
// taken into a local array, or a one-byte slice literal written, cost a heap
// allocation each, for every object hashed on every replayed frame.
type Hasher struct {
	*blake3.Hasher
	sum [32]byte
	tag [1]byte
}

// Get returns a reset hasher from the pool; give it back with Put.
func Get() *Hasher {
	h := hashers.Get().(*Hasher)
	h.Reset()
	return h
}

// Put returns a hasher Get gave out.
func Put(h *Hasher) { hashers.Put(h) }

// WriteByte adds one byte to h.
func (h *Hasher) WriteByte(b byte) error {
	h.tag[0] = b
	_, err := h.Hasher.Write(h.tag[:])
	return err
}

// Sum256 returns the digest of what h was fed.
func (h *Hasher) Sum256() [32]byte {
	h.Hasher.Sum(h.sum[:0])
	return h.sum
}

// Sum256 is blake3.Sum256, hashed by Write.
func Sum256(p []byte) [32]byte {
	h := Get()
	Write(h.Hasher, p)
	out := h.Sum256()
	Put(h)
	return out
}
