package core

import (
	"bytes"
	"sort"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
)

// runIdx is the store's objIndex: the records of the frames since the
// checkpoint in memory (tail, a memIndex), and everything before it in the
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
type runIdx struct {
	mem   *memIndex
	x     *index.Index // runs only; its own tail is never used
	names []string     // run file names (inside index/), newest first
	err   error        // first error a run lookup returned (Verify reports it)

	// pins counts the borrowers reading x without Store.mu held (a deep
	// Verify's check of the runs). A runIdx the projection has dropped
	// (retired) is closed by the last of them. Both fields are guarded by
	// Store.mu.
	pins    int
	retired bool
}

func newRunIdx(x *index.Index, names []string) *runIdx {
	return &runIdx{mem: newMemIndex(), x: x, names: names}
}

func (r *runIdx) fail(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
}

func (r *runIdx) close() {
	if r.x != nil {
		r.x.Close()
	}
}

// retire drops r from the projection: it is closed now, or by its last
// borrower. Caller holds Store.mu.
func (r *runIdx) retire() {
	r.retired = true
	if r.pins == 0 {
		r.close()
	}
}

// pin lends r's runs to a reader that will use them without Store.mu
// held; it must unpin them. Caller holds Store.mu.
func (r *runIdx) pin() *index.Index {
	r.pins++
	return r.x
}

// unpin returns what pin lent, closing r if it was retired meanwhile.
// Caller holds Store.mu.
func (r *runIdx) unpin() {
	r.pins--
	if r.retired && r.pins == 0 {
		r.close()
	}
}

// setCache attaches the store's block cache to every run (nil: none).
func (r *runIdx) setCache(c *index.BlockCache) {
	if c == nil || r.x == nil {
		return
	}
	for _, run := range r.x.View().Runs() {
		run.SetCache(c)
	}
}

func (r *runIdx) put(id ID, loc objLoc) { r.mem.put(id, loc) }

func (r *runIdx) addDelta(h objects.Hash, id ID) { r.mem.addDelta(h, id) }

func csLoc(c index.CSRecord) objLoc {
	return objLoc{Seq: c.Generation, Seg: uint64(c.Loc.Segment), Off: c.Loc.Offset, Size: int64(c.Loc.Length),
		Kind: objects.KindChangeset, Loose: c.Loc.Loose}
}

func objRecLoc(o index.ObjRecord) objLoc {
	return objLoc{Seg: uint64(o.Loc.Segment), Off: o.Loc.Offset, Size: int64(o.Loc.Length), Kind: o.Kind, Loose: o.Loc.Loose}
}

func (r *runIdx) get(id ID) (objLoc, bool) {
	if l, ok := r.mem.get(id); ok {
		return l, true
	}
	if r.x == nil || len(r.names) == 0 {
		return objLoc{}, false
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
	return objLoc{}, false
}

// getKind is get for a caller that knows the kind it wants: it searches
// only that kind's table of each run (changesets and objects are separate
// tables), so a lookup reads half the records get would, and a miss
// touches one table per run instead of two. A record of another kind with
// the same id is reported absent from the runs (the tail still finds it,
// with its kind, for the caller to reject).
func (r *runIdx) getKind(id ID, k objects.Kind) (objLoc, bool) {
	if l, ok := r.mem.get(id); ok {
		return l, true
	}
	return r.runKind(id, k)
}

// runKind is getKind in the runs alone.
func (r *runIdx) runKind(id ID, k objects.Kind) (objLoc, bool) {
	if r.x == nil || len(r.names) == 0 {
		return objLoc{}, false
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
	return objLoc{}, false
}

func (r *runIdx) byDelta(h objects.Hash) []ID {
	out := append([]ID(nil), r.mem.byDelta(h)...)
	if r.x != nil && len(r.names) > 0 {
		ids, err := r.x.View().ByDelta(h)
		r.fail(err)
		for _, id := range ids {
			out = append(out, ID(id))
		}
	}
	return out
}

// prefix reads only the runs' changeset tables: blobs and trees never
// answer a changeset prefix.
func (r *runIdx) prefix(p objects.Prefix) []ID {
	out := r.mem.prefix(p)
	if r.x != nil && len(r.names) > 0 {
		const max = 1 << 16
		for _, run := range r.x.View().Runs() {
			n := 0
			r.fail(run.ChangesetPrefix(p, func(id objects.ID, _ uint64) bool {
				out = append(out, ID(id))
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

// visibleAt reports whether changeset id, which a lookup of this index
// returned, was brought by a frame at or below seq. A run holds only frames
// below its Meta (the next sequence number of the checkpoint that wrote
// it), so when every run's Meta is at most seq+1 a record from a run is
// visible without being read again; only a snapshot older than the newest
// checkpoint pays a lookup per candidate.
func (r *runIdx) visibleAt(id ID, seq uint64) bool {
	if l, ok := r.mem.get(id); ok {
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
	l, ok := r.getKind(id, objects.KindChangeset)
	return ok && l.Seq <= seq
}

func (r *runIdx) count() (int64, int64, int64) {
	var o, c, l int64
	r.each(func(_ ID, x objLoc) {
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

// each visits every record once: the tail's, then the runs' not shadowed by
// the tail.
func (r *runIdx) each(fn func(ID, objLoc)) {
	r.mem.each(fn)
	if r.x == nil || len(r.names) == 0 {
		return
	}
	v := r.x.View()
	r.fail(v.ForEachChangeset(func(c index.CSRecord) error {
		if _, ok := r.mem.get(ID(c.ID)); !ok {
			fn(ID(c.ID), csLoc(c))
		}
		return nil
	}))
	r.fail(v.ForEachObject(func(o index.ObjRecord) error {
		if _, ok := r.mem.get(ID(o.ID)); !ok {
			fn(ID(o.ID), objRecLoc(o))
		}
		return nil
	}))
}

func (r *runIdx) eachDelta(fn func(objects.Hash, []ID)) {
	m := map[objects.Hash][]ID{}
	r.mem.eachDelta(func(h objects.Hash, ids []ID) { m[h] = append(m[h], ids...) })
	if r.x != nil && len(r.names) > 0 {
		r.fail(r.x.View().ForEachChangeset(func(c index.CSRecord) error {
			m[c.Delta] = append(m[c.Delta], ID(c.ID))
			return nil
		}))
	}
	for h, ids := range m {
		fn(h, ids)
	}
}

// batchBetween returns the tail records of frames lo <= seq < hi as an index
// batch, changesets with their frame seq in the generation field.
func (r *runIdx) batchBetween(lo, hi uint64) index.Batch {
	var b index.Batch
	delta := map[ID]objects.Hash{}
	r.mem.eachDelta(func(h objects.Hash, ids []ID) {
		for _, id := range ids {
			delta[id] = h
		}
	})
	r.mem.each(func(id ID, l objLoc) {
		if l.Seq < lo || l.Seq >= hi {
			return
		}
		loc := index.Loc{Segment: uint32(l.Seg), Offset: l.Off, Length: uint32(l.Size), Loose: l.Loose}
		if l.Kind == objects.KindChangeset {
			b.Changesets = append(b.Changesets, index.CSRecord{ID: objects.ID(id), Generation: l.Seq, Delta: delta[id], Loc: loc})
		} else {
			b.Objects = append(b.Objects, index.ObjRecord{ID: objects.ID(id), Kind: l.Kind, Loc: loc})
		}
	})
	return b
}

// since returns a memIndex with the tail records of frames >= lo.
func (r *runIdx) since(lo uint64) *memIndex {
	m := newMemIndex()
	r.mem.each(func(id ID, l objLoc) {
		if l.Seq >= lo {
			m.put(id, l)
		}
	})
	r.mem.eachDelta(func(h objects.Hash, ids []ID) {
		for _, id := range ids {
			if l, ok := r.mem.get(id); ok && l.Seq >= lo {
				m.addDelta(h, id)
			}
		}
	})
	return m
}

// runs returns the open runs, newest first.
func (r *runIdx) runs() []*index.Run {
	if r.x == nil {
		return nil
	}
	return r.x.View().Runs()
}

// expectObjectChecks tells each run that about n presence checks of blobs
// and trees are coming (a checkpoint's batch), so that it loads its object
// filter before them when they would cost more than the load, and not
// otherwise. An error is kept for takeErr.
func (r *runIdx) expectObjectChecks(n int) {
	for _, run := range r.runs() {
		r.fail(run.ExpectObjectChecks(n))
	}
}

// takeErr returns (and clears) the first error a run lookup met since the
// last call, typed for the store's callers: a lookup that failed must not
// read as "not found".
func (r *runIdx) takeErr() error {
	err := r.err
	r.err = nil
	if err == nil {
		return nil
	}
	return errs.Index("index lookup", err)
}

// has reports whether an object of kind k with this id is indexed: one run
// lookup per run (the table of its kind), used by replay to skip duplicate
// changesets and by a checkpoint to leave out of its new run the blobs and
// trees the runs already hold.
func (r *runIdx) has(id ID, k objects.Kind) bool {
	if _, ok := r.mem.get(id); ok {
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
