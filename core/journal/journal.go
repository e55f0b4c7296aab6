package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/afero"
	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/vfs"
)

// Format constants. They are part of the on-disk format.
const (
	SegHeaderSize   = 64
	FrameHeaderSize = 48
	// FrameAlign is the alignment of every frame start and size: one disk
	// sector. An append then never rewrites a sector that holds an earlier,
	// possibly durable, frame, so a write torn by a power loss (which may
	// zero or garble every sector it touched) can only damage frames that
	// were never acknowledged.
	FrameAlign = 512
	// FirstFrame is the offset of the first frame of a segment: the header
	// has a sector of its own for the same reason.
	FirstFrame = FrameAlign
	frameMagic = 0x31465753 // "SWF1" little endian
	segVersion = 1
	// MaxPayload bounds a frame's payload so a corrupt length can never make
	// a reader allocate without limit.
	MaxPayload = 1 << 30
	// DefaultWindow is the zero-fill window (see the package doc).
	DefaultWindow = 256 << 10
	// DefaultSegmentSize is the size at which the writer rolls over.
	DefaultSegmentSize = 64 << 20
)

var segMagic = [8]byte{'S', 'W', 'S', 'E', 'G', '0', '0', '1'}

// ErrCorrupt is wrapped by *CorruptError: the journal holds damaged bytes
// where acknowledged data must be.
var ErrCorrupt = errors.New("journal: corrupt")

// CorruptError names where corruption was found.
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt: %s in file %q at offset %d", e.Reason, e.File, e.Offset)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// StoreID is the random identity of a store, chosen at init.
type StoreID [16]byte

// Key is the checksum key derived from a StoreID.
type Key [32]byte

// DeriveKey returns the frame checksum key of a store.
func DeriveKey(id StoreID) Key {
	return Key(blake3.Sum256(append([]byte("swarmops journal key v1\x00"), id[:]...)))
}

// Pos is a position in the journal: a segment number and a byte offset in it.
type Pos struct {
	Seg uint64
	Off int64
}

// Less orders positions.
func (p Pos) Less(q Pos) bool { return p.Seg < q.Seg || (p.Seg == q.Seg && p.Off < q.Off) }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Seg, p.Off) }

// SegName is the file name of segment n inside the journal directory.
func SegName(n uint64) string { return fmt.Sprintf("seg-%012d", n) }

// ParseSegName parses a segment file name.
func ParseSegName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "seg-") || len(name) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(name[4:], 10, 64)
	return n, err == nil && n > 0
}

// FrameSize is the on-disk size of a frame with a payload of n bytes.
func FrameSize(n int) int64 { return alignFrame(int64(FrameHeaderSize + n)) }

func alignFrame(n int64) int64 { return (n + FrameAlign - 1) &^ (FrameAlign - 1) }

// PayloadDigest is the digest of a payload that the frame checksum covers.
// Callers compute it before taking the writer lock.
func PayloadDigest(p []byte) [32]byte { return b3.Sum256(p) }

// Frame is a decoded frame.
type Frame struct {
	Kind      uint8
	Seq       uint64
	Watermark uint64
	Payload   []byte
	Pos       Pos   // where the frame starts
	Size      int64 // on-disk size including header and padding
}

// End is the position just past the frame.
func (f *Frame) End() Pos { return Pos{f.Pos.Seg, f.Pos.Off + f.Size} }

// EncodeFrame returns the on-disk bytes of a frame. digest must be
// PayloadDigest(payload).
func EncodeFrame(key Key, kind uint8, seq, watermark uint64, payload []byte, digest [32]byte) []byte {
	buf := make([]byte, FrameSize(len(payload)))
	binary.LittleEndian.PutUint32(buf[0:], frameMagic)
	buf[4] = kind
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(buf[16:], seq)
	binary.LittleEndian.PutUint64(buf[24:], watermark)
	sum := frameSum(key, buf[:32], digest)
	copy(buf[32:48], sum[:])
	copy(buf[48:], payload)
	return buf
}

func frameSum(key Key, hdr []byte, digest [32]byte) (out [16]byte) {
	h := keyedHasher(key)
	h.h.Write(hdr)
	h.h.Write(digest[:])
	h.h.Sum(out[:0])
	frameHashers.Put(h)
	return out
}

// keyed is a pooled BLAKE3 hasher keyed with key; a new hasher is a ~2 KiB
// allocation, which dominated checksumming a small frame.
type keyed struct {
	key Key
	h   *blake3.Hasher
}

var frameHashers sync.Pool

// keyedHasher returns a reset 16-byte hasher keyed with key; the caller puts
// it back into frameHashers.
func keyedHasher(key Key) *keyed {
	if h, ok := frameHashers.Get().(*keyed); ok && h.key == key {
		h.h.Reset()
		return h
	}
	return &keyed{key: key, h: blake3.New(16, key[:])}
}

// headerInfo is what a frame header says before its payload is read.
type headerInfo struct {
	kind      uint8
	length    int
	seq       uint64
	watermark uint64
	sum       [16]byte
}

// parseHeader checks the structural fields of a frame header.
func parseHeader(b []byte) (headerInfo, bool) {
	var h headerInfo
	if binary.LittleEndian.Uint32(b[0:]) != frameMagic || b[5] != 0 || b[6] != 0 || b[7] != 0 ||
		binary.LittleEndian.Uint32(b[12:]) != 0 {
		return h, false
	}
	h.kind = b[4]
	h.length = int(binary.LittleEndian.Uint32(b[8:]))
	h.seq = binary.LittleEndian.Uint64(b[16:])
	h.watermark = binary.LittleEndian.Uint64(b[24:])
	copy(h.sum[:], b[32:48])
	if h.length > MaxPayload {
		return h, false
	}
	return h, true
}

// SegHeader is a decoded segment header.
type SegHeader struct {
	Store    StoreID
	Seg      uint64
	FirstSeq uint64
}

// EncodeSegHeader returns the 64 header bytes of a segment.
func EncodeSegHeader(key Key, h SegHeader) []byte {
	b := make([]byte, SegHeaderSize)
	copy(b[0:8], segMagic[:])
	binary.LittleEndian.PutUint32(b[8:], segVersion)
	copy(b[16:32], h.Store[:])
	binary.LittleEndian.PutUint64(b[32:], h.Seg)
	binary.LittleEndian.PutUint64(b[40:], h.FirstSeq)
	b48 := segHeaderSum(key, b[:48])
	copy(b[48:], b48[:])
	return b
}

// segHeaderSum is the keyed checksum of a segment header's first 48 bytes,
// from a pooled hasher: every open reads the header of each segment it
// replays, and a new hasher is a ~2 KiB allocation.
func segHeaderSum(key Key, b []byte) (out [16]byte) {
	h := keyedHasher(key)
	h.h.Write(b)
	h.h.Sum(out[:0])
	frameHashers.Put(h)
	return out
}

// DecodeSegHeader parses and checks a segment header against the store's key.
func DecodeSegHeader(key Key, b []byte) (SegHeader, error) {
	var h SegHeader
	if len(b) < SegHeaderSize {
		return h, errors.New("short segment header")
	}
	if !bytes.Equal(b[0:8], segMagic[:]) {
		return h, errors.New("bad segment magic")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != segVersion {
		return h, fmt.Errorf("unknown segment version %d", v)
	}
	if sum := segHeaderSum(key, b[:48]); !bytes.Equal(sum[:], b[48:64]) {
		return h, errors.New("segment header checksum mismatch (wrong store or damaged)")
	}
	copy(h.Store[:], b[16:32])
	h.Seg = binary.LittleEndian.Uint64(b[32:])
	h.FirstSeq = binary.LittleEndian.Uint64(b[40:])
	return h, nil
}

// Config is shared by Reader and Writer.
type Config struct {
	FS          vfs.FS
	Dir         string // the journal directory
	Store       StoreID
	Key         Key
	SegmentSize int64 // 0: DefaultSegmentSize
	Window      int64 // 0: DefaultWindow
	// SkipChecksum is the test-only canary testknobs.SkipChecksum: frames are
	// accepted on structure and sequence alone.
	SkipChecksum bool
	// SkipDirSync is the test-only canary testknobs.SkipDirSync.
	SkipDirSync bool
}

func (c *Config) segSize() int64 {
	if c.SegmentSize > 0 {
		return c.SegmentSize
	}
	return DefaultSegmentSize
}

func (c *Config) window() int64 {
	if c.Window > 0 {
		return c.Window
	}
	return DefaultWindow
}

// SegPath is the path of segment n.
func (c *Config) SegPath(n uint64) string { return path.Join(c.Dir, SegName(n)) }

// Segments lists the segment numbers present, ascending.
func (c *Config) Segments() ([]uint64, error) {
	d, err := c.FS.Open(c.Dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, n := range names {
		if s, ok := ParseSegName(n); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Reader reads frames and byte ranges from segments. It keeps segment files
// open; it is not safe for concurrent use (the store serializes it).
type Reader struct {
	Config
	files map[uint64]afero.File
}

// NewReader returns a Reader.
func NewReader(c Config) *Reader { return &Reader{Config: c, files: map[uint64]afero.File{}} }

// Close closes every open file.
func (r *Reader) Close() error {
	var first error
	for n, f := range r.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.files, n)
	}
	return first
}

// Forget closes a cached handle, so the next access reopens the file (after
// recovery removed or recreated it).
func (r *Reader) Forget() { _ = r.Close() }

func (r *Reader) file(n uint64) (afero.File, error) {
	if f, ok := r.files[n]; ok {
		return f, nil
	}
	p := r.SegPath(n)
	st, err := r.FS.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &CorruptError{File: p, Reason: "segment is not a regular file"}
	}
	f, err := r.FS.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	r.files[n] = f
	return f, nil
}

// ReadAt reads len(b) bytes of segment seg at off.
func (r *Reader) ReadAt(seg uint64, off int64, b []byte) error {
	f, err := r.file(seg)
	if err != nil {
		return err
	}
	if err := vfs.ReadFull(f, b, off); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return &CorruptError{File: r.SegPath(seg), Offset: off, Reason: "read past end of segment"}
		}
		return err
	}
	return nil
}

// SegHeader reads and checks segment n's header.
func (r *Reader) SegHeader(n uint64) (SegHeader, error) {
	b := make([]byte, SegHeaderSize)
	if err := r.ReadAt(n, 0, b); err != nil {
		return SegHeader{}, err
	}
	h, err := DecodeSegHeader(r.Key, b)
	if err != nil {
		return h, &CorruptError{File: r.SegPath(n), Reason: err.Error()}
	}
	if h.Store != r.Store || h.Seg != n {
		return h, &CorruptError{File: r.SegPath(n), Reason: "segment header names another store or segment"}
	}
	return h, nil
}

// errInvalid marks a position that holds no valid frame (torn or corrupt,
// Classify decides which).
var errInvalid = errors.New("journal: no valid frame")

// ReadFrame reads the frame at pos, which must carry seq. It returns
// errInvalid (check with IsInvalid) when no valid frame is there.
func (r *Reader) ReadFrame(pos Pos, seq uint64) (*Frame, error) {
	return r.readFrame(pos, seq, nil)
}

// readAhead is one Scan's read window: the frames a scan walks lie back to
// back, so it reads them with one pread per window instead of a stat and two
// preads per frame. It lives only for the Scan that made it, which reads no
// further than the frames it was asked for, so its bytes never outlive the
// moment they were read.
type readAhead struct {
	seg  uint64
	off  int64  // file offset of buf[0]
	buf  []byte // the bytes read
	eof  bool   // the read that filled buf reached the end of the file
	next int    // size of the next read
	mem  *[]byte
	// borrow: frames' payloads are views of buf, not copies (ScanBorrowed).
	borrow bool
}

// The window starts small (a catch-up of one frame reads 8 KiB) and doubles
// up to readAheadMax. A larger window saves little: at 64 KiB the system
// call is a small part of copying the bytes. And every page of the window
// a process touches for the first time is a page fault, which on the VM of
// docs/perf/store.md ("Page faults") costs 13 us, about what copying 16
// KiB costs: a 256 KiB window was 64 faults of a fresh process's replay.
const (
	readAheadMin = 8 << 10
	readAheadMax = 64 << 10
)

var readAheadPool = sync.Pool{New: func() any { b := make([]byte, readAheadMax); return &b }}

func (ra *readAhead) release() {
	if ra.mem != nil {
		readAheadPool.Put(ra.mem)
		ra.mem, ra.buf = nil, nil
	}
}

// window returns n bytes of segment f at off, reading a new window when
// they are not in the current one. ok is false when the file ends first.
func (ra *readAhead) window(f afero.File, seg uint64, off int64, n int64) (b []byte, ok bool, err error) {
	if ra.buf != nil && ra.seg == seg && off >= ra.off && off+n <= ra.off+int64(len(ra.buf)) {
		return ra.buf[off-ra.off : off-ra.off+n], true, nil
	}
	if ra.buf != nil && ra.seg == seg && ra.eof && off >= ra.off && off+n > ra.off+int64(len(ra.buf)) {
		return nil, false, nil
	}
	if ra.mem == nil {
		ra.mem = readAheadPool.Get().(*[]byte)
		ra.next = readAheadMin
	}
	size := int64(ra.next)
	if n > size {
		size = n
	}
	mem := *ra.mem
	if int64(len(mem)) < size {
		mem = make([]byte, size)
		*ra.mem = mem
	}
	got, err := f.ReadAt(mem[:size], off)
	if err != nil && err != io.EOF {
		return nil, false, err
	}
	ra.seg, ra.off, ra.buf, ra.eof = seg, off, mem[:got], int64(got) < size
	if ra.next < readAheadMax {
		ra.next *= 2
	}
	if int64(got) < n {
		return nil, false, nil
	}
	return ra.buf[:n], true, nil
}

func (r *Reader) readFrame(pos Pos, seq uint64, ra *readAhead) (*Frame, error) {
	if ra != nil {
		return r.readFrameAhead(pos, seq, ra)
	}
	f, err := r.file(pos.Seg)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if pos.Off+FrameHeaderSize > size {
		return nil, errInvalid
	}
	var hb [FrameHeaderSize]byte
	if err := vfs.ReadFull(f, hb[:], pos.Off); err != nil {
		return nil, err
	}
	h, ok := parseHeader(hb[:])
	if !ok || h.seq != seq {
		return nil, errInvalid
	}
	fsz := FrameSize(h.length)
	if pos.Off+fsz > size {
		return nil, errInvalid
	}
	// Payload and padding come in one read. The padding is not under the
	// checksum, so it must be all zeros: it was written with the frame, in
	// the same write and covered by the same sync, and a flipped bit there is
	// corruption that Verify and recovery must see, not a value to ignore.
	body := make([]byte, fsz-FrameHeaderSize)
	if err := vfs.ReadFull(f, body, pos.Off+FrameHeaderSize); err != nil {
		return nil, err
	}
	payload := body[:h.length:h.length]
	if !r.SkipChecksum {
		for _, b := range body[h.length:] {
			if b != 0 {
				return nil, errInvalid
			}
		}
		if frameSum(r.Key, hb[:32], PayloadDigest(payload)) != h.sum {
			return nil, errInvalid
		}
	}
	return &Frame{Kind: h.kind, Seq: h.seq, Watermark: h.watermark, Payload: payload, Pos: pos, Size: fsz}, nil
}

// readFrameAhead is ReadFrame through a scan's read window.
func (r *Reader) readFrameAhead(pos Pos, seq uint64, ra *readAhead) (*Frame, error) {
	f, err := r.file(pos.Seg)
	if err != nil {
		return nil, err
	}
	hb, ok, err := ra.window(f, pos.Seg, pos.Off, FrameHeaderSize)
	if err != nil || !ok {
		return nil, orInvalid(err)
	}
	h, ok := parseHeader(hb)
	if !ok || h.seq != seq {
		return nil, errInvalid
	}
	fsz := FrameSize(h.length)
	whole, ok, err := ra.window(f, pos.Seg, pos.Off, fsz)
	if err != nil || !ok {
		return nil, orInvalid(err)
	}
	hdr := whole[:FrameHeaderSize]
	// The frame is copied out of the window, which the next read reuses,
	// unless the scan lends it (ScanBorrowed).
	body := whole[FrameHeaderSize:]
	if !ra.borrow {
		body = make([]byte, fsz-FrameHeaderSize)
		copy(body, whole[FrameHeaderSize:])
	}
	payload := body[:h.length:h.length]
	if !r.SkipChecksum {
		for _, b := range body[h.length:] {
			if b != 0 {
				return nil, errInvalid
			}
		}
		if frameSum(r.Key, hdr[:32], PayloadDigest(payload)) != h.sum {
			return nil, errInvalid
		}
	}
	return &Frame{Kind: h.kind, Seq: h.seq, Watermark: h.watermark, Payload: payload, Pos: pos, Size: fsz}, nil
}

func orInvalid(err error) error {
	if err != nil {
		return err
	}
	return errInvalid
}

// IsInvalid reports whether err says "no valid frame here".
func IsInvalid(err error) bool { return errors.Is(err, errInvalid) }

// Next returns the frame carrying seq at pos, following a rollover into the
// next segment when pos holds no valid frame and the next segment starts with
// seq. It returns errInvalid at the end of the log.
func (r *Reader) Next(pos Pos, seq uint64) (*Frame, error) {
	return r.next(pos, seq, nil)
}

func (r *Reader) next(pos Pos, seq uint64, ra *readAhead) (*Frame, error) {
	fr, err := r.readFrame(pos, seq, ra)
	if err == nil || !IsInvalid(err) {
		return fr, err
	}
	h, herr := r.SegHeader(pos.Seg + 1)
	if herr != nil || h.FirstSeq != seq {
		return nil, errInvalid
	}
	return r.readFrame(Pos{pos.Seg + 1, FirstFrame}, seq, ra)
}

// ScanResult is where a scan stopped.
type ScanResult struct {
	End     Pos    // position after the last valid frame
	NextSeq uint64 // sequence number the next frame must carry
	Frames  int64
}

// Scan calls fn for every valid frame from pos (which must carry seq) and
// returns where the valid log ends. limit, if non-zero, stops the scan before
// the frame carrying seq limit.
func (r *Reader) Scan(pos Pos, seq, limit uint64, fn func(*Frame) error) (ScanResult, error) {
	return r.scan(pos, seq, limit, fn, false)
}

// ScanBorrowed is Scan for a caller that keeps nothing of a frame's
// payload once fn returns: each payload is a view of the scan's read
// window, which the next frame's read may overwrite, instead of a copy.
// Replay decodes a frame and keeps only what it decoded; the copies were
// most of a fresh process's page faults as it replayed (each frame's copy
// new memory, touched once).
func (r *Reader) ScanBorrowed(pos Pos, seq, limit uint64, fn func(*Frame) error) (ScanResult, error) {
	return r.scan(pos, seq, limit, fn, true)
}

func (r *Reader) scan(pos Pos, seq, limit uint64, fn func(*Frame) error, borrow bool) (ScanResult, error) {
	res := ScanResult{End: pos, NextSeq: seq}
	ra := readAhead{borrow: borrow}
	defer ra.release()
	for limit == 0 || res.NextSeq < limit {
		fr, err := r.next(res.End, res.NextSeq, &ra)
		if IsInvalid(err) {
			break
		}
		if err != nil {
			return res, err
		}
		if fn != nil {
			if err := fn(fr); err != nil {
				return res, err
			}
		}
		res.End = fr.End()
		res.NextSeq++
		res.Frames++
	}
	return res, nil
}

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

// zeroChunk is the zeros zeroFill and CutTail write and CutTail compares
// against. It is never written: io.WriterAt implementations must not modify
// or retain the slice they are given.
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
		end := i + FrameSize(h.length)
		if end > size {
			continue
		}
		var digest [32]byte
		if end <= wEnd {
			digest = PayloadDigest(b[FrameHeaderSize : FrameHeaderSize+h.length])
		} else {
			pp := getScratch(int64(h.length))
			err := vfs.ReadFull(f, *pp, i+FrameHeaderSize)
			if err == nil {
				digest = PayloadDigest(*pp)
			}
			putScratch(pp)
			if err != nil {
				return 0, 0, false, err
			}
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

// Writer appends frames. It is used only under the store's writer lock; it
// caches the current segment's open file and its known size, which only ever
// grows (other processes only append), so a cached size is a safe lower
// bound of the zero-filled space.
type Writer struct {
	Config
	seg  uint64
	f    afero.File
	size int64
}

// NewWriter returns a Writer.
func NewWriter(c Config) *Writer { return &Writer{Config: c} }

// Close closes the cached segment file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	w.seg = 0
	return err
}

func (w *Writer) open(n uint64) error {
	if w.f != nil && w.seg == n {
		return nil
	}
	w.Close()
	f, err := w.FS.OpenFile(w.SegPath(n), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.seg, w.size = f, n, st.Size()
	return nil
}

// CreateSegment creates (or re-creates, truncating a leftover of a crashed
// writer) segment n whose first frame will carry firstSeq, with its first
// window zero-filled, and syncs the journal directory so the name survives a
// power loss. The data itself is made durable by the next frame's sync.
func (w *Writer) CreateSegment(n, firstSeq uint64, minSize int64) error {
	w.Close()
	f, err := w.FS.OpenFile(w.SegPath(n), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(EncodeSegHeader(w.Key, SegHeader{Store: w.Store, Seg: n, FirstSeq: firstSeq}), 0); err != nil {
		f.Close()
		return err
	}
	size := w.roundWindow(max(minSize, FirstFrame+1))
	if err := zeroFill(f, SegHeaderSize, size); err != nil {
		f.Close()
		return err
	}
	if !w.SkipDirSync {
		if err := w.FS.SyncDir(w.Dir); err != nil {
			f.Close()
			return err
		}
	}
	w.f, w.seg, w.size = f, n, size
	return nil
}

func (w *Writer) roundWindow(n int64) int64 {
	win := w.window()
	return (n + win - 1) / win * win
}

func zeroFill(f afero.File, from, to int64) error {
	const chunk = int64(len(zeroChunk))
	zero := zeroChunk[:]
	for off := from; off < to; {
		n := to - off
		if n > chunk {
			n = chunk
		}
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Append writes frame bytes (from EncodeFrame, carrying seq) at end, rolling
// over into a new segment when they do not fit. It returns where the frame
// was written. The frame is not durable until Sync covers its segment.
func (w *Writer) Append(end Pos, seq uint64, frame []byte) (Pos, error) {
	n := int64(len(frame))
	at := end
	if end.Off > FirstFrame && end.Off+n > w.segSize() {
		at = Pos{end.Seg + 1, FirstFrame}
		if err := w.CreateSegment(at.Seg, seq, FirstFrame+n); err != nil {
			return at, err
		}
	} else if err := w.open(at.Seg); err != nil {
		return at, err
	}
	need := at.Off + n
	if need > w.size {
		if st, err := w.f.Stat(); err != nil {
			return at, err
		} else {
			w.size = st.Size()
		}
	}
	if need > w.size {
		// Zero-fill through the end of the window the frame ends in, so that
		// this frame's fdatasync persists zeros and size at once.
		to := w.roundWindow(need)
		if err := zeroFill(w.f, w.size, to); err != nil {
			return at, err
		}
		w.size = to
	}
	if _, err := w.f.WriteAt(frame, at.Off); err != nil {
		return at, err
	}
	return at, nil
}

// Sync fdatasyncs segments from..to inclusive.
func (c *Config) Sync(from, to uint64) error {
	for n := from; n <= to; n++ {
		f, err := c.FS.OpenFile(c.SegPath(n), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) && n < to {
			continue
		}
		if err != nil {
			return err
		}
		err = vfs.Datasync(f)
		cerr := f.Close()
		if err != nil {
			return err
		}
		if cerr != nil {
			return cerr
		}
	}
	return nil
}
