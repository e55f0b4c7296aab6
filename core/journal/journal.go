package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/vfs"
)

// Format constants. They are part of the on-disk format.
const (
	SegHeaderSize   = 64
	FrameHeaderSize = 48
	// BodyDigestSize is the body digest a split frame carries after its
	// header.
	BodyDigestSize = 32
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
	// Payload is the frame's payload, or only its head when HeadOnly.
	Payload []byte
	// Len is the payload's length, whether or not all of it was read.
	Len int
	// Head is the length of a split frame's head (0: not split): the
	// payload is Payload[:Head] followed by the body.
	Head int
	// HeadOnly says the body of a split frame was not read (ScanHeads):
	// Payload holds the head, checked by the checksum, and the body's
	// bytes were not checked.
	HeadOnly bool
	Pos      Pos   // where the frame starts
	Size     int64 // on-disk size including header and padding
}

// End is the position just past the frame.
func (f *Frame) End() Pos { return Pos{f.Pos.Seg, f.Pos.Off + f.Size} }

// PayloadOff is the offset of the payload from the frame's start.
func (f *Frame) PayloadOff() int64 { return payloadOff(f.Head) }

func payloadOff(head int) int64 {
	if head > 0 {
		return FrameHeaderSize + BodyDigestSize
	}
	return FrameHeaderSize
}

// EncodeFrame returns the on-disk bytes of a frame. digest must be
// PayloadDigest(payload).
func EncodeFrame(key Key, kind uint8, seq, watermark uint64, payload []byte, digest [32]byte) []byte {
	return encodeFrame(key, kind, seq, watermark, payload, Digests{Sum: digest})
}

// Digests is what a frame's checksum covers of its payload, computed before
// the writer lock: PayloadDigests.
type Digests struct {
	Head int      // a split frame's head length; 0: not split
	Sum  [32]byte // what the checksum covers after the header
	Body [32]byte // a split frame's body digest, stored in the frame
}

// PayloadDigests returns the digests of a payload whose first head bytes
// are a split frame's head (head 0: a frame that is not split, whose Sum
// is PayloadDigest(p)). A split frame's checksum covers the head and the
// body's digest, not the body: a reader checks the head without reading
// the body.
func PayloadDigests(p []byte, head int) Digests {
	if head <= 0 || head > len(p) {
		return Digests{Sum: PayloadDigest(p)}
	}
	d := Digests{Head: head, Body: b3.Sum256(p[head:])}
	d.Sum = splitSum(p[:head], d.Body)
	return d
}

// splitSum is what a split frame's checksum covers after its header: the
// digest of the head followed by the body's digest.
func splitSum(head []byte, body [32]byte) [32]byte {
	h := blake3.New(32, nil)
	h.Write(head)
	h.Write(body[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// EncodeFrameDigests returns the on-disk bytes of a frame, split when
// d.Head > 0. d must be PayloadDigests(payload, d.Head).
func EncodeFrameDigests(key Key, kind uint8, seq, watermark uint64, payload []byte, d Digests) []byte {
	return encodeFrame(key, kind, seq, watermark, payload, d)
}

func encodeFrame(key Key, kind uint8, seq, watermark uint64, payload []byte, d Digests) []byte {
	po := payloadOff(d.Head)
	buf := make([]byte, alignFrame(po+int64(len(payload))))
	binary.LittleEndian.PutUint32(buf[0:], frameMagic)
	buf[4] = kind
	binary.LittleEndian.PutUint32(buf[8:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[12:], uint32(d.Head))
	binary.LittleEndian.PutUint64(buf[16:], seq)
	binary.LittleEndian.PutUint64(buf[24:], watermark)
	sum := frameSum(key, buf[:32], d.Sum)
	copy(buf[32:48], sum[:])
	if d.Head > 0 {
		copy(buf[FrameHeaderSize:], d.Body[:])
	}
	copy(buf[po:], payload)
	return buf
}

func frameSum(key Key, hdr []byte, digest [32]byte) (out [16]byte) {
	h := keyedHasher(key)
	h.h.Write(hdr)
	h.h.Write(digest[:])
	h.h.Sum(h.sum[:0])
	out = h.sum
	frameHashers.Put(h)
	return out
}

// keyed is a pooled BLAKE3 hasher keyed with key; a new hasher is a ~2 KiB
// allocation, which dominated checksumming a small frame.
type keyed struct {
	key Key
	h   *blake3.Hasher
	sum [16]byte // where Sum writes: its argument escapes, a local would be allocated
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
	head      int // a split frame's head length; 0: not split
	sum       [16]byte
}

// size is the on-disk size of the frame.
func (h *headerInfo) size() int64 { return alignFrame(payloadOff(h.head) + int64(h.length)) }

// parseHeader checks the structural fields of a frame header.
func parseHeader(b []byte) (headerInfo, bool) {
	var h headerInfo
	if binary.LittleEndian.Uint32(b[0:]) != frameMagic || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return h, false
	}
	h.kind = b[4]
	h.length = int(binary.LittleEndian.Uint32(b[8:]))
	h.head = int(binary.LittleEndian.Uint32(b[12:]))
	h.seq = binary.LittleEndian.Uint64(b[16:])
	h.watermark = binary.LittleEndian.Uint64(b[24:])
	copy(h.sum[:], b[32:48])
	if h.length > MaxPayload || h.head > h.length {
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

// Distance is the number of journal bytes from position a to a later
// position b, with every segment between them, and the unused end of a's,
// counted at segSize. It is exact within a segment. Across a rollover it
// may count up to one frame's size of unused space, and a frame larger
// than segSize (which has a segment of its own) counts as segSize: it is
// an estimate for scheduling checkpoints that needs no file's size.
func Distance(a, b Pos, segSize int64) int64 {
	if !a.Less(b) {
		return 0
	}
	if a.Seg == b.Seg {
		return b.Off - a.Off
	}
	return max(segSize-a.Off, 0) + int64(b.Seg-a.Seg-1)*segSize + max(b.Off-FirstFrame, 0)
}
