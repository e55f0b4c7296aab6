package core

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// objLoc says where an object's bytes are and which frame brought it.
// Every lookup filters on seq, so one projection serves both the writer
// (which sees every appended frame) and readers (which see only the durable
// prefix).
type objLoc struct {
	Seq   uint64
	Seg   uint64
	Off   int64 // file offset of the encoding inside the segment (inline objects)
	Size  int64
	Kind  objects.Kind
	Loose bool
}

// objIndex is the object and changeset index the store projects from the
// journal. It is an interface so the in-memory maps can be replaced by
// core/index's on-disk runs without touching the commit path.
type objIndex interface {
	put(id ID, loc objLoc)
	get(id ID) (objLoc, bool)
	addDelta(h objects.Hash, id ID)
	byDelta(h objects.Hash) []ID
	// prefix returns every changeset id matching p.
	prefix(p objects.Prefix) []ID
	count() (objs, changesets, loose int64)
	each(fn func(ID, objLoc))
	eachDelta(fn func(objects.Hash, []ID))
}

// memIndex is the in-memory objIndex.
type memIndex struct {
	objs    map[ID]objLoc
	deltas  map[objects.Hash][]ID
	cs      []ID // changeset ids; sorted up to sortedN
	sortedN int
	loose   int64
}

func newMemIndex() *memIndex {
	return &memIndex{objs: map[ID]objLoc{}, deltas: map[objects.Hash][]ID{}}
}

// reserve sizes an empty index for about frames more frames (four objects
// a frame, a small commit's changeset, two trees and a blob), so that a
// replay of many frames does not grow its maps step by step: each step
// allocated and cleared a new table, fresh memory that a new process
// faults in page by page (docs/perf/store.md, "Page faults").
func (m *memIndex) reserve(frames uint64) {
	if len(m.objs) > 0 || frames < 64 {
		return
	}
	frames = min(frames, 1<<16)
	m.objs = make(map[ID]objLoc, 4*frames)
	m.deltas = make(map[objects.Hash][]ID, frames)
	m.cs = make([]ID, 0, frames)
}

func (m *memIndex) put(id ID, loc objLoc) {
	if _, ok := m.objs[id]; ok {
		return
	}
	m.objs[id] = loc
	if loc.Kind == objects.KindChangeset {
		m.cs = append(m.cs, id)
	}
	if loc.Loose {
		m.loose++
	}
}

func (m *memIndex) get(id ID) (objLoc, bool) { l, ok := m.objs[id]; return l, ok }

func (m *memIndex) addDelta(h objects.Hash, id ID) { m.deltas[h] = append(m.deltas[h], id) }

func (m *memIndex) byDelta(h objects.Hash) []ID { return m.deltas[h] }

func (m *memIndex) prefix(p objects.Prefix) []ID {
	if m.sortedN != len(m.cs) {
		sort.Slice(m.cs, func(i, j int) bool { return bytes.Compare(m.cs[i][:], m.cs[j][:]) < 0 })
		m.sortedN = len(m.cs)
	}
	low := p.Low()
	i := sort.Search(len(m.cs), func(i int) bool { return bytes.Compare(m.cs[i][:], low[:]) >= 0 })
	var out []ID
	for ; i < len(m.cs) && p.Match(m.cs[i]); i++ {
		out = append(out, m.cs[i])
	}
	return out
}

func (m *memIndex) each(fn func(ID, objLoc)) {
	for id, l := range m.objs {
		fn(id, l)
	}
}

func (m *memIndex) eachDelta(fn func(objects.Hash, []ID)) {
	for h, ids := range m.deltas {
		fn(h, ids)
	}
}

func (m *memIndex) count() (int64, int64, int64) {
	return int64(len(m.objs)), int64(len(m.cs)), m.loose
}

// proj is the store's in-memory projection of the journal: index, ref table,
// and the position it has replayed to.
type proj struct {
	idx     *runIdx
	refs    *refs.Table
	pos     journal.Pos // end of the last applied frame
	nextSeq uint64      // sequence number of the next frame to apply
	// ckptSeq is the next seq of the checkpoint whose runs the index
	// holds: frames before it are in the runs, later ones in the tail.
	ckptSeq uint64
	frames  int64 // frames applied since load
	// reflogLen is how many bytes of the reflog file hold the moves
	// before refs.Base() (see reflog.go).
	reflogLen int64
	// scratch is the transaction apply decodes each frame into.
	scratch txn.Txn
}

func newProj(pos journal.Pos, nextSeq uint64) *proj {
	return &proj{idx: newRunIdx(nil, nil), refs: refs.New(), pos: pos, nextSeq: nextSeq, ckptSeq: nextSeq}
}

// apply adds one frame to the projection. segPath names the segment for
// errors. It keeps nothing of fr.Payload, so replay's scan may lend it
// (journal.ScanBorrowed): what the projection keeps of a frame (locations,
// ref moves, delta hashes) is copied out of it.
func (p *proj) apply(fr *journal.Frame, segPath string) error {
	if fr.Kind != txn.FrameTxn && fr.Kind != txn.FrameFresh {
		return errs.Corrupt(segPath, fr.Pos.Off, "unknown frame kind %d", fr.Kind)
	}
	if err := txn.DecodeInto(&p.scratch, fr.Payload); err != nil {
		return errs.Corrupt(segPath, fr.Pos.Off, "frame %d: %v", fr.Seq, err)
	}
	return p.applyTxn(fr, &p.scratch, segPath)
}

// applyTxn adds frame fr, whose payload decodes to t, to the projection.
// The writer applies its own frame this way, from the transaction it
// encoded (encodeTxn sets each object's offset), so it hashes nothing under
// the writer lock.
func (p *proj) applyTxn(fr *journal.Frame, t *txn.Txn, segPath string) error {
	base := fr.Pos.Off + journal.FrameHeaderSize
	// A changeset already indexed (two writers made the same one) keeps
	// its first record, whose seq decides which snapshots see it; that
	// takes a lookup in every run. Blobs and trees are looked up in the
	// tail only: a copy of one the runs already hold costs a tail record
	// until the next checkpoint, which leaves it out of its run (see
	// checkpointLocked), and reads fall back to the run's record (see
	// readObjectSeq). Looking every object up in every run made replay,
	// which every open and every writer catching up does, spend most of
	// its time in run reads (62 us a frame at 5,000 changesets).
	// Duplicates are found before anything is added, so a run read that
	// fails leaves the projection as it was (and the error reaches the
	// caller: it is not "absent").
	// A fresh frame's writer checked this already (txn.FrameFresh).
	dup := make([]bool, len(t.Objs))
	for i, o := range t.Objs {
		if o.Kind == objects.KindChangeset && fr.Kind != txn.FrameFresh {
			dup[i] = p.idx.has(o.ID, o.Kind)
		}
	}
	if err := p.idx.takeErr(); err != nil {
		return err
	}
	for i, o := range t.Objs {
		loc := objLoc{Seq: fr.Seq, Seg: fr.Pos.Seg, Size: o.Size, Kind: o.Kind, Loose: o.Loose}
		if !o.Loose {
			loc.Off = base + int64(o.Off)
		}
		if _, again := p.idx.mem.get(o.ID); dup[i] || again {
			continue
		}
		p.idx.put(o.ID, loc)
		if o.Kind == objects.KindChangeset {
			cs, err := objects.DecodeChangeset(o.Data)
			if err != nil {
				return errs.Corrupt(segPath, loc.Off, "frame %d: changeset %s: %v", fr.Seq, o.ID, err)
			}
			p.idx.addDelta(cs.Delta, o.ID)
		}
	}
	p.refs.Apply(fr.Seq, t.Time, t.Moves)
	p.pos = fr.End()
	p.nextSeq = fr.Seq + 1
	p.frames++
	return nil
}

// String is for debugging.
func (p *proj) String() string { return fmt.Sprintf("proj{pos %s next %d}", p.pos, p.nextSeq) }
