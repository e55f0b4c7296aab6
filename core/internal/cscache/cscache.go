// Package cscache is the cache of changesets a store's snapshots have read
// and verified (see Cache).
package cscache

import (
	"slices"

	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/objects"
)

// entryOverhead approximates what one cached changeset costs beyond its
// variable-length fields: the map slot, the key, the entry and the decoded
// struct.
const entryOverhead = 240

// Cache holds changesets that snapshots of one Store have read, verified
// against their ids and decoded, so a long-lived process (an MCP server)
// answers a repeated get from memory: no index search, no read, no hash, no
// decode.
//
// Visibility (C4): an entry carries the sequence number of the frame that
// brought the changeset, the same number the index gives, and a snapshot
// serves it only if that number is at or below its own. Entries are added
// only by snapshot reads, which see only frames at or below a published
// durable position, so the cache never holds a changeset that a crash could
// take away, and it holds no misses: a changeset another process commits
// becomes visible to the next snapshot through the index as before. Since
// every entry came from a durable frame, and a recovery cuts only frames
// past the durable position, an entry's sequence number stays right across
// a recovery; the cache is emptied anyway whenever the projection is
// reloaded for a new epoch, so that nothing read under an old epoch is kept
// on that argument alone.
//
// Eviction is by generation: entries go into cur; when cur holds half the
// byte budget it becomes old and the previous old is dropped; a hit in old
// moves the entry back to cur. The least recently used half is dropped at
// once, and a hit in cur costs one map lookup under a read lock, so
// concurrent readers of one Store do not queue behind each other.
type Cache struct {
	mu       lockorder.RWMutex[lockorder.Cache] // read-locked for a hit in cur, the common case
	cur, old map[objects.ID]entry
	curBytes int64
	half     int64 // bytes one generation may hold; 0: caching is off
}

type entry struct {
	seq  uint64
	cs   *objects.Changeset // shared: handed out only as copies
	size int64
}

// New returns a cache of about bytes (0 or less: caching is off).
func New(bytes int64) *Cache {
	c := &Cache{half: max(bytes, 0) / 2}
	c.cur = map[objects.ID]entry{}
	return c
}

// Get returns a copy of the changeset cached for id and the sequence number
// of the frame that brought it.
func (c *Cache) Get(id objects.ID) (*objects.Changeset, uint64, bool) {
	if c.half == 0 {
		return nil, 0, false
	}
	c.mu.RLock()
	e, ok := c.cur[id]
	c.mu.RUnlock()
	if !ok {
		c.mu.Lock()
		if e, ok = c.cur[id]; !ok {
			if e, ok = c.old[id]; ok {
				delete(c.old, id)
				c.addLocked(id, e)
			}
		}
		c.mu.Unlock()
	}
	if !ok {
		return nil, 0, false
	}
	return cloneChangeset(e.cs), e.seq, true
}

// Put caches cs, verified and brought by frame seq. The caller keeps using
// cs: the cache stores its own copy.
func (c *Cache) Put(id objects.ID, seq uint64, cs *objects.Changeset) {
	if c.half == 0 {
		return
	}
	e := entry{seq: seq, cs: cloneChangeset(cs),
		size: entryOverhead + int64(32*len(cs.Parents)+len(cs.Agent)+len(cs.Message))}
	c.mu.Lock()
	if _, ok := c.cur[id]; !ok {
		c.addLocked(id, e)
	}
	c.mu.Unlock()
}

func (c *Cache) addLocked(id objects.ID, e entry) {
	if c.curBytes+e.size > c.half {
		c.old, c.cur, c.curBytes = c.cur, make(map[objects.ID]entry, len(c.cur)), 0
	}
	c.cur[id] = e
	c.curBytes += e.size
}

// Clear drops every entry.
func (c *Cache) Clear() {
	c.mu.Lock()
	c.cur, c.old, c.curBytes = map[objects.ID]entry{}, nil, 0
	c.mu.Unlock()
}

// cloneChangeset copies cs deeply enough that the copy's owner may change
// any field without touching cs (strings are immutable and shared).
func cloneChangeset(cs *objects.Changeset) *objects.Changeset {
	c := *cs
	c.Parents = slices.Clone(cs.Parents)
	return &c
}
