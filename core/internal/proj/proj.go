package proj

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

// Loc says where an object's bytes are and which frame brought it.
// Every lookup filters on seq, so one projection serves both the writer
// (which sees every appended frame) and readers (which see only the durable
// prefix).
type Loc struct {
	Seq   uint64
	Seg   uint64
	Off   int64 // file offset of the encoding inside the segment (inline objects)
	Size  int64 // the encoding's length
	Kind  objects.Kind
	Loose bool
	// Stored is the length of the zstd frame at Off of the compressed
	// group that holds an inline blob (zblob), and Inner where the blob's
	// bytes start in what the frame decodes to; 0: the encoding itself is
	// at Off.
	Stored, Inner uint32
}

// StoredLen is how many bytes of the segment at Off hold the object.
func (l Loc) StoredLen() int64 {
	if l.Stored > 0 {
		return int64(l.Stored)
	}
	return l.Size
}

// MemIndex is the in-memory index of the frames past the checkpoint (the
// projection's tail): maps by id and by delta hash, and the changeset ids,
// sorted when a prefix lookup needs them. Of the two in-memory indexes the
// store once had, this is the faster: a lookup is one map probe, where a
// sorted-chunk tail searched a chunk per doubling of its size.
type MemIndex struct {
	objs    map[objects.ID]Loc
	deltas  map[objects.Hash][]objects.ID
	cs      []objects.ID // changeset ids; sorted up to sortedN
	sortedN int
	loose   int64
}

// NewMemIndex returns an empty index.
func NewMemIndex() *MemIndex {
	return &MemIndex{objs: map[objects.ID]Loc{}, deltas: map[objects.Hash][]objects.ID{}}
}

// Reserve sizes an empty index for about frames more frames (four objects
// a frame, a small commit's changeset, two trees and a blob), so that a
// replay of many frames does not grow its maps step by step: each step
// allocated and cleared a new table, fresh memory that a new process
// faults in page by page.
func (m *MemIndex) Reserve(frames uint64) {
	if len(m.objs) > 0 || frames < 64 {
		return
	}
	frames = min(frames, 1<<16)
	m.objs = make(map[objects.ID]Loc, 4*frames)
	m.deltas = make(map[objects.Hash][]objects.ID, frames)
	m.cs = make([]objects.ID, 0, frames)
}

// Put records id at loc, unless id is already recorded: the first record
// of an object stays.
func (m *MemIndex) Put(id objects.ID, loc Loc) {
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

// Get returns the record of id.
func (m *MemIndex) Get(id objects.ID) (Loc, bool) { l, ok := m.objs[id]; return l, ok }

// AddDelta records changeset id under its delta hash h.
func (m *MemIndex) AddDelta(h objects.Hash, id objects.ID) { m.deltas[h] = append(m.deltas[h], id) }

// ByDelta returns the changesets recorded under delta hash h; the caller
// must not modify the result.
func (m *MemIndex) ByDelta(h objects.Hash) []objects.ID { return m.deltas[h] }

// Prefix returns every changeset id matching p, sorted.
func (m *MemIndex) Prefix(p objects.Prefix) []objects.ID {
	if m.sortedN != len(m.cs) {
		sort.Slice(m.cs, func(i, j int) bool { return bytes.Compare(m.cs[i][:], m.cs[j][:]) < 0 })
		m.sortedN = len(m.cs)
	}
	low := p.Low()
	i := sort.Search(len(m.cs), func(i int) bool { return bytes.Compare(m.cs[i][:], low[:]) >= 0 })
	var out []objects.ID
	for ; i < len(m.cs) && p.Match(m.cs[i]); i++ {
		out = append(out, m.cs[i])
	}
	return out
}

// Each calls fn for every record.
func (m *MemIndex) Each(fn func(objects.ID, Loc)) {
	for id, l := range m.objs {
		fn(id, l)
	}
}

// EachDelta calls fn for every delta hash with its changesets.
func (m *MemIndex) EachDelta(fn func(objects.Hash, []objects.ID)) {
	for h, ids := range m.deltas {
		fn(h, ids)
	}
}

// Count returns the number of records, of changesets and of loose objects.
func (m *MemIndex) Count() (int64, int64, int64) {
	return int64(len(m.objs)), int64(len(m.cs)), m.loose
}

// Len returns the number of records.
func (m *MemIndex) Len() int { return len(m.objs) }

// SizeFor sizes an empty index for n records at once (Verify's replay of
// the whole journal knows about how many it will hold).
func (m *MemIndex) SizeFor(n int) {
	if len(m.objs) == 0 {
		m.objs = make(map[objects.ID]Loc, n)
	}
}

// Set records id at loc, replacing any record of id, and Delete drops the
// record of id. Neither keeps the counts or the sorted changesets: they
// exist for tests that damage a tail to see Verify report it.
func (m *MemIndex) Set(id objects.ID, loc Loc) { m.objs[id] = loc }

// Delete: see Set.
func (m *MemIndex) Delete(id objects.ID) { delete(m.objs, id) }

// Proj is the store's in-memory projection of the journal: index, ref
// table, and the position it has replayed to. It takes no lock: its owner
// guards it (core's projection mutex).
type Proj struct {
	Idx     *RunIdx
	Refs    *refs.Table
	Pos     journal.Pos // end of the last applied frame
	NextSeq uint64      // sequence number of the next frame to apply
	// CkptSeq is the next seq of the checkpoint whose runs the index
	// holds: frames before it are in the runs, later ones in the tail.
	CkptSeq uint64
	Frames  int64 // frames applied since load
	// ReflogLen is how many bytes of the reflog file hold the moves
	// before Refs.Base() (see core/internal/reflog).
	ReflogLen int64
	// scratch is the transaction apply decodes each frame into.
	scratch txn.Txn
}

// New returns an empty projection whose next frame is nextSeq at pos.
func New(pos journal.Pos, nextSeq uint64) *Proj {
	return &Proj{Idx: NewRunIdx(nil, nil), Refs: refs.New(), Pos: pos, NextSeq: nextSeq, CkptSeq: nextSeq}
}

// Apply adds one frame to the projection. jc names the frame's segment in
// an error; the path is made only then, not for every frame replayed. It
// keeps nothing of fr.Payload, so replay's scan may lend it
// (journal.ScanBorrowed): what the projection keeps of a frame (locations,
// ref moves, delta hashes) is copied out of it.
func (p *Proj) Apply(fr *journal.Frame, jc *journal.Config) error {
	if fr.Kind != txn.FrameTxn && fr.Kind != txn.FrameFresh {
		return errs.Corrupt(jc.SegPath(fr.Pos.Seg), fr.Pos.Off, "unknown frame kind %d", fr.Kind)
	}
	if err := txn.DecodeFrame(&p.scratch, fr); err != nil {
		return errs.Corrupt(jc.SegPath(fr.Pos.Seg), fr.Pos.Off, "frame %d: %v", fr.Seq, err)
	}
	return p.ApplyTxn(fr, &p.scratch, jc)
}

// ApplyTxn adds frame fr, whose payload decodes to t, to the projection.
// The writer applies its own frame this way, from the transaction it
// encoded (txn.Encode sets each object's offset), so it hashes nothing under
// the writer lock.
func (p *Proj) ApplyTxn(fr *journal.Frame, t *txn.Txn, jc *journal.Config) error {
	base := fr.Pos.Off + fr.PayloadOff()
	// A changeset already indexed (two writers made the same one) keeps
	// its first record, whose seq decides which snapshots see it; that
	// takes a lookup in every run. Blobs and trees are looked up in the
	// tail only: a copy of one the runs already hold costs a tail record
	// until the next checkpoint, which leaves it out of its run (see
	// the checkpoint's batch), and reads fall back to the run's record
	// (RunKind). Looking every object up in every run made replay,
	// which every open and every writer catching up does, spend most of
	// its time in run reads (62 us a frame at 5,000 changesets).
	// Duplicates are found before anything is added, so a run read that
	// fails leaves the projection as it was (and the error reaches the
	// caller: it is not "absent").
	// A fresh frame's writer checked this already (txn.FrameFresh).
	dup := make([]bool, len(t.Objs))
	for i, o := range t.Objs {
		if o.Kind == objects.KindChangeset && fr.Kind != txn.FrameFresh {
			dup[i] = p.Idx.Has(o.ID, o.Kind)
		}
	}
	if err := p.Idx.TakeErr(); err != nil {
		return err
	}
	for i, o := range t.Objs {
		loc := Loc{Seq: fr.Seq, Seg: fr.Pos.Seg, Size: o.Size, Kind: o.Kind, Loose: o.Loose, Stored: uint32(o.Stored),
			Inner: uint32(o.Inner)}
		if !o.Loose {
			loc.Off = base + int64(o.Off)
		}
		if _, again := p.Idx.Mem.Get(o.ID); dup[i] || again {
			continue
		}
		p.Idx.Put(o.ID, loc)
		if o.Kind == objects.KindChangeset {
			cs, err := objects.DecodeChangeset(o.Data)
			if err != nil {
				return errs.Corrupt(jc.SegPath(fr.Pos.Seg), loc.Off, "frame %d: changeset %s: %v", fr.Seq, o.ID, err)
			}
			p.Idx.AddDelta(cs.Delta, o.ID)
		}
	}
	p.Refs.Apply(fr.Seq, t.Time, t.Origin, t.Moves)
	p.Refs.ApplyProtections(fr.Seq, t.Protect)
	p.Pos = fr.End()
	p.NextSeq = fr.Seq + 1
	p.Frames++
	return nil
}

// String is for debugging.
func (p *Proj) String() string { return fmt.Sprintf("proj{pos %s next %d}", p.Pos, p.NextSeq) }
