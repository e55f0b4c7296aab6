package journal

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// Classify decides what a scan that stopped at stop (expecting seq) means.
// durableSeq is the highest sequence number known durable from outside the
// log (checkpoint, published state). It returns a *CorruptError if
// acknowledged frames are missing, and otherwise nil: the bytes after stop are
// a torn tail. It reads the rest of the stop segment and every later segment
// once, looking for valid frames whose watermark covers seq.
func (r *Reader) Classify(stop Pos, seq, durableSeq uint64) error {
	if seq <= durableSeq {
		return &CorruptError{File: r.SegPath(stop.Seg), Offset: stop.Off,
			Reason: fmt.Sprintf("frame %d is missing or damaged inside the durable prefix (durable through %d)", seq, durableSeq)}
	}
	segs, err := r.Segments()
	if err != nil {
		return err
	}
	for _, n := range segs {
		if n < stop.Seg {
			continue
		}
		from := int64(FirstFrame)
		if n == stop.Seg {
			from = stop.Off
		}
		if w, at, ok, err := r.maxWatermark(n, from); err != nil {
			return err
		} else if ok && w >= seq {
			return &CorruptError{File: r.SegPath(stop.Seg), Offset: stop.Off,
				Reason: fmt.Sprintf("frame %d is missing or damaged, but a later frame at %s:%d proves it was durable", seq, SegName(n), at)}
		}
	}
	return nil
}

// zeroChunk is the zeros CutTail writes and compares against. It is never
// written: io.WriterAt implementations must not modify or retain the slice
// they are given.
var zeroChunk [64 << 10]byte

// scratch reuses the buffers of recovery's tail reads (maxWatermark and
// CutTail read the rest of the stop segment, usually most of a 256 KiB
// zero-filled window, in 64 KiB pieces). Every open after a power loss makes
// those reads, and allocating and zeroing fresh buffers for them was most of
// the allocation of such an open. Buffers above maxScratch are not kept, so
// a huge frame's payload does not stay pinned in the pool.
var scratch sync.Pool

const maxScratch = 4 << 20

// getScratch returns a buffer of length n, to be given back with putScratch
// once nothing refers to it. Its contents are undefined.
func getScratch(n int64) *[]byte {
	if bp, ok := scratch.Get().(*[]byte); ok {
		if int64(cap(*bp)) >= n {
			*bp = (*bp)[:n]
			return bp
		}
		scratch.Put(bp)
	}
	b := make([]byte, n)
	return &b
}

func putScratch(bp *[]byte) {
	if cap(*bp) <= maxScratch {
		scratch.Put(bp)
	}
}

// tailChunk is how much of a segment maxWatermark reads at a time. The rest
// of a segment is mostly the zeros of its last window (256 KiB); reading it
// in one piece cost several times more CPU per byte than reading it in
// cache-sized pieces (the crash sweep's profile), and it bounds the memory of
// the tail check, which used to read a whole segment at once.
const tailChunk = 64 << 10

// maxWatermark finds the highest watermark among checksum-valid frames at
// frame-aligned offsets of segment n from off on. It reads the segment in
// tailChunk pieces, plus one read for the payload of each frame that runs
// past its piece.
func (r *Reader) maxWatermark(n uint64, off int64) (max uint64, at int64, found bool, err error) {
	f, err := r.file(n)
	if err != nil {
		return 0, 0, false, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false, err
	}
	size := st.Size()
	if off >= size {
		return 0, 0, false, nil
	}
	bp := getScratch(tailChunk)
	defer putScratch(bp)
	win := *bp
	// win holds the segment's bytes [wOff, wEnd). Every piece starts at a
	// frame boundary and tailChunk is a multiple of FrameAlign, so a header
	// never straddles two pieces.
	wOff, wEnd := off, off
	for i := off; i+FrameHeaderSize <= size; i += FrameAlign {
		if i+FrameHeaderSize > wEnd {
			wOff, wEnd = i, min(i+tailChunk, size)
			if err := vfs.ReadFull(f, win[:wEnd-wOff], wOff); err != nil {
				return 0, 0, false, err
			}
		}
		b := win[i-wOff : wEnd-wOff]
		h, ok := parseHeader(b)
		if !ok {
			continue
		}
		end := i + h.size()
		if end > size {
			continue
		}
		// What the checksum covers: the payload, or a split frame's head
		// and the body digest it carries (the body is not needed).
		po := payloadOff(h.head)
		n := po + int64(h.length)
		if h.head > 0 {
			n = po + int64(h.head)
		}
		digest, err := r.coveredDigest(f, b, i, wEnd, h.head, po, n)
		if err != nil {
			return 0, 0, false, err
		}
		if frameSum(r.Key, b[:32], digest) != h.sum {
			continue
		}
		if !found || h.watermark > max {
			max, at, found = h.watermark, i, true
		}
	}
	return max, at, found, nil
}

// coveredDigest is what the checksum of the frame at offset i covers after
// its header (frames bytes [po, n), and a split frame's body digest at
// [FrameHeaderSize, po)): from b, the window's bytes from i up to wEnd, or
// read from f when they run past it.
func (r *Reader) coveredDigest(f afero.File, b []byte, i, wEnd int64, head int, po, n int64) ([32]byte, error) {
	if i+n > wEnd {
		pp := getScratch(n)
		defer putScratch(pp)
		if err := vfs.ReadFull(f, (*pp)[:n], i); err != nil {
			return [32]byte{}, err
		}
		b = *pp
	}
	if head > 0 {
		return splitSum(b[po:n], [32]byte(b[FrameHeaderSize:po])), nil
	}
	return PayloadDigest(b[FrameHeaderSize:n]), nil
}

// CutTail makes stop the end of the log: it zeroes segment stop.Seg from
// stop.Off to its end, removes every later segment, and makes both durable.
// It returns how many non-zero bytes it erased. Running it twice is harmless.
func (r *Reader) CutTail(stop Pos) (int64, error) {
	var cut int64
	p := r.SegPath(stop.Seg)
	f, err := r.FS.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	const chunk = int64(len(zeroChunk))
	bp := getScratch(chunk)
	defer putScratch(bp)
	buf, zero := *bp, zeroChunk[:]
	dirty := false
	for off := stop.Off; off < st.Size(); off += chunk {
		n := st.Size() - off
		if n > chunk {
			n = chunk
		}
		if err := vfs.ReadFull(f, buf[:n], off); err != nil {
			return cut, err
		}
		if !bytes.Equal(buf[:n], zero[:n]) {
			for _, c := range buf[:n] {
				if c != 0 {
					cut++
				}
			}
			if _, err := f.WriteAt(zero[:n], off); err != nil {
				return cut, err
			}
			dirty = true
		}
	}
	if dirty {
		if err := vfs.Datasync(f); err != nil {
			return cut, err
		}
	}
	segs, err := r.Segments()
	if err != nil {
		return cut, err
	}
	removed := false
	for _, n := range segs {
		if n > stop.Seg {
			if f, ok := r.files[n]; ok {
				f.Close()
				delete(r.files, n)
			}
			if st, err := r.FS.Stat(r.SegPath(n)); err == nil {
				cut += st.Size()
			}
			if err := r.FS.RemoveAll(r.SegPath(n)); err != nil {
				return cut, err
			}
			removed = true
		}
	}
	if removed && !r.SkipDirSync {
		if err := r.FS.SyncDir(r.Dir); err != nil {
			return cut, err
		}
	}
	return cut, nil
}
