package core

import (
	"fmt"
	"path"
	"slices"

	"github.com/swarmops/swarmops/core/internal/deepcheck"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// Verify checks the durable prefix of the store and reports every problem it
// finds, not just the first. It replays the whole journal from its first
// frame into a fresh projection, checking every frame's checksum and
// sequence, and compares the refs and the index the store answers from
// (checkpoint plus replay) with it. With deep, it also re-hashes every
// object (inline and loose), checks that every tree entry, changeset root,
// parent and ref names an object of the right kind, and that generations
// grow along every parent edge. The error is non-nil only when Verify
// itself could not run; problems are in the report.
func (s *Store) Verify(deep bool, progress func(done, total int)) (*VerifyReport, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	// A garbage collection removes the segments before a checkpoint: the
	// replay starts at the first one left, with the moves before it from
	// the reflog file, and what the collection dropped is not missing.
	basePos, baseSeq, err := s.journalBase()
	if err != nil {
		return nil, err
	}
	horizon, err := readCollected(s.fs, s.dir)
	if err != nil {
		return nil, err
	}
	v := &verifier{s: s, sn: sn, rep: &VerifyReport{}, fresh: proj.New(basePos, baseSeq), horizon: horizon}
	if baseSeq > 1 {
		if err := v.seedRefs(baseSeq); err != nil {
			return nil, err
		}
	}
	// The replay's index is sized from the store's at the outset: growing
	// a map of every object as the scan goes rehashes it about 20 times.
	v.fresh.Idx.Mem.SizeFor(s.objectCountHint())
	if deep {
		v.dc = deepcheck.New(s.fs, s.dir, v.fresh)
		v.dc.Collected = horizon > 0
		defer v.dc.EndHashing()
	}
	if err := v.replay(progress); err != nil {
		return v.rep, err
	}
	// With deep, the references of every object are checked by workers
	// of their own beside the index checks below (all of them only read
	// the replay); the hashing rode beside the scan.
	// In a collected store the index checks adjust the replay first
	// (compareIndex), so the object checks start after them.
	if deep {
		v.dc.EndHashing()
		if v.horizon == 0 {
			v.dc.Start()
		}
	}
	s.view.mu.Lock()
	v.compareIndex()
	refs := v.compareRefs()
	base, rlen := s.view.proj.Refs.Base(), s.view.proj.ReflogLen
	s.view.mu.Unlock()
	if deep && v.horizon > 0 {
		v.dc.Start()
	}
	v.compareReflog(base, rlen)
	v.checkRuns(deep)
	objN, _, _ := v.fresh.Idx.Count()
	v.rep.Objects = objN
	if !deep {
		return v.rep, nil
	}
	// The object checks' problems follow the index checks'.
	for _, m := range refs {
		v.dc.ExpectRef(m.Name, m.New)
	}
	for _, p := range v.dc.Wait() {
		v.rep.Problems = append(v.rep.Problems, VerifyProblem(p))
	}
	return v.rep, nil
}

// verifier is one Verify: the snapshot it checks, the replay of the whole
// journal it checks against (fresh), and with deep the object checks (dc).
type verifier struct {
	s     *Store
	sn    *Snapshot
	rep   *VerifyReport
	fresh *proj.Proj
	dc    *deepcheck.Check // nil unless deep
	// horizon is the last garbage collection's (0: none): objects of
	// frames before it that the index does not name were collected.
	horizon uint64
}

func (v *verifier) problem(file string, off int64, obj, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, VerifyProblem{File: file, Offset: off, Object: obj, Reason: fmt.Sprintf(format, args...)})
}

// replay scans the journal from its first frame up to the snapshot's
// durable frame into the fresh projection, checking every frame, and
// hands each frame's objects to the deep check.
func (v *verifier) replay(progress func(done, total int)) error {
	s, fresh, deep := v.s, v.fresh, v.dc != nil
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	total := int(v.sn.seq)
	var file string
	var fileSeg uint64
	res, err := r.Scan(fresh.Pos, fresh.NextSeq, v.sn.seq+1, func(fr *journal.Frame) error {
		if file == "" || fr.Pos.Seg != fileSeg {
			file, fileSeg = s.jcfg.SegPath(fr.Pos.Seg), fr.Pos.Seg
		}
		var t *txn.Txn
		if deep {
			t = &txn.Txn{}
			if txn.DecodeFrame(t, fr) != nil {
				t = nil
			}
		}
		// A fresh frame's writer found its changesets new to the store
		// (txn.FrameFresh), and replay trusts it: one the journal already
		// holds means the claim was false.
		if t != nil && fr.Kind == txn.FrameFresh {
			for _, o := range t.Objs {
				if o.Kind != objects.KindChangeset {
					continue
				}
				if l, ok := fresh.Idx.Mem.Get(o.ID); ok {
					v.problem(file, fr.Pos.Off, o.ID.String(), "frame %d says its changesets are new, but frame %d holds this one", fr.Seq, l.Seq)
				}
			}
		}
		// The payload decoded above is applied as it is (a second decode
		// was a tenth of a deep verify).
		apply := func() error { return fresh.Apply(fr, &s.jcfg) }
		if t != nil && (fr.Kind == txn.FrameTxn || fr.Kind == txn.FrameFresh) {
			apply = func() error { return fresh.ApplyTxn(fr, t, &s.jcfg) }
		}
		if err := apply(); err != nil {
			v.problem(file, fr.Pos.Off, "", "frame %d: %v", fr.Seq, err)
			fresh.Pos, fresh.NextSeq = fr.End(), fr.Seq+1
		}
		v.rep.Frames++
		if t != nil {
			v.dc.Frame(fr, file, t)
		}
		if progress != nil {
			progress(int(fr.Seq), total)
		}
		return nil
	})
	if err != nil {
		return errs.IO("verify: scan journal", err)
	}
	if res.NextSeq <= v.sn.seq {
		v.problem(s.jcfg.SegPath(res.End.Seg), res.End.Off, "", "frame %d is missing or damaged inside the durable prefix (durable through %d)", res.NextSeq, v.sn.seq)
	}
	return nil
}

// compareIndex holds the index the store answers from against the
// replay's, both ways. One pass over the store's index (its tail, then its
// runs in order) looks each record up in the replay's: a lookup of every
// replayed object in the runs cost a block read each, a third of a deep
// verify at 100k. Caller holds s.view.mu.
func (v *verifier) compareIndex() {
	s, seq := v.s, v.sn.seq
	replayed := v.fresh.Idx.Mem
	matched := 0
	s.view.proj.Idx.Each(func(id ID, got proj.Loc) {
		l, ok := replayed.Get(id)
		if !ok {
			if got.Seq <= seq {
				v.problem("", 0, id.String(), "index names an object no frame up to %d carries", seq)
			}
			return
		}
		matched++
		if got != l && got.Seq > l.Seq && l.Kind != objects.KindChangeset {
			// The tail may hold a later copy of a blob or tree a run
			// holds (see Proj.ApplyTxn): the run's record is the one to
			// match.
			if rl, rok := s.view.proj.Idx.RunKind(id, l.Kind); rok {
				got = rl
			}
		}
		if got.Seq == 0 && l.Kind != objects.KindChangeset {
			// Blobs and trees from index runs carry no seq (see
			// proj.RunIdx).
			got.Seq = l.Seq
		}
		if got != l && v.horizon > 0 && got.Kind == l.Kind && v.holds(id, got) {
			// A copy gc made: a changeset keeps the seq of its first
			// frame, which orders it before its children.
			if l.Kind == objects.KindChangeset {
				l.Seq = got.Seq
				replayed.Set(id, l)
			}
			return
		}
		if got != l {
			v.problem("", 0, id.String(), "index says %+v, journal says %+v", got, l)
		}
	})
	if n, _, _ := replayed.Count(); int64(matched) != n {
		// Some replayed object is not in the index: find which. One of a
		// frame before the gc horizon was collected, and leaves the
		// replay, so that the deep check does not look at it either.
		replayed.Each(func(id ID, l proj.Loc) {
			if _, ok := s.view.proj.Idx.Get(id); !ok {
				if l.Seq < v.horizon {
					replayed.Delete(id)
					return
				}
				v.problem("", 0, id.String(), "object in the journal (frame %d) is missing from the index", l.Seq)
			}
		})
	}
}

// compareRefs holds the ref table against the replay's, and returns the
// replay's refs. Caller holds s.view.mu.
func (v *verifier) compareRefs() []refs.Move {
	want, got := v.fresh.Refs.List(v.sn.seq), v.s.view.proj.Refs.List(v.sn.seq)
	wm := map[string]ID{}
	for _, m := range want {
		wm[m.Name] = m.New
	}
	for _, m := range got {
		if wm[m.Name] != m.New {
			v.problem("", 0, m.New.String(), "ref %q is %s in the ref table but %s in the journal", m.Name, m.New, wm[m.Name])
		}
		delete(wm, m.Name)
	}
	for n, id := range wm {
		v.problem("", 0, id.String(), "ref %q is missing from the ref table", n)
	}
	wp, _ := v.fresh.Refs.Protected(v.sn.seq)
	gp, _ := v.s.view.proj.Refs.Protected(v.sn.seq)
	if !slices.Equal(wp, gp) {
		v.problem("", 0, "", "protected patterns are %q in the ref table but %q in the journal", gp, wp)
	}
	return want
}

// compareReflog checks that the reflog file holds exactly the journal's
// moves before the checkpoint's position (base), in its first rlen bytes.
func (v *verifier) compareReflog(base uint64, rlen int64) {
	if base == 0 || base > v.sn.seq+1 {
		return
	}
	rf := path.Join(v.s.dir, reflog.Name)
	older, err := reflog.Read(v.s.fs, v.s.dir, rlen)
	if err != nil {
		v.problem(rf, 0, "", "%v", err)
		return
	}
	for _, n := range v.fresh.Refs.Names() {
		want, got := v.fresh.Refs.Log(n, base-1), older[n]
		if len(want) != len(got) {
			v.problem(rf, 0, "", "reflog of %q has %d moves before frame %d; the journal has %d", n, len(got), base, len(want))
			continue
		}
		for i := range want {
			if !want[i].Time.Equal(got[i].Time) || want[i].Seq != got[i].Seq || want[i].Old != got[i].Old || want[i].New != got[i].New || want[i].Origin != got[i].Origin {
				v.problem(rf, 0, "", "reflog of %q, move %d: %+v; the journal has %+v", n, i, got[i], want[i])
				break
			}
		}
		delete(older, n)
	}
	for n := range older {
		v.problem(rf, 0, "", "reflog has moves of %q, which no frame before %d moves", n, base)
	}
}

// checkRuns reports a failed run lookup of the comparisons, and with deep
// checks every index run in full. The runs are checked without s.view.mu held,
// so that commits go on; a checkpoint or merge installed meanwhile retires
// them, and the pin keeps them open until the check is done.
func (v *verifier) checkRuns(deep bool) {
	s := v.s
	s.view.mu.Lock()
	if err := s.view.proj.Idx.Err(); err != nil {
		v.problem("", 0, "", "index run lookup failed: %v", err)
	}
	pinned := s.view.proj.Idx
	runX := pinned.Pin()
	s.view.mu.Unlock()
	defer func() {
		s.view.mu.Lock()
		pinned.Unpin()
		s.view.mu.Unlock()
	}()
	if deep && runX != nil {
		if err := runX.View().Verify(); err != nil {
			v.problem("", 0, "", "index runs: %v", err)
		}
	}
}

// objectCountHint is about how many objects the store holds: its tail's,
// and the record counts in its runs' headers (an object in two runs counts
// twice).
func (s *Store) objectCountHint() int {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	n := s.view.proj.Idx.Mem.Len()
	for _, r := range s.view.proj.Idx.Runs() {
		n += int(r.Changesets() + r.Objects())
	}
	return n
}
