package faultfs

import (
	"bytes"
	"maps"
	"math/bits"
	"slices"
)

// SectorSize is the unit of torn writes: a power loss keeps, drops, zeroes or
// garbles each unsynced 512-byte sector independently.
const SectorSize = 512

// pageSize is the unit of copy-on-write sharing between a file, its durable
// image and crash clones. It is a multiple of SectorSize.
const pageSize = 4096

// page holds pageSize bytes of a file. A frozen page is shared (by a durable
// image or a clone) and is never written again; a writer copies it first. A
// page is frozen by the filesystem that owns it, under its lock, before it is
// shared, so no filesystem ever sees another one's unfrozen page.
type page struct {
	b      [pageSize]byte
	frozen bool
}

// zeroPage is a frozen page of zeros, shared by every whole-page write of
// zeros. Being frozen, it is never written: a writer copies it first.
var zeroPage = page{frozen: true}

// chunkPages is the number of page pointers per chunk (1 MiB of file).
const chunkPages = 256

// chunk is a fixed run of page pointers; a nil pointer reads as zeros.
// Frozen chunks are shared and copied before a change, as pages are.
type chunk struct {
	p      [chunkPages]*page
	frozen bool
}

// content is a file's bytes: a slice of chunks of pages, where a nil chunk
// or page reads as zeros, and a size. Invariant: every byte at or beyond
// size reads as zero, so growing the size exposes zeros, as ftruncate does.
//
// Sharing is copy-on-write at three levels, so that a sync or a clone costs
// O(pages written since the last one), not O(file size), and so does the
// first write after it: the chunks slice is shared after a snapshot
// (shared) and copied (one pointer per MiB) before its first change;
// chunks and pages are frozen before they are shared and copied before a
// change. fresh lists the chunks this content made or copied and has not
// frozen; every unfrozen page lies in one of them.
type content struct {
	chunks []*chunk
	size   int64
	shared bool
	fresh  []int64
}

// own makes the chunks slice private before a change.
func (c *content) own() {
	if c.shared {
		c.chunks = append(make([]*chunk, 0, len(c.chunks)+len(c.chunks)/4+1), c.chunks...)
		c.shared = false
	}
}

// page returns page pi, or nil if it reads as zeros.
func (c *content) page(pi int64) *page {
	ci := pi / chunkPages
	if ci >= int64(len(c.chunks)) || c.chunks[ci] == nil {
		return nil
	}
	return c.chunks[ci].p[pi%chunkPages]
}

// span locates byte done of the n bytes at off: the page pi holding it,
// its offset po in that page, and how many of the remaining bytes that page
// holds (k), so a loop over a range visits each page once.
func span(off int64, done, n int) (pi, po int64, k int) {
	at := off + int64(done)
	pi, po = at/pageSize, at%pageSize
	return pi, po, min(pageSize-int(po), n-done)
}

// readAt copies the bytes at off into p and reports how many it copied; it
// stops at size.
func (c *content) readAt(p []byte, off int64) int {
	if off >= c.size {
		return 0
	}
	if rem := c.size - off; int64(len(p)) > rem {
		p = p[:rem]
	}
	n := 0
	for n < len(p) {
		pi, po, k := span(off, n, len(p))
		if pg := c.page(pi); pg != nil {
			copy(p[n:n+k], pg.b[po:])
		} else {
			clear(p[n : n+k])
		}
		n += k
	}
	return n
}

// writableChunk returns chunk ci ready to be changed, making or copying it.
func (c *content) writableChunk(ci int64) *chunk {
	c.own()
	for int64(len(c.chunks)) <= ci {
		c.chunks = append(c.chunks, nil)
	}
	ch := c.chunks[ci]
	switch {
	case ch == nil:
		ch = new(chunk)
	case ch.frozen:
		cp := new(chunk)
		cp.p = ch.p
		ch = cp
	default:
		return ch
	}
	c.chunks[ci] = ch
	c.fresh = append(c.fresh, ci)
	return ch
}

// writable returns page pi ready to be written, allocating or copying it.
func (c *content) writable(pi int64) *page {
	ch := c.writableChunk(pi / chunkPages)
	slot := &ch.p[pi%chunkPages]
	switch pg := *slot; {
	case pg == nil:
		*slot = new(page)
	case pg.frozen:
		cp := new(page)
		cp.b = pg.b
		*slot = cp
	}
	return *slot
}

// writeAt stores p at off, growing size if needed, and marks the touched
// sectors in dirty (which may be nil).
func (c *content) writeAt(p []byte, off int64, dirty *bitset) {
	n := 0
	for n < len(p) {
		pi, po, k := span(off, n, len(p))
		if k == pageSize && bytes.Equal(p[n:n+k], zeroPage.b[:]) {
			// A whole page of zeros (a journal's zero fill) shares the
			// frozen zero page instead of allocating one: the bytes are
			// the same, and so is everything else (the page counts as
			// held, as a written one does), but the write, every clone and
			// the next read are cheaper.
			ch := c.writableChunk(pi / chunkPages)
			ch.p[pi%chunkPages] = &zeroPage
		} else {
			copy(c.writable(pi).b[po:], p[n:n+k])
		}
		n += k
	}
	if end := off + int64(len(p)); end > c.size {
		c.size = end
	}
	if dirty != nil && len(p) > 0 {
		dirty.setRange(off/SectorSize, (off+int64(len(p))-1)/SectorSize)
	}
}

// setSize changes the size. Shrinking zeroes the cut bytes (keeping the
// invariant) and marks in dirty the cut sectors that held a page (the
// others read as zeros before and after, unless an earlier change already
// marked them); growing exposes zeros.
func (c *content) setSize(n int64, dirty *bitset) {
	if n >= c.size {
		c.size = n
		return
	}
	old := c.size
	c.size = n
	if dirty != nil {
		for pi := n / pageSize; pi <= (old-1)/pageSize; {
			ci := pi / chunkPages
			if ci >= int64(len(c.chunks)) {
				break
			}
			if c.chunks[ci] == nil {
				pi = (ci + 1) * chunkPages
				continue
			}
			if c.chunks[ci].p[pi%chunkPages] != nil {
				lo, hi := max(n, pi*pageSize), min(old, (pi+1)*pageSize)-1
				dirty.setRange(lo/SectorSize, hi/SectorSize)
			}
			pi++
		}
	}
	// Drop whole chunks and pages beyond n, zero the tail of the page
	// holding n.
	keepPages := (n + pageSize - 1) / pageSize
	keepChunks := (keepPages + chunkPages - 1) / chunkPages
	if keepChunks < int64(len(c.chunks)) {
		c.own()
		clear(c.chunks[keepChunks:])
		c.chunks = c.chunks[:keepChunks]
	}
	if keepPages%chunkPages != 0 {
		ci := keepPages / chunkPages
		if ci < int64(len(c.chunks)) && c.chunks[ci] != nil {
			ch := c.writableChunk(ci)
			clear(ch.p[keepPages%chunkPages:])
		}
	}
	if po := n % pageSize; po != 0 {
		if pi := n / pageSize; c.page(pi) != nil {
			clear(c.writable(pi).b[po:])
		}
	}
}

// snapshot returns an immutable image of c sharing its chunks slice, chunks
// and pages. It freezes only what was written since the last snapshot; no
// data, chunk or slice is copied.
func (c *content) snapshot() content {
	for _, ci := range c.fresh {
		if ci < int64(len(c.chunks)) && c.chunks[ci] != nil && !c.chunks[ci].frozen {
			ch := c.chunks[ci]
			for _, pg := range ch.p {
				if pg != nil && !pg.frozen {
					pg.frozen = true
				}
			}
			ch.frozen = true
		}
	}
	c.fresh = c.fresh[:0]
	c.shared = true
	return content{chunks: c.chunks, size: c.size, shared: true}
}

// bitset is a sparse set of sector numbers: words of 64 sectors, keyed by
// word index, so that a write at a huge offset costs one word, not a dense
// bitmap up to it.
type bitset struct{ w map[int64]uint64 }

func (b *bitset) setRange(lo, hi int64) {
	if b.w == nil {
		b.w = map[int64]uint64{}
	}
	for wi := lo / 64; wi <= hi/64; wi++ {
		mask := ^uint64(0)
		if wi == lo/64 {
			mask &= ^uint64(0) << uint(lo%64)
		}
		if wi == hi/64 {
			mask &= ^uint64(0) >> uint(63-hi%64)
		}
		b.w[wi] |= mask
	}
}

// clear empties the set; a large map is dropped rather than cleared, since
// clearing costs its capacity.
func (b *bitset) clear() {
	if len(b.w) > 64 {
		b.w = nil
		return
	}
	clear(b.w)
}

func (b *bitset) empty() bool { return len(b.w) == 0 }

// each calls f for every member in ascending order.
func (b *bitset) each(f func(i int64)) {
	keys := make([]int64, 0, len(b.w))
	for k := range b.w {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, wi := range keys {
		w := b.w[wi]
		for w != 0 {
			bit := int64(bits.TrailingZeros64(w))
			f(wi*64 + bit)
			w &^= 1 << uint(bit)
		}
	}
}

func (b *bitset) clone() bitset {
	return bitset{w: maps.Clone(b.w)}
}
