package core

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
)

// reclaimed reports whether a record's bytes are in a reclaimed segment.
func (g *gc) reclaimed(l index.Loc) bool { return !l.Loose && uint64(l.Segment) < g.cut }

// copyForward appends the live objects of the reclaimed segments to the
// journal, in frames of at most gcCopyBytes, each one commit's turn of the
// writer lock, and remembers where each went.
func (g *gc) copyForward(v *index.View) error {
	s := g.s
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	g.copies = map[ID]gcCopy{}
	var batch []txn.Obj
	var recs []gcCopy
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		s.view.mu.Lock()
		epoch := s.view.epoch
		s.view.mu.Unlock()
		t := &txn.Txn{Time: s.opts.Now().UTC(), Objs: batch, BuiltEpoch: epoch}
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
		data := make([]byte, l.Length)
		if err := r.ReadAt(uint64(l.Segment), l.Offset, data); err != nil {
			return errs.IO("gc: read "+id.String(), err)
		}
		if objects.IDOf(k, data) != id {
			return errs.Corrupt(s.jcfg.SegPath(uint64(l.Segment)), l.Offset, "%s %s does not hash to its id", k, id)
		}
		batch = append(batch, txn.Obj{Kind: k, ID: id, Data: data, Size: int64(len(data))})
		recs = append(recs, c)
		g.rep.Copied++
		g.rep.CopiedBytes += int64(len(data))
		if size += len(data); size >= gcCopyBytes {
			return flush()
		}
		return nil
	}
	err := v.ForEachChangeset(func(c index.CSRecord) error {
		if !g.reclaimed(c.Loc) || !g.live[c.ID] {
			return nil
		}
		cc := c
		return add(c.ID, objects.KindChangeset, c.Loc, gcCopy{cs: &cc})
	})
	if err == nil {
		err = v.ForEachObject(func(o index.ObjRecord) error {
			if o.Loc.Loose && !g.live[o.ID] {
				g.deadLoose = append(g.deadLoose, o.ID)
			}
			if !g.reclaimed(o.Loc) || !g.live[o.ID] {
				return nil
			}
			return add(o.ID, o.Kind, o.Loc, gcCopy{obj: o})
		})
	}
	if err != nil {
		return err
	}
	return flush()
}

// copyLocs finds where the copy frames put each copied object, scanning
// the frames from pos (seq) to the checkpoint at limit.
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
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	var t txn.Txn
	_, err := r.Scan(pos, seq, limit, func(fr *journal.Frame) error {
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
			loc := index.Loc{Segment: uint32(fr.Pos.Seg), Offset: base + int64(o.Off), Length: uint32(o.Size)}
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
	if n := len(b.Changesets) + len(b.Objects); n != len(g.copies) {
		return b, fmt.Errorf("%w: gc found %d of its %d copies in the journal", ErrIO, n, len(g.copies))
	}
	return b, nil
}

// rewrite replaces the runs of the current checkpoint by one that names
// the copies and drops every record of a reclaimed segment and of an
// unreachable loose object, in a checkpoint that differs from the current
// one only in its run list (compaction's protocol: new run durable,
// checkpoint naming it durable, only then are the old runs deleted).
func (g *gc) rewrite(c0 *ckpt.Checkpoint) error {
	s := g.s
	cur, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	defer cur.Proj.Idx.Close()
	extra, err := g.copyLocs(c0.Pos, c0.NextSeq, cur.NextSeq)
	if err != nil {
		return err
	}
	keepLoose := func(id ID, l index.Loc) bool { return !l.Loose || g.live[id] }
	keepCS := func(r *index.CSRecord) bool {
		ok := !g.reclaimed(r.Loc) && keepLoose(r.ID, r.Loc)
		if !ok {
			g.rep.RecordsDropped++
		}
		return ok
	}
	keepObj := func(r *index.ObjRecord) bool {
		ok := !g.reclaimed(r.Loc) && keepLoose(r.ID, r.Loc)
		if !ok {
			g.rep.RecordsDropped++
		}
		return ok
	}
	x := cur.Proj.Idx.Detach()
	defer x.Close()
	name := ckpt.RunName(cur.NextSeq, cur.Epoch, "g")
	for slices.Contains(cur.Runs, name) {
		name += "g"
	}
	run, err := index.RewriteRuns(s.fs, path.Join(s.dir, ckpt.IndexDir, name), cur.NextSeq, x.View(), keepCS, keepObj, extra)
	if err != nil {
		return errs.Index("gc: rewrite index runs", err)
	}
	run.Close()
	g.rep.RecordsDropped -= len(g.copies) // a copied record is replaced, not dropped
	installed, err := s.compactor.Replace(cur.Runs, name)
	if err != nil || !installed {
		if err == nil {
			err = fmt.Errorf("%w: gc could not install its index run", ErrIO)
		}
		return err
	}
	for _, n := range cur.Runs {
		_ = s.fs.Remove(path.Join(s.dir, ckpt.IndexDir, n))
	}
	return nil
}

// sweep deletes the reclaimed segments and the unreachable loose objects,
// which the installed checkpoint no longer names.
func (g *gc) sweep() error {
	s := g.s
	segs, err := s.jcfg.Segments()
	if err != nil {
		return errs.IO("gc: list journal", err)
	}
	s.view.mu.Lock()
	s.view.reader.Forget()
	s.view.mu.Unlock()
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
	for _, id := range g.deadLoose {
		_, file := loose.Path(s.dir, id)
		if err := s.fs.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errs.IO("gc: remove loose object", err)
		}
		g.rep.LooseRemoved++
	}
	return nil
}
