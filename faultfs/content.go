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

// content is a file's bytes: a slice of pages, where a nil page reads as
// zeros, and a size. Invariant: every byte at or beyond size reads as zero,
// so growing the size exposes zeros, as ftruncate does.
//
// Sharing is copy-on-write at two levels, so that a sync or a clone costs
// O(pages written since the last one), not O(file size): the pages slice
// itself is shared after a snapshot (shared), and copied before its first
// change; pages are frozen before they are shared, and copied before a
// write. fresh lists the pages this content allocated and has not frozen.
type content struct {
	pages  []*page
	size   int64
	shared bool
	fresh  []int64
}

// own makes the pages slice private before a change.
func (c *content) own() {
	if c.shared {
		c.pages = append(make([]*page, 0, len(c.pages)+len(c.pages)/4+1), c.pages...)
		c.shared = false
	}
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
		if pi < int64(len(c.pages)) && c.pages[pi] != nil {
			copy(p[n:n+k], c.pages[pi].b[po:])
		} else {
			clear(p[n : n+k])
		}
		n += k
	}
	return n
}

// writable returns page pi ready to be written, allocating or copying it.
func (c *content) writable(pi int64) *page {
	c.own()
	if pi >= int64(len(c.pages)) {
		if pi < int64(cap(c.pages)) {
			c.pages = c.pages[:pi+1]
		} else {
			np := make([]*page, pi+1, (pi+1)*5/4+1)
			copy(np, c.pages)
			c.pages = np
		}
	}
	pg := c.pages[pi]
	switch {
	case pg == nil:
		pg = new(page)
		c.pages[pi] = pg
		c.fresh = append(c.fresh, pi)
	case pg.frozen:
		cp := new(page)
		cp.b = pg.b
		pg = cp
		c.pages[pi] = pg
		c.fresh = append(c.fresh, pi)
	}
	return pg
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
	// Drop whole pages beyond n, zero the tail of the page holding n.
	keep := (n + pageSize - 1) / pageSize
	if keep < int64(len(c.pages)) {
		c.own()
		clear(c.pages[keep:])
		c.pages = c.pages[:keep]
	}
	if po := n % pageSize; po != 0 {
		pi := n / pageSize
		if pi < int64(len(c.pages)) && c.pages[pi] != nil {
			clear(c.writable(pi).b[po:])
		}
	}
}

// snapshot returns an immutable image of c sharing its pages and its pages
// slice. It freezes only the pages written since the last snapshot; no data
// and no slice is copied.
func (c *content) snapshot() content {
	for _, pi := range c.fresh {
		if pi < int64(len(c.pages)) && c.pages[pi] != nil {
			c.pages[pi].frozen = true
		}
	}
	c.fresh = c.fresh[:0]
	c.shared = true
	return content{pages: c.pages, size: c.size, shared: true}
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
