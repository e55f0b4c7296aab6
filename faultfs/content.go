package faultfs

// SectorSize is the unit of torn writes: a power loss keeps, drops, zeroes or
// garbles each unsynced 512-byte sector independently.
const SectorSize = 512

// pageSize is the unit of copy-on-write sharing between a file, its durable
// image and crash clones. It is a multiple of SectorSize.
const pageSize = 4096

const sectorsPerPage = pageSize / SectorSize

// page holds pageSize bytes of a file. A frozen page is shared (by a durable
// image or a clone) and is never written again; a writer copies it first. A
// page is frozen by the filesystem that owns it, under its lock, before it is
// shared, so no filesystem ever sees another one's unfrozen page.
type page struct {
	b      [pageSize]byte
	frozen bool
}

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
		pi, po := (off+int64(n))/pageSize, (off+int64(n))%pageSize
		k := pageSize - int(po)
		if k > len(p)-n {
			k = len(p) - n
		}
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
		pi, po := (off+int64(n))/pageSize, (off+int64(n))%pageSize
		k := pageSize - int(po)
		if k > len(p)-n {
			k = len(p) - n
		}
		copy(c.writable(pi).b[po:], p[n:n+k])
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
// invariant) and marks their sectors in dirty; growing exposes zeros.
func (c *content) setSize(n int64, dirty *bitset) {
	if n >= c.size {
		c.size = n
		return
	}
	old := c.size
	c.size = n
	if dirty != nil {
		dirty.setRange(n/SectorSize, (old-1)/SectorSize)
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
				if pg != nil {
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

// bitset is a growable set of sector numbers.
type bitset struct{ w []uint64 }

func (b *bitset) set(i int64) {
	wi := i / 64
	for int64(len(b.w)) <= wi {
		b.w = append(b.w, 0)
	}
	b.w[wi] |= 1 << uint(i%64)
}

func (b *bitset) setRange(lo, hi int64) {
	for i := lo; i <= hi; i++ {
		if i%64 == 0 && i+63 <= hi {
			wi := i / 64
			for int64(len(b.w)) <= wi {
				b.w = append(b.w, 0)
			}
			b.w[wi] = ^uint64(0)
			i += 63
			continue
		}
		b.set(i)
	}
}

func (b *bitset) clear() { b.w = b.w[:0] }

func (b *bitset) empty() bool {
	for _, w := range b.w {
		if w != 0 {
			return false
		}
	}
	return true
}

// each calls f for every member in ascending order.
func (b *bitset) each(f func(i int64)) {
	for wi, w := range b.w {
		for w != 0 {
			bit := int64(0)
			for w&(1<<uint(bit)) == 0 {
				bit++
			}
			f(int64(wi)*64 + bit)
			w &^= 1 << uint(bit)
		}
	}
}

func (b *bitset) clone() bitset {
	return bitset{w: append([]uint64(nil), b.w...)}
}
