package core

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// reclaimed reports whether a record's bytes are in a reclaimed segment.
func (g *gc) reclaimed(l index.Loc) bool { return !l.Loose && uint64(l.Segment) < g.cut }

// copyForward appends the live objects of the reclaimed segments that are
// not copied yet to the journal, in frames of at most gcCopyBytes, each
// one commit's turn of the writer lock, and remembers where each went.
// Live loose objects get their record copied (their file stays), so that
// every record of the index still comes from a frame the journal holds.
func (g *gc) copyForward() error {
	s := g.s
	if g.copies == nil {
		g.copies = map[ID]gcCopy{}
	}
	var batch []txn.Obj
	var recs []gcCopy
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		s.view.mu.Lock()
		epoch, gen := s.view.epoch, s.view.gc
		s.view.mu.Unlock()
		t := &txn.Txn{Time: s.opts.Now().UTC(), Objs: batch, BuiltEpoch: epoch, BuiltGC: gen}
		if err := s.pipe.Commit(t, nil); err != nil {
			return err
		}
		for i, o := range batch {
			recs[i].seq = t.Seq
			g.copies[o.ID] = recs[i]
		}
		batch, recs, size = nil, nil, 0
		return nil
	}
	add := func(id ID, k objects.Kind, l index.Loc, c gcCopy) error {
		if !g.live[id] || (!l.Loose && !g.reclaimed(l)) {
			return nil
		}
		if _, done := g.copies[id]; done {
			return nil
		}
		o := txn.Obj{Kind: k, ID: id, Loose: true, Size: int64(l.Length)}
		if !l.Loose {
			data, err := g.readAt(id, k, l)
			if err != nil {
				return err
			}
			o = txn.Obj{Kind: k, ID: id, Data: data, Size: int64(len(data))}
			g.rep.Copied++
			g.rep.CopiedBytes += int64(len(data))
		}
		batch = append(batch, o)
		recs = append(recs, c)
		if size += len(o.Data) + 64; size >= gcCopyBytes {
			return flush()
		}
		return nil
	}
	css, objs, err := g.toCopy()
	if err != nil {
		return err
	}
	for i := range css {
		if err := add(css[i].ID, objects.KindChangeset, css[i].Loc, gcCopy{cs: &css[i]}); err != nil {
			return err
		}
	}
	for _, o := range objs {
		if err := add(o.ID, o.Kind, o.Loc, gcCopy{obj: o}); err != nil {
			return err
		}
	}
	return flush()
}

// toCopy lists the live changesets and objects of the reclaimed segments
// in the order copyForward copies them. Changesets go parents first (by
// generation): a copy frame left past the checkpoint is replayed in
// order, and in id order a child preceded its parent about half the time.
// Blobs and trees go in the order of their bytes in the journal, not of
// their ids: the blobs of a compressed group are then read one after
// another (one decode of the group, not one a blob) and land in a group
// together again.
func (g *gc) toCopy() (css []index.CSRecord, objs []index.ObjRecord, err error) {
	moves := func(l index.Loc) bool { return l.Loose || g.reclaimed(l) }
	err = g.x0.ForEachChangeset(func(c index.CSRecord) error {
		if g.live[c.ID] && moves(c.Loc) {
			css = append(css, c)
		}
		return nil
	})
	if err == nil {
		err = g.x0.ForEachObject(func(o index.ObjRecord) error {
			if g.live[o.ID] && moves(o.Loc) {
				objs = append(objs, o)
			}
			return nil
		})
	}
	if err != nil {
		return nil, nil, errs.Index("gc: read index runs", err)
	}
	slices.SortFunc(css, func(a, b index.CSRecord) int {
		return cmp.Or(cmp.Compare(a.Generation, b.Generation), bytes.Compare(a.ID[:], b.ID[:]))
	})
	slices.SortFunc(objs, func(a, b index.ObjRecord) int {
		x, y := a.Loc, b.Loc
		return cmp.Or(cmp.Compare(x.Segment, y.Segment), cmp.Compare(x.Offset, y.Offset), cmp.Compare(x.Inner, y.Inner))
	})
	return css, objs, nil
}

// copyLocs finds where the copy frames before limit put each copied
// object, scanning the frames from pos (seq). A copy at or past limit is
// in the journal after the checkpoint, which every open replays.
func (g *gc) copyLocs(pos journal.Pos, seq, limit uint64) (index.Batch, error) {
	s := g.s
	var b index.Batch
	seqs := map[uint64]bool{}
	for _, c := range g.copies {
		seqs[c.seq] = true
	}
	if len(seqs) == 0 {
		return b, nil
	}
	var t txn.Txn
	_, err := g.r.Scan(pos, seq, limit, func(fr *journal.Frame) error {
		if !seqs[fr.Seq] {
			return nil
		}
		if err := txn.DecodeFrame(&t, fr); err != nil {
			return errs.Corrupt(s.jcfg.SegPath(fr.Pos.Seg), fr.Pos.Off, "gc: frame %d: %v", fr.Seq, err)
		}
		base := fr.Pos.Off + fr.PayloadOff()
		for _, o := range t.Objs {
			c, ok := g.copies[o.ID]
			if !ok || c.seq != fr.Seq {
				continue
			}
			loc := index.Loc{Segment: uint32(fr.Pos.Seg), Offset: base + int64(o.Off), Length: uint32(o.Size), Stored: uint32(o.Stored),
				Inner: uint32(o.Inner)}
			if o.Loose {
				loc = index.Loc{Length: uint32(o.Size), Loose: true}
			}
			if c.cs != nil {
				rec := *c.cs
				rec.Loc = loc
				b.Changesets = append(b.Changesets, rec)
			} else {
				rec := c.obj
				rec.Loc = loc
				b.Objects = append(b.Objects, rec)
			}
		}
		return nil
	})
	if err != nil {
		return b, errs.IO("gc: scan copy frames", err)
	}
	return b, nil
}

// rewrite replaces the runs of the current checkpoint by one that names
// the copies and drops every record of a reclaimed segment and of an
// unreachable object of x0, in a checkpoint that differs from the current
// one only in its run list (compaction's protocol: new run durable,
// checkpoint naming it durable, only then are the old runs deleted).
func (g *gc) rewrite(c0 *ckpt.Checkpoint) error {
	s := g.s
	// MERGELOCK: no merge replaces the runs read here until the rewrite
	// of them is installed.
	ml, err := s.fs.Lock(s.lockPath(compact.LockName), s.opts.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return fmt.Errorf("compaction lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
		}
		return errs.IO("merge lock", err)
	}
	defer ml.Unlock()
	cur, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	defer cur.Proj.Idx.Close()
	extra, err := g.copyLocs(c0.Pos, c0.NextSeq, cur.NextSeq)
	if err != nil {
		return err
	}
	dead := map[ID]bool{}
	var late []index.ObjRecord // live, reclaimed and not copied
	lateCS := map[ID]index.CSRecord{}
	err = g.x0.ForEachChangeset(func(c index.CSRecord) error {
		n := len(late)
		g.classify(c.ID, objects.KindChangeset, c.Loc, dead, &late)
		if len(late) > n {
			lateCS[c.ID] = c
		}
		return nil
	})
	if err == nil {
		err = g.x0.ForEachObject(func(o index.ObjRecord) error {
			g.classify(o.ID, o.Kind, o.Loc, dead, &late)
			return nil
		})
	}
	if err != nil {
		return errs.Index("gc: read index runs", err)
	}
	// What a concurrent commit revived after the last copies goes into the
	// resurrection frame, durable before the install drops the old
	// records, and named by the new run like any copy.
	for _, o := range late {
		data, err := g.readAt(o.ID, o.Kind, o.Loc)
		if err != nil {
			return err
		}
		g.revive(o.ID, o.Kind, o.Loc, data)
	}
	more, err := g.resurrectNow(cur, late, lateCS)
	if err != nil {
		return err
	}
	extra.Changesets = append(extra.Changesets, more.Changesets...)
	extra.Objects = append(extra.Objects, more.Objects...)
	keep := func(id ID, l index.Loc) bool {
		if dead[id] {
			g.rep.RecordsDropped++ // a live one in a reclaimed segment is replaced by its copy
			return false
		}
		return !g.reclaimed(l)
	}
	if err := writeCollected(s.fs, s.dir, c0.NextSeq); err != nil {
		return err
	}
	return g.install(cur, extra, keep)
}

// install writes the rewritten run of cur's runs and installs it.
// Caller holds MERGELOCK.
func (g *gc) install(cur *ckpt.Checkpoint, extra index.Batch, keep func(ID, index.Loc) bool) error {
	s := g.s
	x := cur.Proj.Idx.Detach()
	defer x.Close()
	name := ckpt.RunName(cur.NextSeq, cur.Epoch, "g")
	for slices.Contains(cur.Runs, name) {
		name += "g"
	}
	run, err := index.RewriteRuns(s.fs, path.Join(s.dir, ckpt.IndexDir, name), cur.NextSeq, x.View(),
		func(r *index.CSRecord) bool { return keep(r.ID, r.Loc) },
		func(r *index.ObjRecord) bool { return keep(r.ID, r.Loc) }, extra)
	if err != nil {
		return errs.Index("gc: rewrite index runs", err)
	}
	run.Close()
	installed, err := s.compactor.Replace(cur.Runs, name)
	if err == nil && !installed {
		err = fmt.Errorf("%w: gc could not install its index run", ErrIO)
	}
	if err != nil {
		return err
	}
	g.dropped = true
	// The changesets this process's snapshots cached may be ones the new
	// index dropped.
	s.csc.Clear()
	for _, n := range cur.Runs {
		_ = s.fs.Remove(path.Join(s.dir, ckpt.IndexDir, n))
	}
	return nil
}

// classify sorts a record of x0: unreachable (dead), or live in a
// reclaimed segment without a copy (late).
func (g *gc) classify(id ID, k objects.Kind, l index.Loc, dead map[ID]bool, late *[]index.ObjRecord) {
	if !g.live[id] {
		dead[id] = true
		return
	}
	if _, ok := g.copies[id]; !ok && g.reclaimed(l) {
		*late = append(*late, index.ObjRecord{ID: id, Kind: k, Loc: l})
	}
}

// finish makes the last rescan, resurrects what it revived, installs the
// rewritten index (rewrite) and steps the gc generation, in one turn of the
// writer lock: every frame appended before it has been rescanned, and
// every commit appended after it that was built against an older index is
// built again (checkLocked).
func (g *gc) finish(c0 *ckpt.Checkpoint) error {
	s := g.s
	return s.writer.With(func() error {
		if err := g.rescan(); err != nil {
			return err
		}
		if err := g.rewrite(c0); err != nil {
			return err
		}
		if s.opts.weaken&testknobs.GCSkipsRebuild != 0 {
			return nil
		}
		end, ok, err := s.state.ReadStable(state.End, s.boot)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: gc: the published end is unreadable", ErrIO)
		}
		end.GC = (end.GC + 1) & state.GCMask
		if err := s.state.Write(state.End, end); err != nil {
			return err
		}
		s.view.mu.Lock()
		s.view.gc = end.GC
		s.view.mu.Unlock()
		return nil
	})
}

// resurrectNow appends g.resurrect (the late objects, read from x0) as one
// frame under the writer lock the caller holds, waits until it is durable,
// and returns the index records of its objects at their new places, for
// the rewritten run. Changesets keep their records' other fields (late
// holds their x0 records).
func (g *gc) resurrectNow(cur *ckpt.Checkpoint, late []index.ObjRecord, lateCS map[ID]index.CSRecord) (index.Batch, error) {
	s := g.s
	if len(g.resurrect) == 0 {
		return index.Batch{}, nil
	}
	t := &txn.Txn{Time: s.opts.Now().UTC(), Objs: g.resurrect}
	s.view.mu.Lock()
	t.BuiltEpoch, t.BuiltGC = s.view.epoch, s.view.gc
	s.view.mu.Unlock()
	payload, head := txn.EncodePayload(t)
	seq, epoch, err := s.appendLocked(t, payload, journal.PayloadDigests(payload, head), nil)
	if err != nil {
		return index.Batch{}, err
	}
	if err := s.syncer.To(seq, epoch, false); err != nil {
		return index.Batch{}, err
	}
	g.rep.Copied += len(g.resurrect)
	g.resurrect = nil
	for _, o := range late {
		c := gcCopy{seq: seq, obj: o}
		if cs, ok := lateCS[o.ID]; ok {
			c = gcCopy{seq: seq, cs: &cs}
		}
		g.copies[o.ID] = c
	}
	return g.copyLocs(cur.Pos, cur.NextSeq, seq+1)
}

// sweep deletes the reclaimed segments and the unreachable loose objects
// of x0, which the installed checkpoint no longer names.
func (g *gc) sweep() error {
	s := g.s
	// It deletes by path: never in a directory that took the store's
	// place since the last check under the lock.
	if err := s.checkDir(); err != nil {
		return err
	}
	segs, err := s.jcfg.Segments()
	if err != nil {
		return errs.IO("gc: list journal", err)
	}
	s.view.mu.Lock()
	s.view.reader.Forget()
	s.view.mu.Unlock()
	g.r.Forget()
	// Oldest first: a crash leaves the kept segments contiguous.
	for _, n := range segs {
		if n >= g.cut {
			break
		}
		if err := s.fs.Remove(s.jcfg.SegPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errs.IO("gc: remove "+journal.SegName(n), err)
		}
		g.rep.SegmentsRemoved++
	}
	var dead []ID
	if err := g.x0.ForEachObject(func(o index.ObjRecord) error {
		if o.Loc.Loose && !g.live[o.ID] {
			dead = append(dead, o.ID)
		}
		return nil
	}); err != nil {
		return errs.Index("gc: read index runs", err)
	}
	for _, id := range dead {
		_, file := loose.Path(s.dir, id)
		if err := s.fs.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errs.IO("gc: remove loose object", err)
		}
		g.rep.LooseRemoved++
	}
	return nil
}
