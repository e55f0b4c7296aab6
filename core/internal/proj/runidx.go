package proj

import (
	"bytes"
	"sort"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
)

// RunIdx is the store's object and changeset index: the records of the frames since the
// checkpoint in memory (tail, a MemIndex), and everything before it in the
// core/index run files the checkpoint names (newest first). Lookups consult
// the tail first, then the runs.
//
// Run records carry no frame sequence number of their own. Every one of them
// is at or below the checkpoint's position, which is durable by
// construction, so they are visible to every snapshot; a changeset keeps its
// frame's seq in the run's generation field (core does not use generations
// from the index), so a snapshot older than the checkpoint that wrote the run
// still does not see later changesets. Blobs and trees from runs report seq
// 0: they are durable, and reachable only through changesets.
type RunIdx struct {
	Mem   *MemIndex
	x     *index.Index // runs only; its own tail is never used
	names []string     // run file names (inside index/), newest first
	err   error        // first error a run lookup returned (Verify reports it)

	// pins counts the borrowers reading x without the projection mutex
	// held (a deep Verify's check of the runs). A RunIdx the projection
	// has dropped (retired) is closed by the last of them. Both fields are
	// guarded by the projection mutex, as the rest of the RunIdx is.
	pins    int
	retired bool
}

// NewRunIdx returns an index over the open runs x, named names (newest
// first), with an empty tail. It owns x.
func NewRunIdx(x *index.Index, names []string) *RunIdx {
	return &RunIdx{Mem: NewMemIndex(), x: x, names: names}
}

func (r *RunIdx) fail(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
}

// Close closes the runs.
func (r *RunIdx) Close() {
	if r.x != nil {
		r.x.Close()
	}
}

// Retire drops r from the projection: it is closed now, or by its last
// borrower. Caller holds the projection mutex.
func (r *RunIdx) Retire() {
	r.retired = true
	if r.pins == 0 {
		r.Close()
	}
}

// Pin lends r's runs to a reader that will use them without the projection
// mutex held; it must Unpin them. Caller holds the projection mutex.
func (r *RunIdx) Pin() *index.Index {
	r.pins++
	return r.x
}

// Unpin returns what Pin lent, closing r if it was retired meanwhile.
// Caller holds the projection mutex.
func (r *RunIdx) Unpin() {
	r.pins--
	if r.retired && r.pins == 0 {
		r.Close()
	}
}

// SetCache attaches the store's block cache to every run (nil: none).
func (r *RunIdx) SetCache(c *index.BlockCache) {
	if c == nil || r.x == nil {
		return
	}
	for _, run := range r.x.View().Runs() {
		run.SetCache(c)
	}
}

// Put records an object of a frame past the checkpoint in the tail.
func (r *RunIdx) Put(id objects.ID, loc Loc) { r.Mem.Put(id, loc) }

// AddDelta records a tail changeset under its delta hash.
func (r *RunIdx) AddDelta(h objects.Hash, id objects.ID) { r.Mem.AddDelta(h, id) }

func csLoc(c index.CSRecord) Loc {
	return Loc{Seq: c.Generation, Seg: uint64(c.Loc.Segment), Off: c.Loc.Offset, Size: int64(c.Loc.Length),
		Kind: objects.KindChangeset, Loose: c.Loc.Loose}
}

func objRecLoc(o index.ObjRecord) Loc {
	return Loc{Seg: uint64(o.Loc.Segment), Off: o.Loc.Offset, Size: int64(o.Loc.Length), Kind: o.Kind, Loose: o.Loc.Loose,
		Stored: o.Loc.Stored, Inner: o.Loc.Inner}
}

// Get returns the record of id, from the tail or else the newest run that
// holds it.
func (r *RunIdx) Get(id objects.ID) (Loc, bool) {
	if l, ok := r.Mem.Get(id); ok {
		return l, true
	}
	if r.x == nil || len(r.names) == 0 {
		return Loc{}, false
	}
	v := r.x.View()
	for _, run := range v.Runs() {
		if o, ok, err := run.Object(id); err != nil {
			r.fail(err)
		} else if ok {
			return objRecLoc(o), true
		}
		if c, ok, err := run.Changeset(id); err != nil {
			r.fail(err)
		} else if ok {
			return csLoc(c), true
		}
	}
	return Loc{}, false
}

// GetKind is get for a caller that knows the kind it wants: it searches
// only that kind's table of each run (changesets and objects are separate
// tables), so a lookup reads half the records Get would, and a miss
// touches one table per run instead of two. A record of another kind with
// the same id is reported absent from the runs (the tail still finds it,
// with its kind, for the caller to reject).
func (r *RunIdx) GetKind(id objects.ID, k objects.Kind) (Loc, bool) {
	if l, ok := r.Mem.Get(id); ok {
		return l, true
	}
	return r.RunKind(id, k)
}

// RunKind is getKind in the runs alone.
func (r *RunIdx) RunKind(id objects.ID, k objects.Kind) (Loc, bool) {
	if r.x == nil || len(r.names) == 0 {
		return Loc{}, false
	}
	for _, run := range r.x.View().Runs() {
		if k == objects.KindChangeset {
			if c, ok, err := run.Changeset(id); err != nil {
				r.fail(err)
			} else if ok {
				return csLoc(c), true
			}
		} else if o, ok, err := run.Object(id); err != nil {
			r.fail(err)
		} else if ok {
			return objRecLoc(o), true
		}
	}
	return Loc{}, false
}

// ByDelta returns the changesets with delta hash h, the tail's first.
func (r *RunIdx) ByDelta(h objects.Hash) []objects.ID {
	out := append([]objects.ID(nil), r.Mem.ByDelta(h)...)
	if r.x != nil && len(r.names) > 0 {
		ids, err := r.x.View().ByDelta(h)
		r.fail(err)
		for _, id := range ids {
			out = append(out, objects.ID(id))
		}
	}
	return out
}

// Prefix reads only the runs' changeset tables: blobs and trees never
// answer a changeset prefix.
func (r *RunIdx) Prefix(p objects.Prefix) []objects.ID {
	out := r.Mem.Prefix(p)
	if r.x != nil && len(r.names) > 0 {
		const max = 1 << 16
		for _, run := range r.x.View().Runs() {
			n := 0
			r.fail(run.ChangesetPrefix(p, func(id objects.ID, _ uint64) bool {
				out = append(out, objects.ID(id))
				n++
				return n < max
			}))
		}
		sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
		k := 0
		for i := range out {
			if i == 0 || out[i] != out[k-1] {
				out[k] = out[i]
				k++
			}
		}
		out = out[:k]
	}
	return out
}

// VisibleAt reports whether changeset id, which a lookup of this index
// returned, was brought by a frame at or below seq. A run holds only frames
// below its Meta (the next sequence number of the checkpoint that wrote
// it), so when every run's Meta is at most seq+1 a record from a run is
// visible without being read again; only a snapshot older than the newest
// checkpoint pays a lookup per candidate.
func (r *RunIdx) VisibleAt(id objects.ID, seq uint64) bool {
	if l, ok := r.Mem.Get(id); ok {
		return l.Seq <= seq
	}
	if r.x != nil && len(r.names) > 0 {
		all := true
		for _, run := range r.x.View().Runs() {
			all = all && run.Meta() <= seq+1
		}
		if all {
			return true
		}
	}
	l, ok := r.GetKind(id, objects.KindChangeset)
	return ok && l.Seq <= seq
}

// Count is MemIndex.Count over the tail and the runs.
func (r *RunIdx) Count() (int64, int64, int64) {
	var o, c, l int64
	r.Each(func(_ objects.ID, x Loc) {
		o++
		if x.Kind == objects.KindChangeset {
			c++
		}
		if x.Loose {
			l++
		}
	})
	return o, c, l
}

// Each visits every record once: the tail's, then the runs' not shadowed by
// the tail.
func (r *RunIdx) Each(fn func(objects.ID, Loc)) {
	r.Mem.Each(fn)
	if r.x == nil || len(r.names) == 0 {
		return
	}
	v := r.x.View()
	r.fail(v.ForEachChangeset(func(c index.CSRecord) error {
		if _, ok := r.Mem.Get(objects.ID(c.ID)); !ok {
			fn(objects.ID(c.ID), csLoc(c))
		}
		return nil
	}))
	r.fail(v.ForEachObject(func(o index.ObjRecord) error {
		if _, ok := r.Mem.Get(objects.ID(o.ID)); !ok {
			fn(objects.ID(o.ID), objRecLoc(o))
		}
		return nil
	}))
}

// EachDelta calls fn once for every delta hash, with its changesets of
// the tail and of the runs.
func (r *RunIdx) EachDelta(fn func(objects.Hash, []objects.ID)) {
	m := map[objects.Hash][]objects.ID{}
	r.Mem.EachDelta(func(h objects.Hash, ids []objects.ID) { m[h] = append(m[h], ids...) })
	if r.x != nil && len(r.names) > 0 {
		r.fail(r.x.View().ForEachChangeset(func(c index.CSRecord) error {
			m[c.Delta] = append(m[c.Delta], objects.ID(c.ID))
			return nil
		}))
	}
	for h, ids := range m {
		fn(h, ids)
	}
}

// BatchBetween returns the tail records of frames lo <= seq < hi as an index
// batch, changesets with their frame seq in the generation field.
func (r *RunIdx) BatchBetween(lo, hi uint64) index.Batch {
	var b index.Batch
	delta := map[objects.ID]objects.Hash{}
	r.Mem.EachDelta(func(h objects.Hash, ids []objects.ID) {
		for _, id := range ids {
			delta[id] = h
		}
	})
	r.Mem.Each(func(id objects.ID, l Loc) {
		if l.Seq < lo || l.Seq >= hi {
			return
		}
		loc := index.Loc{Segment: uint32(l.Seg), Offset: l.Off, Length: uint32(l.Size), Loose: l.Loose, Stored: l.Stored, Inner: l.Inner}
		if l.Kind == objects.KindChangeset {
			b.Changesets = append(b.Changesets, index.CSRecord{ID: objects.ID(id), Generation: l.Seq, Delta: delta[id], Loc: loc})
		} else {
			b.Objects = append(b.Objects, index.ObjRecord{ID: objects.ID(id), Kind: l.Kind, Loc: loc})
		}
	})
	return b
}

// Since returns a MemIndex with the tail records of frames >= lo.
//
// The new index is sized for as many records as the old one holds: the
// tail the next checkpoint takes is about as big as the last one's, and a
// map grown from empty rehashed itself on the way, in every process that
// replays the frames.
func (r *RunIdx) Since(lo uint64) *MemIndex {
	n := r.Mem.Len()
	m := &MemIndex{objs: make(map[objects.ID]Loc, n), deltas: make(map[objects.Hash][]objects.ID, n/4),
		cs: make([]objects.ID, 0, n/4)}
	r.Mem.Each(func(id objects.ID, l Loc) {
		if l.Seq >= lo {
			m.Put(id, l)
		}
	})
	r.Mem.EachDelta(func(h objects.Hash, ids []objects.ID) {
		for _, id := range ids {
			if l, ok := r.Mem.Get(id); ok && l.Seq >= lo {
				m.AddDelta(h, id)
			}
		}
	})
	return m
}

// HasRuns reports whether any run is open.
func (r *RunIdx) HasRuns() bool { return r.x != nil && len(r.names) > 0 }

// Detach hands the open runs over to the caller, who owns them from then
// on; r is left without runs.
func (r *RunIdx) Detach() *index.Index {
	x := r.x
	r.x = nil
	return x
}

// Err returns the first error a run lookup met since the last TakeErr,
// without clearing it.
func (r *RunIdx) Err() error { return r.err }

// Runs returns the open runs, newest first.
func (r *RunIdx) Runs() []*index.Run {
	if r.x == nil {
		return nil
	}
	return r.x.View().Runs()
}

// ExpectObjectChecks tells each run that about n presence checks of blobs
// and trees are coming (a checkpoint's batch), so that it loads its object
// filter before them when they would cost more than the load, and not
// otherwise. An error is kept for TakeErr.
func (r *RunIdx) ExpectObjectChecks(n int) {
	for _, run := range r.Runs() {
		r.fail(run.ExpectObjectChecks(n))
	}
}

// TakeErr returns (and clears) the first error a run lookup met since the
// last call, typed for the store's callers: a lookup that failed must not
// read as "not found".
func (r *RunIdx) TakeErr() error {
	err := r.err
	r.err = nil
	if err == nil {
		return nil
	}
	return errs.Index("index lookup", err)
}

// Has reports whether an object of kind k with this id is indexed: one run
// lookup per run (the table of its kind), used by replay to skip duplicate
// changesets and by a checkpoint to leave out of its new run the blobs and
// trees the runs already hold.
func (r *RunIdx) Has(id objects.ID, k objects.Kind) bool {
	if _, ok := r.Mem.Get(id); ok {
		return true
	}
	if r.x == nil || len(r.names) == 0 {
		return false
	}
	for _, run := range r.x.View().Runs() {
		var ok bool
		var err error
		if k == objects.KindChangeset {
			ok, err = run.HasChangeset(id)
		} else {
			ok, err = run.HasObject(id)
		}
		r.fail(err)
		if ok {
			return true
		}
	}
	return false
}
