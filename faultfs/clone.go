package faultfs

import (
	"fmt"
	"math/rand/v2"
)

// Model is what a crash keeps of the state a MemFS held when it happened.
type Model uint8

// The crash models.
const (
	// Strict keeps exactly the durable state: synced file bytes and sizes,
	// synced directory entries. It is a power loss that loses everything it
	// may lose.
	Strict Model = iota + 1
	// Torn keeps the durable state plus a seeded choice of unsynced changes:
	// each unsynced sector kept, dropped, zeroed or filled with garbage, each
	// file's size the synced or the current one, and each unsynced directory
	// operation kept or dropped as a whole.
	Torn
	// ProcessCrash keeps everything written, because the page cache
	// survives the death of a process; unsynced changes stay unsynced and the
	// boot id stays the same.
	ProcessCrash
)

// String returns the name ParseModel accepts.
func (m Model) String() string {
	switch m {
	case Strict:
		return "strict"
	case Torn:
		return "torn"
	case ProcessCrash:
		return "process"
	}
	return fmt.Sprintf("model(%d)", uint8(m))
}

// Models lists every model, power-loss models first.
func Models() []Model { return []Model{Strict, Torn, ProcessCrash} }

// ParseModel maps "strict", "torn" or "process" to its Model.
func ParseModel(s string) (Model, error) {
	for _, m := range Models() {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("faultfs: unknown crash model %q (want strict, torn or process)", s)
}

// CrashClone returns a new, independent MemFS holding a state a crash at
// this moment could leave, while m keeps running unchanged. The clone has no
// open files and no locks. Strict and Torn clones get a new boot id;
// ProcessCrash keeps m's. Torn clones are a pure function of m's state and
// seed. An unknown model panics: models are constants in code, never input
// (parse input with ParseModel).
//
// A clone shares file data with m copy-on-write, so it costs a few small
// allocations per file and directory (plus the pages holding unsynced
// sectors under Torn), not a copy of the data.
func (m *MemFS) CrashClone(model Model, seed int64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &MemFS{ino: m.ino, boot: newBootID(), tick: m.tick, clock: m.clock}
	switch model {
	case Strict:
		b := cloner{src: m, dst: c, nodes: map[*inode]*inode{}}
		c.root = b.durable(m.root)
	case Torn:
		b := cloner{src: m, dst: c, nodes: map[*inode]*inode{},
			rng:  rand.New(rand.NewPCG(uint64(seed), 0x5eed_70a1)),
			keep: map[*dirOp]bool{}}
		c.root = b.torn(m.root)
	case ProcessCrash:
		c.boot = m.boot
		c.seq = m.seq
		b := cloner{src: m, dst: c, nodes: map[*inode]*inode{}, ops: map[*dirOp]*dirOp{}}
		c.root = b.all(m.root)
	default:
		panic(fmt.Sprintf("faultfs: CrashClone with unknown model %d", model))
	}
	return c
}

type cloner struct {
	src, dst *MemFS
	nodes    map[*inode]*inode
	rng      *rand.Rand
	keep     map[*dirOp]bool
	ops      map[*dirOp]*dirOp
}

// durable copies the durable state reachable from directory d.
func (b *cloner) durable(d *inode) *inode {
	return b.copyOf(d, func(d, c *inode) {
		c.live = d.durable.snapshot()
		c.durable = d.durable.snapshot()
	}, func(d, c *inode) {
		b.settle(c, d.synced, nil, b.durable)
	})
}

// copyOf returns the copy of d this clone has made, or makes it: a new
// shell registered as d's copy, which file (for a file) or dir (for a
// directory) then fills in. A node reached by two names, a hard link, is
// copied once.
func (b *cloner) copyOf(d *inode, file, dir func(d, c *inode)) *inode {
	if c, ok := b.nodes[d]; ok {
		return c
	}
	c := d.shell()
	b.nodes[d] = c
	if d.dir {
		dir(d, c)
	} else {
		file(d, c)
	}
	return c
}

// settle gives directory copy c the copies cp makes of the nodes in names,
// as its entries and as its synced names alike, since a power loss leaves
// only durable names. The names are visited in order where order is not
// nil: a torn copy draws from the seeded rng, so the map's order must not
// choose what it draws.
func (b *cloner) settle(c *inode, names map[string]*inode, order []string, cp func(*inode) *inode) {
	c.entries = make(map[string]*inode, len(names))
	c.synced = make(map[string]*inode, len(names))
	put := func(name string) {
		cn := cp(names[name])
		c.entries[name] = cn
		c.synced[name] = cn
	}
	if order != nil {
		for _, name := range order {
			put(name)
		}
		return
	}
	for name := range names {
		put(name)
	}
}

// keeps decides, once per operation, whether a torn crash kept it.
func (b *cloner) keeps(op *dirOp) bool {
	k, ok := b.keep[op]
	if !ok {
		k = b.rng.IntN(2) == 0
		b.keep[op] = k
	}
	return k
}

// torn copies a torn state reachable from directory d: names are visited in
// sorted order so that the seed alone fixes every choice.
func (b *cloner) torn(d *inode) *inode { return b.copyOf(d, b.tornFile, b.tornDir) }

// tornDir fills in c, the copy of directory d, with its synced names and
// the unsynced operations the seeded rng keeps.
func (b *cloner) tornDir(d, c *inode) {
	names := make(map[string]*inode, len(d.synced))
	for k, v := range d.synced {
		names[k] = v
	}
	for _, op := range d.pending {
		if op.applied || !b.keeps(op) {
			continue
		}
		op.applyTo(func(x *inode) map[string]*inode {
			if x == d {
				return names
			}
			return nil
		})
	}
	b.settle(c, names, sortedNames(names), b.torn)
}

// Sector fates under Torn.
const (
	fateKept = iota
	fateDropped
	fateZeroed
	fateGarbage
)

func (b *cloner) tornFile(d, c *inode) {
	img := d.durable.snapshot()
	size := img.size
	if d.live.size != size && b.rng.IntN(2) == 0 {
		size = d.live.size
	}
	if size > img.size {
		img.size = size // bytes beyond the old size read as zeros
	}
	var buf [SectorSize]byte
	d.dirty.each(func(s int64) {
		off := s * SectorSize
		fate := b.rng.IntN(4)
		if off >= size {
			return
		}
		switch fate {
		case fateKept:
			clear(buf[:])
			d.live.readAt(buf[:], off)
		case fateDropped:
			return
		case fateZeroed:
			clear(buf[:])
		case fateGarbage:
			for i := range buf {
				buf[i] = byte(b.rng.Uint32())
			}
		}
		img.writeAt(buf[:], off, nil)
	})
	img.setSize(size, nil)
	c.live = img.snapshot()
	c.durable = img.snapshot()
}

// all copies everything, durable and not, for a process crash.
func (b *cloner) all(d *inode) *inode {
	return b.copyOf(d, func(d, c *inode) {
		c.live = d.live.snapshot()
		c.durable = d.durable.snapshot()
		c.dirty = d.dirty.clone()
	}, b.allDir)
}

// allDir fills in c, the copy of directory d, with every name, synced or
// not, and the operations not yet applied.
func (b *cloner) allDir(d, c *inode) {
	c.entries = make(map[string]*inode, len(d.entries))
	c.synced = make(map[string]*inode, len(d.synced))
	for name, n := range d.entries {
		c.entries[name] = b.all(n)
	}
	for name, n := range d.synced {
		c.synced[name] = b.all(n)
	}
	for _, op := range d.pending {
		if !op.applied {
			c.pending = append(c.pending, b.op(op))
		}
	}
}

func (b *cloner) op(op *dirOp) *dirOp {
	if c, ok := b.ops[op]; ok {
		return c
	}
	c := &dirOp{seq: op.seq, kind: op.kind, oldName: op.oldName, newName: op.newName}
	b.ops[op] = c
	c.node = b.all(op.node)
	if op.from != nil {
		c.from = b.all(op.from)
	}
	if op.to != nil {
		c.to = b.all(op.to)
	}
	return c
}
