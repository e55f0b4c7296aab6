package core

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
)

// read returns object id of kind k from the store's projection or, once
// the rewritten index is installed, from x0: an object the store no longer
// names but whose bytes stay on disk until the sweep. An object read from
// x0 is resurrected: something appended since the mark names it.
func (g *gc) read(id ID, k objects.Kind) ([]byte, error) {
	data, err := g.s.readObject(id, k, ^uint64(0), true)
	if err == nil || !errors.Is(err, ErrNotFound) || !g.dropped {
		return data, err
	}
	rec, ok, err := g.x0.Object(id)
	if err != nil {
		return nil, errs.Index("gc: look up "+id.String(), err)
	}
	if !ok || rec.Kind != k {
		return nil, fmt.Errorf("%w: %s %s", ErrNotFound, k, id)
	}
	if data, err = g.readAt(id, k, rec.Loc); err != nil {
		return nil, err
	}
	g.revive(id, k, rec.Loc, data)
	return data, nil
}

// readAt reads the bytes of id at l and checks them against the id.
func (g *gc) readAt(id ID, k objects.Kind, l index.Loc) ([]byte, error) {
	s := g.s
	var data []byte
	file := ""
	if l.Loose {
		data = make([]byte, l.Length)
		_, file = loose.Path(s.dir, id)
		if err := loose.Read(s.fs, file, data); err != nil {
			return nil, err
		}
	} else {
		file = s.jcfg.SegPath(uint64(l.Segment))
		var err error
		data, err = s.readInline(g.r, &g.groups, 0, inlineAt{uint64(l.Segment), l.Offset, int64(l.Length), l.Stored, l.Inner})
		if err != nil {
			return nil, errs.IO("gc: read "+id.String(), err)
		}
	}
	if objects.IDOf(k, data) != id {
		return nil, errs.Corrupt(file, l.Offset, "%s %s does not hash to its id", k, id)
	}
	return data, nil
}

// revive queues id for the resurrection frame: inline with its bytes, or
// loose as a record (its file stays).
func (g *gc) revive(id ID, k objects.Kind, l index.Loc, data []byte) {
	o := txn.Obj{Kind: k, ID: id, Data: data, Size: int64(len(data))}
	if l.Loose {
		o.Loose, o.Data = true, nil
	}
	g.resurrect = append(g.resurrect, o)
}

// markBlob marks a blob, which needs no reading, unless the installed
// index has dropped it: then it is read from x0 and resurrected.
func (g *gc) markBlob(id ID) error {
	if g.live[id] {
		return nil
	}
	g.live[id] = true
	if !g.dropped {
		return nil
	}
	s := g.s
	s.view.mu.Lock()
	_, ok := s.view.proj.Idx.GetKind(id, objects.KindBlob)
	err := s.view.proj.Idx.TakeErr()
	s.view.mu.Unlock()
	if ok || err != nil {
		return err
	}
	_, err = g.read(id, objects.KindBlob)
	return err
}

// walkAny marks id, whatever its kind: a lease may name a changeset, a
// tree or a blob. An id the store does not hold is skipped: a lease may
// name work not yet committed.
func (g *gc) walkAny(id ID) error {
	if g.live[id] {
		return nil
	}
	for _, k := range []objects.Kind{objects.KindChangeset, objects.KindTree, objects.KindBlob} {
		_, err := g.read(id, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		switch k {
		case objects.KindChangeset:
			return g.walkChangeset(id)
		case objects.KindTree:
			return g.walkTree(id)
		}
		g.live[id] = true
		return nil
	}
	return nil
}

// walkOlderRoot walks a changeset of a reflog move from before the last
// collection's horizon, which that collection removed if its shorter
// retention let the move go and nothing else reached it: then it is no
// root, and what only it reached went with it. The index has no record of
// such a changeset; one it names is read and walked as any root, so a
// damaged one is still an error.
func (g *gc) walkOlderRoot(id ID) error {
	if !g.live[id] {
		_, err := g.read(id, objects.KindChangeset)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	g.rep.ReflogRoots++
	return g.walkChangeset(id)
}

// walkChangeset marks a changeset, its tree and its ancestry.
func (g *gc) walkChangeset(id ID) error {
	stack := []ID{id}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if g.live[id] {
			continue
		}
		cs, err := readAs(g, id, objects.KindChangeset, objects.DecodeChangeset)
		if err != nil {
			return err
		}
		g.live[id] = true
		if err := g.walkTree(cs.Root); err != nil {
			return err
		}
		stack = append(stack, cs.Parents...)
	}
	return nil
}

// walkTree marks a tree and everything under it, stopping at trees
// already marked.
func (g *gc) walkTree(id ID) error {
	if g.live[id] {
		return nil
	}
	t, err := readAs(g, id, objects.KindTree, objects.DecodeTree)
	if err != nil {
		return err
	}
	g.live[id] = true
	for _, e := range t.Entries {
		if e.Mode.IsDir() {
			err = g.walkTree(e.ID)
		} else {
			err = g.markBlob(e.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rescan marks what the frames appended since the last scan name, up to
// the published end: their changesets (a commit's tree may name objects by
// id that the mark found unreachable) and the new values of their ref
// moves (a ref set back to an old changeset).
func (g *gc) rescan() error {
	s := g.s
	end, ok, err := s.state.ReadStable(state.End, s.boot)
	if err != nil {
		return err
	}
	if !ok || end.NextSeq <= g.scanSeq {
		return nil
	}
	var roots []ID
	var t txn.Txn
	res, err := g.r.ScanHeads(g.scanPos, g.scanSeq, end.NextSeq, func(fr *journal.Frame) error {
		if err := txn.DecodeFrame(&t, fr); err != nil {
			return errs.Corrupt(s.jcfg.SegPath(fr.Pos.Seg), fr.Pos.Off, "gc: frame %d: %v", fr.Seq, err)
		}
		for _, o := range t.Objs {
			if o.Kind == objects.KindChangeset {
				roots = append(roots, o.ID)
			}
		}
		for _, m := range t.Moves {
			if !m.New.IsZero() {
				roots = append(roots, m.New)
			}
		}
		return nil
	})
	if err != nil {
		return errs.IO("gc: rescan journal", err)
	}
	if res.NextSeq < end.NextSeq {
		return fmt.Errorf("%w: gc rescan stopped at frame %d of %d", ErrIO, res.NextSeq, end.NextSeq)
	}
	g.scanPos, g.scanSeq = res.End, res.NextSeq
	for _, id := range roots {
		if err := g.walkChangeset(id); err != nil {
			return err
		}
	}
	return nil
}

// readMoved reads id from where the current checkpoint's runs put it, after
// a read at the projection's location failed with err: a garbage
// collection in another process copied it forward and removed its segment
// (ok false: not that case). Collections that follow each other may move
// it again, and remove that segment too, between the checkpoint's read and
// the object's: a read that finds its segment gone reads the checkpoint
// again, a few times.
func (s *Store) readMoved(id ID, k objects.Kind, err error) (data []byte, ok bool, _ error) {
	for attempt := 0; attempt < 4 && errors.Is(err, fs.ErrNotExist); attempt++ {
		data, ok, err = s.readMovedOnce(id, k)
		if ok || err == nil {
			return data, ok, err
		}
	}
	return nil, false, nil
}

// readMovedOnce is one attempt of readMoved. It returns the read's error
// with ok false when the object's segment is gone again.
func (s *Store) readMovedOnce(id ID, k objects.Kind) (data []byte, ok bool, _ error) {
	c, cerr := ckpt.Read(s.fs, s.dir)
	if cerr != nil {
		return nil, false, nil
	}
	defer c.Proj.Idx.Close()
	l, found := c.Proj.Idx.GetKind(id, k)
	if !found || l.Kind != k || l.Loose {
		return nil, false, nil
	}
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	data, err := s.readInline(r, nil, 0, inlineAt{l.Seg, l.Off, l.Size, l.Stored, l.Inner})
	var ce *errs.CorruptError
	if errors.As(err, &ce) {
		return nil, true, err
	}
	if err != nil {
		return nil, false, err
	}
	if objects.IDOf(k, data) != id {
		return nil, true, errs.Corrupt(s.jcfg.SegPath(l.Seg), l.Off, "%s %s does not hash to its id", k, id)
	}
	return data, true, nil
}

// readAs reads id as an object of kind k and decodes it with dec; bytes
// dec refuses are corruption, naming the kind and the id.
func readAs[T any](g *gc, id ID, k objects.Kind, dec func([]byte) (T, error)) (T, error) {
	data, err := g.read(id, k)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := dec(data)
	if err != nil {
		return v, errs.Corrupt("", 0, "gc: %s %s: %v", k, id, err)
	}
	return v, nil
}
