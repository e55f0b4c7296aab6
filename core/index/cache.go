package index

import (
	"sync"
	"sync/atomic"
)

// BlockCache keeps the blocks of run records that lookups read (one
// bucket of one table each), shared by every run it is attached to and
// bounded in bytes, so that a long-lived reader's repeated lookups read no
// file. A block is kept only if every record in it passed its checksum and
// structure checks when it was read from the file (a block with a damaged
// record is used as read, checking the records the lookup touches, and is
// read again next time), so a lookup the cache serves answers exactly as
// one that reads the file: the cache changes what a lookup costs, never
// what it accepts. A run is immutable once written, so a block never goes
// stale; a run that is closed leaves its blocks to be evicted.
//
// Eviction is by generation: blocks go into cur; when cur holds half the
// budget it becomes old and the previous old is dropped; a hit in old
// moves the block back to cur.
type BlockCache struct {
	mu       sync.RWMutex // read-locked for a hit in cur, the common case
	cur, old map[blockKey][]byte
	curBytes int64
	half     int64
}

type blockKey struct {
	run    uint64
	tab    byte
	lo, hi uint64
}

// NewBlockCache returns a cache holding at most about bytes of blocks.
func NewBlockCache(bytes int64) *BlockCache {
	return &BlockCache{cur: map[blockKey][]byte{}, half: max(bytes, 0) / 2}
}

func (c *BlockCache) get(k blockKey) ([]byte, bool) {
	c.mu.RLock()
	b, ok := c.cur[k]
	c.mu.RUnlock()
	if ok {
		return b, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok = c.cur[k]; !ok {
		if b, ok = c.old[k]; ok {
			delete(c.old, k)
			c.addLocked(k, b)
		}
	}
	return b, ok
}

// put keeps b, which the caller must not change afterwards.
func (c *BlockCache) put(k blockKey, b []byte) {
	if int64(len(b)) > c.half {
		return
	}
	c.mu.Lock()
	if _, ok := c.cur[k]; !ok {
		c.addLocked(k, b)
	}
	c.mu.Unlock()
}

func (c *BlockCache) addLocked(k blockKey, b []byte) {
	if c.curBytes+int64(len(b)) > c.half {
		c.old, c.cur, c.curBytes = c.cur, make(map[blockKey][]byte, len(c.cur)), 0
	}
	c.cur[k] = b
	c.curBytes += int64(len(b))
}

// runIDs numbers runs for cache keys.
var runIDs atomic.Uint64

// SetCache makes the run's lookups keep the blocks they read in c (nil:
// no cache). It is safe to call concurrently with lookups.
func (r *Run) SetCache(c *BlockCache) {
	r.cacheID.CompareAndSwap(0, runIDs.Add(1))
	r.cache.Store(c)
}
