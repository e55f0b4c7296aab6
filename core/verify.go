package core

import (
	"fmt"
	"path"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
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
	rep := &VerifyReport{}
	problem := func(file string, off int64, obj, format string, args ...any) {
		rep.Problems = append(rep.Problems, VerifyProblem{File: file, Offset: off, Object: obj, Reason: fmt.Sprintf(format, args...)})
	}
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	fresh := newProj(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1)
	total := int(sn.seq)
	type inline struct {
		kind objects.Kind
		data []byte
		file string
		off  int64
	}
	var objs map[ID]inline
	if deep {
		objs = map[ID]inline{}
	}
	res, err := r.Scan(fresh.pos, 1, sn.seq+1, func(fr *journal.Frame) error {
		file := s.jcfg.SegPath(fr.Pos.Seg)
		var t *txn
		if deep {
			t, _ = decodeTxn(fr.Payload)
		}
		// A fresh frame's writer found its changesets new to the store
		// (frameTxnFresh), and replay trusts it: one the journal already
		// holds means the claim was false.
		if t != nil && fr.Kind == frameTxnFresh {
			for _, o := range t.Objs {
				if l, ok := fresh.idx.mem.get(o.ID); ok && o.Kind == objects.KindChangeset {
					problem(file, fr.Pos.Off, o.ID.String(), "frame %d says its changesets are new, but frame %d holds this one", fr.Seq, l.Seq)
				}
			}
		}
		if err := fresh.apply(fr, file); err != nil {
			problem(file, fr.Pos.Off, "", "frame %d: %v", fr.Seq, err)
			fresh.pos, fresh.nextSeq = fr.End(), fr.Seq+1
		}
		rep.Frames++
		if t != nil {
			for _, o := range t.Objs {
				if !o.Loose {
					objs[o.ID] = inline{o.Kind, o.Data, file, fr.Pos.Off + journal.FrameHeaderSize + int64(o.off)}
				}
			}
		}
		if progress != nil {
			progress(int(fr.Seq), total)
		}
		return nil
	})
	if err != nil {
		return rep, ioErr("verify: scan journal", err)
	}
	if res.NextSeq <= sn.seq {
		problem(s.jcfg.SegPath(res.End.Seg), res.End.Off, "", "frame %d is missing or damaged inside the durable prefix (durable through %d)", res.NextSeq, sn.seq)
	}
	s.mu.Lock()
	// Index and refs must agree with the replay.
	fresh.idx.each(func(id ID, l objLoc) {
		got, ok := s.p.idx.get(id)
		if ok && got != l && got.Seq > l.Seq && l.Kind != objects.KindChangeset {
			// The tail may hold a later copy of a blob or tree a run
			// holds (see applyTxn): the run's record is the one to match.
			if rl, rok := s.p.idx.runKind(id, l.Kind); rok {
				got = rl
			}
		}
		if !ok {
			problem("", 0, id.String(), "object in the journal (frame %d) is missing from the index", l.Seq)
		} else if got.Seq == 0 && l.Kind != objects.KindChangeset {
			// Blobs and trees from index runs carry no seq (see runIdx).
			if got.Seq = l.Seq; got != l {
				problem("", 0, id.String(), "index says %+v, journal says %+v", got, l)
			}
		} else if got != l {
			problem("", 0, id.String(), "index says %+v, journal says %+v", got, l)
		}
	})
	s.p.idx.each(func(id ID, l objLoc) {
		if _, ok := fresh.idx.get(id); !ok && l.Seq <= sn.seq {
			problem("", 0, id.String(), "index names an object no frame up to %d carries", sn.seq)
		}
	})
	want, got := fresh.refs.List(sn.seq), s.p.refs.List(sn.seq)
	wm := map[string]ID{}
	for _, m := range want {
		wm[m.Name] = m.New
	}
	for _, m := range got {
		if wm[m.Name] != m.New {
			problem("", 0, m.New.String(), "ref %q is %s in the ref table but %s in the journal", m.Name, m.New, wm[m.Name])
		}
		delete(wm, m.Name)
	}
	for n, id := range wm {
		problem("", 0, id.String(), "ref %q is missing from the ref table", n)
	}
	base, rlen := s.p.refs.Base(), s.p.reflogLen
	s.mu.Unlock()
	// The reflog file must hold exactly the journal's moves before the
	// checkpoint's position.
	if base > 0 && base <= sn.seq+1 {
		rf := path.Join(s.dir, reflogName)
		older, err := readReflog(s.fs, s.dir, rlen)
		if err != nil {
			problem(rf, 0, "", "%v", err)
		} else {
			for _, n := range fresh.refs.Names() {
				want, got := fresh.refs.Log(n, base-1), older[n]
				if len(want) != len(got) {
					problem(rf, 0, "", "reflog of %q has %d moves before frame %d; the journal has %d", n, len(got), base, len(want))
					continue
				}
				for i := range want {
					if !want[i].Time.Equal(got[i].Time) || want[i].Seq != got[i].Seq || want[i].Old != got[i].Old || want[i].New != got[i].New {
						problem(rf, 0, "", "reflog of %q, move %d: %+v; the journal has %+v", n, i, got[i], want[i])
						break
					}
				}
				delete(older, n)
			}
			for n := range older {
				problem(rf, 0, "", "reflog has moves of %q, which no frame before %d moves", n, base)
			}
		}
	}
	s.mu.Lock()
	if err := s.p.idx.err; err != nil {
		problem("", 0, "", "index run lookup failed: %v", err)
	}
	var runX = s.p.idx.x
	s.mu.Unlock()
	if deep && runX != nil {
		if err := runX.View().Verify(); err != nil {
			problem("", 0, "", "index runs: %v", err)
		}
	}
	objN, _, _ := fresh.idx.count()
	rep.Objects = objN
	if !deep {
		return rep, nil
	}
	kindOf := func(id ID) (objects.Kind, bool) {
		l, ok := fresh.idx.get(id)
		return l.Kind, ok
	}
	expect := func(from string, id ID, k objects.Kind) {
		if got, ok := kindOf(id); !ok {
			problem("", 0, from, "names %s %s, which does not exist", k, id)
		} else if got != k {
			problem("", 0, from, "names %s as a %s, but it is a %s", id, k, got)
		}
	}
	fresh.idx.each(func(id ID, l objLoc) {
		var data []byte
		var file string
		var off int64
		if l.Loose {
			_, file = s.loosePath(id)
			data = make([]byte, l.Size)
			if err := s.readLoose(file, data); err != nil {
				problem(file, 0, id.String(), "loose object: %v", err)
				return
			}
		} else {
			in := objs[id]
			data, file, off = in.data, in.file, in.off
		}
		if objects.IDOf(l.Kind, data) != id {
			problem(file, off, id.String(), "%s does not hash to its id", l.Kind)
			return
		}
		switch l.Kind {
		case objects.KindTree:
			t, err := objects.DecodeTree(data)
			if err != nil {
				problem(file, off, id.String(), "tree does not decode: %v", err)
				return
			}
			for _, e := range t.Entries {
				k := objects.KindBlob
				if e.Mode == objects.ModeDir {
					k = objects.KindTree
				}
				expect("tree "+id.String()+" entry "+e.Name, e.ID, k)
			}
		case objects.KindChangeset:
			cs, err := objects.DecodeChangeset(data)
			if err != nil {
				problem(file, off, id.String(), "changeset does not decode: %v", err)
				return
			}
			expect("changeset "+id.String()+" root", cs.Root, objects.KindTree)
			for _, p := range cs.Parents {
				expect("changeset "+id.String()+" parent", p, objects.KindChangeset)
				if pl, ok := fresh.idx.get(p); ok && pl.Seq >= l.Seq {
					problem(file, off, id.String(), "parent %s comes later in the journal", p)
				}
				if pd, ok := objs[p]; ok {
					if pcs, err := objects.DecodeChangeset(pd.data); err == nil && pcs.Generation >= cs.Generation {
						problem(file, off, id.String(), "generation %d not above parent %s's %d", cs.Generation, p, pcs.Generation)
					}
				}
			}
		}
	})
	for _, m := range want {
		expect("ref "+m.Name, m.New, objects.KindChangeset)
	}
	return rep, nil
}
