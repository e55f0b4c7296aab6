package journal

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/spf13/afero"
	"github.com/swarmops/swarmops/core/vfs"
)

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
	// heads: split frames' bodies are skipped (ScanHeads).
	heads bool
}

// The window starts small (a catch-up of one frame reads 8 KiB) and doubles
// up to readAheadMax. A larger window saves little: at 64 KiB the system
// call is a small part of copying the bytes. And every page of the window
// a process touches for the first time is a page fault, which on a test VM
// costs 13 us, about what copying 16 KiB costs: a 256 KiB window was 64
// faults of a fresh process's replay.
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
	fsz := h.size()
	if pos.Off+fsz > size {
		return nil, errInvalid
	}
	// Body digest, payload and padding come in one read.
	rest := make([]byte, fsz-FrameHeaderSize)
	if err := vfs.ReadFull(f, rest, pos.Off+FrameHeaderSize); err != nil {
		return nil, err
	}
	payload, ok := r.check(hb[:], &h, rest, false)
	if !ok {
		return nil, errInvalid
	}
	return &Frame{Kind: h.kind, Seq: h.seq, Watermark: h.watermark, Payload: payload, Len: h.length, Head: h.head, Pos: pos, Size: fsz}, nil
}

// check verifies a frame with header hdr (parsed as h) and the bytes that
// follow it, rest: a split frame's body digest, the payload and the
// padding, or (headOnly, a split frame only) the body digest and the head.
// It returns the payload, or the head when headOnly.
//
// The padding is not under the checksum, so it must be all zeros: it was
// written with the frame, in the same write and covered by the same sync,
// and a flipped bit there is corruption that Verify and recovery must see,
// not a value to ignore. A split frame's checksum covers its head and the
// body digest it carries; the body is checked against that digest when it
// is read, so a damaged body fails here as a damaged payload does.
func (r *Reader) check(hdr []byte, h *headerInfo, rest []byte, headOnly bool) ([]byte, bool) {
	po := int(payloadOff(h.head) - FrameHeaderSize)
	var body [BodyDigestSize]byte
	if h.head > 0 {
		copy(body[:], rest[:BodyDigestSize])
	}
	if headOnly {
		head := rest[po : po+h.head : po+h.head]
		return head, r.SkipChecksum || frameSum(r.Key, hdr[:32], splitSum(head, body)) == h.sum
	}
	payload := rest[po : po+h.length : po+h.length]
	if r.SkipChecksum {
		return payload, true
	}
	for _, b := range rest[po+h.length:] {
		if b != 0 {
			return nil, false
		}
	}
	sum := PayloadDigest(payload)
	if h.head > 0 {
		if sum = PayloadDigest(payload[h.head:]); sum != body {
			return nil, false
		}
		sum = splitSum(payload[:h.head], body)
	}
	return payload, frameSum(r.Key, hdr[:32], sum) == h.sum
}

// readFrameAhead is ReadFrame through a scan's read window. With ra.heads,
// a split frame's body is neither read nor checked.
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
	fsz := h.size()
	headOnly := ra.heads && h.head > 0
	need := fsz
	if headOnly {
		need = payloadOff(h.head) + int64(h.head)
	}
	whole, ok, err := ra.window(f, pos.Seg, pos.Off, need)
	if err != nil || !ok {
		return nil, orInvalid(err)
	}
	hdr := whole[:FrameHeaderSize]
	// The frame is copied out of the window, which the next read reuses,
	// unless the scan lends it (ScanBorrowed).
	rest := whole[FrameHeaderSize:]
	if !ra.borrow {
		rest = append([]byte(nil), rest...)
	}
	payload, ok := r.check(hdr, &h, rest, headOnly)
	if !ok {
		return nil, errInvalid
	}
	return &Frame{Kind: h.kind, Seq: h.seq, Watermark: h.watermark, Payload: payload, Len: h.length, Head: h.head,
		HeadOnly: headOnly, Pos: pos, Size: fsz}, nil
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
	return r.scan(pos, seq, limit, fn, readAhead{})
}

// ScanBorrowed is Scan for a caller that keeps nothing of a frame's
// payload once fn returns: each payload is a view of the scan's read
// window, which the next frame's read may overwrite, instead of a copy.
// Replay decodes a frame and keeps only what it decoded; the copies were
// most of a fresh process's page faults as it replayed (each frame's copy
// new memory, touched once).
func (r *Reader) ScanBorrowed(pos Pos, seq, limit uint64, fn func(*Frame) error) (ScanResult, error) {
	return r.scan(pos, seq, limit, fn, readAhead{borrow: true})
}

// ScanHeads is ScanBorrowed that reads only the head of a split frame
// (Frame.HeadOnly): its checksum covers the head and the body's digest,
// and the body is not read. It is for frames known to have been written
// whole, below a published end of this boot (the page cache that holds
// them outlives a killed writer): a scan that must tell a torn tail from
// a frame, recovery's after a power loss, reads every byte (Scan,
// ScanBorrowed). A damaged body is found when one of its objects is read
// (checked against its id) and by a deep Verify, which reads every frame
// whole.
func (r *Reader) ScanHeads(pos Pos, seq, limit uint64, fn func(*Frame) error) (ScanResult, error) {
	return r.scan(pos, seq, limit, fn, readAhead{borrow: true, heads: true})
}

func (r *Reader) scan(pos Pos, seq, limit uint64, fn func(*Frame) error, ra readAhead) (ScanResult, error) {
	res := ScanResult{End: pos, NextSeq: seq}
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
