// Package zblob compresses the inline blobs of a split journal frame's
// body in groups: consecutive blobs, up to GroupMax bytes together, as one
// zstd frame, kept only when it is smaller than the blobs. A blob of a
// group is read by decoding its group's frame (at most GroupMax bytes) and
// taking its bytes at its offset inside it.
//
// Why groups, and this size: Go's src, 11,211 files of at most 64 KiB
// (61.8 MB), stores in 20.5 MB with one frame per blob at zstd's default
// level, 15.6 MB in groups of 256 KiB, 15.0 MB at the better level (0.9 s
// of CPU) and 14.5 MB in groups of 512 KiB. A group of 256 KiB of Go's
// src decodes in about 0.5 ms, so a read stays cheap, and a reader that
// walks a tree in the order it was committed finds the group it needs
// already decoded (Cache). The compression runs outside the writer lock,
// in the committing process, and only for split frames (imports and
// other big commits), never for a one-file commit.
package zblob

import (
	"errors"
	"fmt"
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
	if len(z) == 0 || len(z) > GroupMax {
		return nil, fmt.Errorf("%w: a frame of %d bytes", ErrDecode, len(z))
	}
	var h zstd.Header
	if err := h.Decode(z); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if !h.HasFCS || h.FrameContentSize > GroupMax {
		return nil, fmt.Errorf("%w: the frame declares %d bytes (known: %v)", ErrDecode, h.FrameContentSize, h.HasFCS)
	}
	size := int(h.FrameContentSize)
	out, err := decoder().DecodeAll(z, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if len(out) != size {
		return nil, fmt.Errorf("%w: %d bytes, the frame declares %d", ErrDecode, len(out), size)
	}
	return out, nil
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
// old ones. The
// key holds the store's epoch: a recovery that cuts frames starts a new
// one, so a frame written later at the same place is never served from
// an entry of the one it replaced. It is safe for concurrent use; a
// Cache's zero value holds nothing.
type Cache struct {
	mu   sync.Mutex
	ents [cacheEntries]cacheEnt
	tick uint64
	// busy holds the keys being decoded by Load, each with the channel
	// its decoder closes when done.
	busy map[Key]chan struct{}
	// decode is Decode, unless a test counts the calls.
	decode func([]byte) ([]byte, error)
}

// Key is where a group's frame is: the epoch of the projection that
// located it, the segment and the offset.
type Key struct {
	Epoch, Seg uint64
	Off        int64
}

const cacheEntries = 4

type cacheEnt struct {
	key  Key
	data []byte
	used uint64 // the cache's tick when last put or served
}

// Get returns the decoded group whose frame is at k.
// A nil Cache holds nothing.
func (c *Cache) Get(k Key) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(k)
}

// lookup is Get's search; the caller holds c.mu.
func (c *Cache) lookup(k Key) ([]byte, bool) {
	for i := range c.ents {
		if e := &c.ents[i]; e.data != nil && e.key == k {
			c.tick++
			e.used = c.tick
			return e.data, true
		}
	}
	return nil, false
}

// Load returns the group whose frame, z, is at k: from the cache, or
// decoded with Decode and kept. Concurrent Loads of one key decode it
// once: the others wait for the first and take what it kept (a diff's
// readers often want blobs of one group at the same time). A nil Cache
// decodes every time.
func (c *Cache) Load(k Key, z []byte) ([]byte, error) {
	if c == nil {
		return Decode(z)
	}
	for {
		c.mu.Lock()
		if g, ok := c.lookup(k); ok {
			c.mu.Unlock()
			return g, nil
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
	return g, err
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
	old := 0
	for i := range c.ents {
		if c.ents[i].used < c.ents[old].used {
			old = i
		}
	}
	c.tick++
	c.ents[old] = cacheEnt{k, data, c.tick}
}
