// Package zblob compresses the inline blobs of a split journal frame's
// body: each blob on its own, as one zstd frame, kept only when it is
// smaller than the blob and at most MaxStored bytes (the index's object
// record holds a compressed blob's stored length in 16 bits; its size is
// the record's length, as for a loose object).
//
// One blob per frame keeps every read one ReadAt of the stored bytes and
// one decode of at most the blob's size. Go's src, 11,211 files of at most
// 64 KiB (61.8 MB): 21.8 MB at zstd's fastest level, 20.5 MB at its
// default, 20.1 MB at its better one (1.1, 1.8 and 3.0 s of CPU). The
// default level is used: the compression runs outside the writer lock,
// in the committing goroutine, and only for split frames (imports and
// other big commits), never for a one-file commit.
package zblob

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// MaxStored is the largest stored length of a compressed blob.
const MaxStored = 0xFFFF

// window is the encoder's window: a blob above it is still compressed,
// with matches at most this far back.
const window = 128 << 10

// encoder compresses blobs; EncodeAll is safe for concurrent use.
var encoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithWindowSize(window), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(fmt.Sprintf("zblob: zstd encoder with constant options: %v", err))
	}
	return e
})

// decoder decodes blobs; DecodeAll is safe for concurrent use and keeps
// its state between calls. It never writes past the capacity of the
// slice it is given (WithDecodeAllCapLimit), so damaged bytes cannot make
// it allocate more than the blob's size.
var decoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(true),
		zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxWindow(1<<20))
	if err != nil {
		panic(fmt.Sprintf("zblob: zstd decoder with constant options: %v", err))
	}
	return d
})

// Append appends the zstd frame of blob to dst and reports true when that
// pays: the frame is smaller than blob and at most MaxStored bytes.
// Otherwise it returns dst as it was, and false.
func Append(dst, blob []byte) ([]byte, bool) {
	if len(blob) < 2 {
		return dst, false
	}
	n := len(dst)
	out := encoder().EncodeAll(blob, dst)
	if z := len(out) - n; z >= len(blob) || z > MaxStored {
		return dst[:n], false
	}
	return out, true
}

// ErrDecode is a stored blob that does not decode to exactly its size.
var ErrDecode = errors.New("zblob: compressed blob does not decode to its size")

// Decode returns what z decodes to, which must be exactly size bytes.
func Decode(z []byte, size int64) ([]byte, error) {
	if size < 0 || size > 1<<31 || len(z) == 0 || len(z) > MaxStored {
		return nil, fmt.Errorf("%w: %d stored bytes for %d", ErrDecode, len(z), size)
	}
	out, err := decoder().DecodeAll(z, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrDecode, len(out), size)
	}
	return out, nil
}
