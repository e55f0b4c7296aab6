// Package zblob compresses the inline blobs of a split journal frame's
// body in groups: consecutive blobs, up to GroupMax bytes together, as one
// zstd frame, kept only when it is smaller than the blobs. A blob of a
// group is read by decoding its group's frame (at most GroupMax bytes),
// whole or only as far as the blob (Cache.Load says which), and taking
// its bytes at its offset inside it.
//
// Why groups, and this size: Go's src, 11,211 files of at most 64 KiB
// (61.8 MB), stores in 20.5 MB with one frame per blob at zstd's default
// level, 15.6 MB in groups of 256 KiB, 15.0 MB at the better level (0.9 s
// of CPU) and 14.5 MB in groups of 512 KiB. A group of 256 KiB of Go's
// src decodes in about 0.5 ms, a reader that wants one blob of it decodes
// half of that on average (DecodeMember), and a reader that walks a tree
// in the order it was committed finds the group it needs already decoded
// (Cache). The compression runs outside the writer lock,
// in the committing process, and only for split frames (imports and
// other big commits), never for a one-file commit.
package zblob

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/swarmops/swarmops/core/index"
)

// GroupMax is the most a group decodes to, and so the most a group's
// frame may hold (the index checks records against the same bound).
const GroupMax = index.MaxGroup

// window is the encoder's window: a whole group.
const window = GroupMax

// encoder compresses groups; EncodeAll is safe for concurrent use.
var encoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithWindowSize(window), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(fmt.Sprintf("zblob: zstd encoder with constant options: %v", err))
	}
	return e
})

// decoder decodes groups; DecodeAll is safe for concurrent use and keeps
// its state between calls. It never writes past the capacity of the
// slice it is given (WithDecodeAllCapLimit), so damaged bytes cannot make
// it allocate more than GroupMax.
var decoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecoderLowmem(true),
		zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxWindow(1<<20))
	if err != nil {
		panic(fmt.Sprintf("zblob: zstd decoder with constant options: %v", err))
	}
	return d
})

// streams decode a group's frame only as far as a read needs
// (DecodeMember). With one decoder goroutine a stream decodes in the
// caller's goroutine, block by block, into a buffer the decoder keeps,
// and the bytes before the member are read into scratch and dropped; the
// pool keeps both between reads. Damaged bytes cannot make a stream
// allocate more than its window and GroupMax. A stream skips the frame's
// checksum, which it seldom reaches: the member is checked against its
// id, and a whole decode (a later read of the group, deep verification)
// still checks every byte of the frame.
var streams = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(1<<20), zstd.WithDecoderMaxMemory(GroupMax), zstd.IgnoreChecksum(true))
	if err != nil {
		panic(fmt.Sprintf("zblob: zstd stream decoder with constant options: %v", err))
	}
	return &stream{d: d, scratch: make([]byte, 16<<10)}
}}

type stream struct {
	d       *zstd.Decoder
	scratch []byte
}

// slack is the room Decode leaves past a group's end. The decoder copies
// a block's matches with wide, unchecked moves only while a whole block
// (at most 128 KiB) and 32 bytes more still fit in the buffer; without
// the room the last block of every group takes the checked copies
// (BenchmarkDecodeGoSourceGroup: a group of Go source decodes 1.26×
// slower). Room never written is never touched, so it costs address
// space, not pages.
const slack = 128<<10 + 32

// Append appends the zstd frame of group (the concatenated bytes of one
// group's blobs, at most GroupMax) to dst and reports true when that
// pays: the frame is smaller than group. Otherwise it returns dst as it
// was, and false.
func Append(dst, group []byte) ([]byte, bool) {
	if len(group) < 2 || len(group) > GroupMax {
		return dst, false
	}
	n := len(dst)
	out := encoder().EncodeAll(group, dst)
	if len(out)-n >= len(group) {
		return dst[:n], false
	}
	return out, true
}

// ErrDecode is a group's frame that does not decode, or does not hold the
// blob asked for.
var ErrDecode = errors.New("zblob: compressed group does not decode")

// Decode returns what the frame z decodes to: the frame's header must
// give its size, at most GroupMax, and it must decode to exactly that
// many bytes.
func Decode(z []byte) ([]byte, error) {
	size, err := frameSize(z)
	if err != nil {
		return nil, err
	}
	out, err := decoder().DecodeAll(z, make([]byte, 0, size+slack))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if len(out) != size {
		return nil, fmt.Errorf("%w: %d bytes, the frame declares %d", ErrDecode, len(out), size)
	}
	return out[:size:size], nil
}

// DecodeMember returns the size bytes at inner of what the frame z
// decodes to, decoding the frame's blocks only as far as the member's end
// and keeping only the member: a read of one blob of a group decodes half
// of it on average and touches no memory for the rest. The bytes past the
// member are not checked, and the caller checks the member's own.
func DecodeMember(z []byte, inner, size int64) ([]byte, error) {
	total, err := frameSize(z)
	if err != nil {
		return nil, err
	}
	if inner < 0 || size < 0 || inner+size > int64(total) {
		return nil, fmt.Errorf("%w: the group holds %d bytes, not %d at %d", ErrDecode, total, size, inner)
	}
	s := streams.Get().(*stream)
	defer streams.Put(s)
	defer s.d.Reset(nil)
	if err := s.d.Reset(bytes.NewReader(z)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	for skip := inner; skip > 0; {
		n, err := io.ReadFull(s.d, s.scratch[:min(skip, int64(len(s.scratch)))])
		if err != nil {
			return nil, fmt.Errorf("%w: the %d bytes before a member at %d: %v", ErrDecode, inner, inner, err)
		}
		skip -= int64(n)
	}
	out := make([]byte, size)
	if _, err := io.ReadFull(s.d, out); err != nil {
		return nil, fmt.Errorf("%w: a member of %d bytes at %d: %v", ErrDecode, size, inner, err)
	}
	return out, nil
}

// Frame returns a buffer of n bytes to read a group's frame into, at most
// GroupMax, from the ones Release handed back: a reader that decodes group
// after group reuses the memory of the frames it read before instead of
// touching new pages for each.
func Frame(n int) []byte {
	if n <= 0 || n > GroupMax {
		return make([]byte, max(n, 0))
	}
	if b, ok := frames.Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, GroupMax)
}

// Release hands back a buffer Frame returned, once nothing holds it: the
// decoders keep no reference to a frame they have decoded.
func Release(b []byte) {
	if cap(b) == GroupMax {
		frames.Put(&b)
	}
}

var frames sync.Pool

// frameSize is the size a group's frame declares: it must declare one,
// and neither the frame nor the size may exceed GroupMax.
func frameSize(z []byte) (int, error) {
	if len(z) == 0 || len(z) > GroupMax {
		return 0, fmt.Errorf("%w: a frame of %d bytes", ErrDecode, len(z))
	}
	var h zstd.Header
	if err := h.Decode(z); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if !h.HasFCS || h.FrameContentSize > GroupMax {
		return 0, fmt.Errorf("%w: the frame declares %d bytes (known: %v)", ErrDecode, h.FrameContentSize, h.HasFCS)
	}
	return int(h.FrameContentSize), nil
}

// Member returns the size bytes at inner of a decoded group.
func Member(group []byte, inner, size int64) ([]byte, error) {
	if inner < 0 || size < 0 || inner+size > int64(len(group)) {
		return nil, fmt.Errorf("%w: the group holds %d bytes, not %d at %d", ErrDecode, len(group), size, inner)
	}
	return group[inner : inner+size : inner+size], nil
}

// Cache keeps the few groups decoded that were used last, by where their
// frames are, so that reading a group's blobs one after another decodes
// it once, and so does a diff that goes back to one new group between
// old ones. The key holds the store's epoch: a recovery that cuts frames
// starts a new one, so a frame written later at the same place is never
// served from an entry of the one it replaced. It is safe for concurrent
// use; a Cache's zero value holds nothing and keeps DefaultEntries groups.
type Cache struct {
	mu   sync.Mutex
	ents []cacheEnt // made at first use, entries long
	tick uint64
	// busy holds the keys being decoded by Load, each with the channel
	// its decoder closes when done.
	busy map[Key]chan struct{}
	// seen holds the last groups read one member of without being kept
	// (Load), oldest overwritten first: as many as ents.
	seen     []Key
	seenNext int
	// entries is the groups the cache keeps; 0: DefaultEntries.
	entries int
	// decode is Decode, unless a test counts the calls.
	decode func(z []byte) ([]byte, error)
}

// Key is where a group's frame is: the epoch of the projection that
// located it, the segment and the offset.
type Key struct {
	Epoch, Seg uint64
	Off        int64
}

// DefaultEntries is how many groups a Cache keeps unless SetEntries says
// otherwise: enough for a walk in commit order and a diff that returns to
// a group, at 1 MiB. A long-lived process that serves many readers keeps
// more (core's Options.GroupCache).
const DefaultEntries = 4

// SetEntries makes c keep n groups (at least 1), each up to GroupMax bytes.
// It must be called before c's first use.
func (c *Cache) SetEntries(n int) { c.entries = max(n, 1) }

// made allocates c's entries at first use; the caller holds c.mu.
func (c *Cache) made() {
	if c.ents == nil {
		n := cmp.Or(c.entries, DefaultEntries)
		c.ents, c.seen = make([]cacheEnt, n), make([]Key, n)
	}
}

type cacheEnt struct {
	key  Key
	data []byte
	used uint64 // the cache's tick when last put or served
}

// Len reports how many groups c keeps.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.ents {
		if e.data != nil {
			n++
		}
	}
	return n
}

// Get returns a copy of the size bytes at inner of the group whose frame
// is at k, when the cache holds that group and the group holds those
// bytes; a damaged entry is left for Load to report. A nil Cache holds
// nothing.
func (c *Cache) Get(k Key, inner, size int64) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.lookup(k)
	if !ok {
		return nil, false
	}
	m, err := Member(g, inner, size)
	if err != nil {
		return nil, false
	}
	return bytes.Clone(m), true
}

// lookup is Get's search; the caller holds c.mu.
func (c *Cache) lookup(k Key) ([]byte, bool) {
	c.made()
	for i := range c.ents {
		if e := &c.ents[i]; e.data != nil && e.key == k {
			c.tick++
			e.used = c.tick
			return e.data, true
		}
	}
	return nil, false
}

// Load returns a copy of the size bytes at inner of the group whose
// frame, z, is at k: from the cache, or decoded.
//
// What it decodes: a read of a group's first blob, or of a group read
// from before, decodes the whole group and keeps it, since a reader that
// walks blobs in the order they were committed (a checkout, an export)
// starts at the first and reads on. Any other read decodes only as far
// as its blob's end and keeps nothing but a note that the group was read
// (DecodeMember): a diff reads one blob of most groups it touches.
//
// Concurrent Loads of one key that decode the whole group decode it once:
// the others wait for the first and take what it kept (a diff's readers
// often want blobs of one group at the same time). A nil Cache decodes
// the whole group every time.
func (c *Cache) Load(k Key, z []byte, inner, size int64) ([]byte, error) {
	if c == nil {
		g, err := Decode(z)
		if err != nil {
			return nil, err
		}
		m, err := Member(g, inner, size)
		return bytes.Clone(m), err
	}
	for {
		c.mu.Lock()
		if g, ok := c.lookup(k); ok {
			defer c.mu.Unlock()
			m, err := Member(g, inner, size)
			return bytes.Clone(m), err
		}
		wait, busy := c.busy[k]
		if !busy {
			break
		}
		c.mu.Unlock()
		<-wait
		// The decoder kept the group, or failed and kept nothing: look
		// again, and decode it here if it is still not there.
	}
	if inner > 0 && !c.wasSeen(k) {
		c.seen[c.seenNext] = k
		c.seenNext = (c.seenNext + 1) % len(c.seen)
		c.mu.Unlock()
		return DecodeMember(z, inner, size)
	}
	done := make(chan struct{})
	if c.busy == nil {
		c.busy = make(map[Key]chan struct{})
	}
	c.busy[k] = done
	decode := c.decode
	c.mu.Unlock()
	if decode == nil {
		decode = Decode
	}
	g, err := decode(z)
	c.mu.Lock()
	delete(c.busy, k)
	if err == nil {
		c.keep(k, g)
	}
	c.mu.Unlock()
	close(done)
	if err != nil {
		return nil, err
	}
	m, err := Member(g, inner, size)
	return bytes.Clone(m), err
}

// wasSeen reports whether a member of the group at k was read without
// keeping the group. The caller holds c.mu.
func (c *Cache) wasSeen(k Key) bool {
	for _, s := range c.seen {
		if s == k && s != (Key{}) {
			return true
		}
	}
	return false
}

// Put records the decoded group whose frame is at k, replacing the
// entry least recently put or served. The caller must not change data afterwards.
// A nil Cache keeps nothing.
func (c *Cache) Put(k Key, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep(k, data)
}

// keep is Put's store; the caller holds c.mu.
func (c *Cache) keep(k Key, data []byte) {
	c.made()
	old := 0
	for i := range c.ents {
		if c.ents[i].used < c.ents[old].used {
			old = i
		}
	}
	c.tick++
	c.ents[old] = cacheEnt{k, data, c.tick}
}
