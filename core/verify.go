package core

import (
	"fmt"
	"path"
	"sort"
	"sync"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/txn"
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
	fresh := proj.New(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1)
	// The replay's index is sized from the store's at the outset: growing
	// a map of every object as the scan goes rehashes it about 20 times.
	hint := s.objectCountHint()
	fresh.Idx.Mem.SizeFor(hint)
	total := int(sn.seq)
	var dc *deepCheck
	if deep {
		dc = newDeepCheck(s, fresh)
		defer dc.endHashing()
	}
	var file string
	var fileSeg uint64
	res, err := r.Scan(fresh.Pos, 1, sn.seq+1, func(fr *journal.Frame) error {
		if file == "" || fr.Pos.Seg != fileSeg {
			file, fileSeg = s.jcfg.SegPath(fr.Pos.Seg), fr.Pos.Seg
		}
		var t *txn.Txn
		if deep {
			t, _ = txn.Decode(fr.Payload)
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
					problem(file, fr.Pos.Off, o.ID.String(), "frame %d says its changesets are new, but frame %d holds this one", fr.Seq, l.Seq)
				}
			}
		}
		// The payload decoded above is applied as it is (a second decode
		// was a tenth of a deep verify).
		apply := func() error { return fresh.Apply(fr, file) }
		if t != nil && (fr.Kind == txn.FrameTxn || fr.Kind == txn.FrameFresh) {
			apply = func() error { return fresh.ApplyTxn(fr, t, file) }
		}
		if err := apply(); err != nil {
			problem(file, fr.Pos.Off, "", "frame %d: %v", fr.Seq, err)
			fresh.Pos, fresh.NextSeq = fr.End(), fr.Seq+1
		}
		rep.Frames++
		if t != nil {
			dc.frame(fr, file, t)
		}
		if progress != nil {
			progress(int(fr.Seq), total)
		}
		return nil
	})
	if err != nil {
		return rep, errs.IO("verify: scan journal", err)
	}
	if res.NextSeq <= sn.seq {
		problem(s.jcfg.SegPath(res.End.Seg), res.End.Off, "", "frame %d is missing or damaged inside the durable prefix (durable through %d)", res.NextSeq, sn.seq)
	}
	// With deep, the references of every object are checked by workers
	// of their own beside the index checks below (all of them only read
	// the replay); the hashing rode beside the scan.
	if deep {
		dc.endHashing()
		dc.start()
	}
	s.mu.Lock()
	// Index and refs must agree with the replay. One pass over the index
	// the store answers from (its tail, then its runs in order) looks each
	// record up in the replay's: a lookup of every replayed object in the
	// runs cost a block read each, a third of a deep verify at 100k.
	replayed := fresh.Idx.Mem
	matched := 0
	s.p.Idx.Each(func(id ID, got proj.Loc) {
		l, ok := replayed.Get(id)
		if !ok {
			if got.Seq <= sn.seq {
				problem("", 0, id.String(), "index names an object no frame up to %d carries", sn.seq)
			}
			return
		}
		matched++
		if got != l && got.Seq > l.Seq && l.Kind != objects.KindChangeset {
			// The tail may hold a later copy of a blob or tree a run
			// holds (see applyTxn): the run's record is the one to match.
			if rl, rok := s.p.Idx.RunKind(id, l.Kind); rok {
				got = rl
			}
		}
		if got.Seq == 0 && l.Kind != objects.KindChangeset {
			// Blobs and trees from index runs carry no seq (see runIdx).
			got.Seq = l.Seq
		}
		if got != l {
			problem("", 0, id.String(), "index says %+v, journal says %+v", got, l)
		}
	})
	if n, _, _ := replayed.Count(); int64(matched) != n {
		// Some replayed object is not in the index: find which.
		replayed.Each(func(id ID, l proj.Loc) {
			if _, ok := s.p.Idx.Get(id); !ok {
				problem("", 0, id.String(), "object in the journal (frame %d) is missing from the index", l.Seq)
			}
		})
	}
	want, got := fresh.Refs.List(sn.seq), s.p.Refs.List(sn.seq)
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
	base, rlen := s.p.Refs.Base(), s.p.ReflogLen
	s.mu.Unlock()
	// The reflog file must hold exactly the journal's moves before the
	// checkpoint's position.
	if base > 0 && base <= sn.seq+1 {
		rf := path.Join(s.dir, reflog.Name)
		older, err := reflog.Read(s.fs, s.dir, rlen)
		if err != nil {
			problem(rf, 0, "", "%v", err)
		} else {
			for _, n := range fresh.Refs.Names() {
				want, got := fresh.Refs.Log(n, base-1), older[n]
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
	if err := s.p.Idx.Err(); err != nil {
		problem("", 0, "", "index run lookup failed: %v", err)
	}
	// The runs are checked without s.mu held, so that commits go on; a
	// checkpoint or merge installed meanwhile retires them, and the pin
	// keeps them open until the check is done.
	pinned := s.p.Idx
	runX := pinned.Pin()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		pinned.Unpin()
		s.mu.Unlock()
	}()
	if deep && runX != nil {
		if err := runX.View().Verify(); err != nil {
			problem("", 0, "", "index runs: %v", err)
		}
	}
	objN, _, _ := fresh.Idx.Count()
	rep.Objects = objN
	if !deep {
		return rep, nil
	}
	// The object checks' problems follow the index checks'.
	for _, m := range want {
		dc.expect(&dc.refProblems, "ref "+m.Name, m.New, objects.KindChangeset)
	}
	rep.Problems = append(rep.Problems, dc.wait()...)
	return rep, nil
}

// objectCountHint is about how many objects the store holds: its tail's,
// and the record counts in its runs' headers (an object in two runs counts
// twice).
func (s *Store) objectCountHint() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.p.Idx.Mem.Len()
	for _, r := range s.p.Idx.Runs() {
		n += int(r.Changesets() + r.Objects())
	}
	return n
}

// deepCheck is the object half of a deep Verify: every inline object is
// re-hashed by a goroutine that runs beside the journal scan, as the scan
// hands it each frame's objects; once the replay is complete, workers read
// and hash the loose objects and check every object's references (tree
// entries, a changeset's root and parents, generations) against it.
// Hashing and checking were a single pass after the scan, and took 45 % of
// a deep verify at 100k changesets.
type deepCheck struct {
	s     *Store
	fresh *proj.Proj
	// frames holds every frame's payload in journal order, so an inline
	// object is found from its location by a binary search (a map of every
	// object by id cost a third of the scan).
	frames []scannedFrame

	batch   []inlineObj
	hashCh  chan []inlineObj
	hashed  chan struct{}
	endOnce sync.Once
	badHash map[ID]bool // written by the hasher, read after hashed closes
	hashPs  []VerifyProblem

	workerPs    [][]VerifyProblem
	refProblems []VerifyProblem
	done        sync.WaitGroup
}

type scannedFrame struct {
	seg     uint64
	off     int64 // of the payload's first byte
	payload []byte
	file    string
}

type inlineObj struct {
	id   ID
	kind objects.Kind
	data []byte
	file string
	off  int64
}

// deepWorkers is how many goroutines check references after the scan.
const deepWorkers = 2

func newDeepCheck(s *Store, fresh *proj.Proj) *deepCheck {
	dc := &deepCheck{s: s, fresh: fresh, hashCh: make(chan []inlineObj, 16),
		hashed: make(chan struct{}), badHash: map[ID]bool{}}
	go func() {
		defer close(dc.hashed)
		for objs := range dc.hashCh {
			for _, o := range objs {
				if objects.IDOf(o.kind, o.data) != o.id {
					dc.badHash[o.id] = true
					dc.hashPs = append(dc.hashPs, VerifyProblem{File: o.file, Offset: o.off, Object: o.id.String(),
						Reason: fmt.Sprintf("%s does not hash to its id", o.kind)})
				}
			}
		}
	}()
	return dc
}

// frame records a frame the scan met, and queues its inline objects for
// hashing.
func (dc *deepCheck) frame(fr *journal.Frame, file string, t *txn.Txn) {
	base := fr.Pos.Off + journal.FrameHeaderSize
	dc.frames = append(dc.frames, scannedFrame{seg: fr.Pos.Seg, off: base, payload: fr.Payload, file: file})
	for _, o := range t.Objs {
		if o.Loose {
			continue
		}
		dc.batch = append(dc.batch, inlineObj{o.ID, o.Kind, o.Data, file, base + int64(o.Off)})
		if len(dc.batch) >= 1024 {
			dc.hashCh <- dc.batch
			dc.batch = nil
		}
	}
}

// inlineData returns the bytes of the inline object at l, from the frame
// that holds it.
func (dc *deepCheck) inlineData(l proj.Loc) (data []byte, file string, ok bool) {
	i := sort.Search(len(dc.frames), func(i int) bool {
		f := dc.frames[i]
		return f.seg > l.Seg || f.seg == l.Seg && f.off > l.Off
	}) - 1
	if i < 0 {
		return nil, "", false
	}
	f := dc.frames[i]
	rel := l.Off - f.off
	if f.seg != l.Seg || rel < 0 || l.Size < 0 || rel+l.Size > int64(len(f.payload)) {
		return nil, "", false
	}
	return f.payload[rel : rel+l.Size], f.file, true
}

// endHashing hands over the last batch and waits for the hasher.
func (dc *deepCheck) endHashing() {
	dc.endOnce.Do(func() {
		if len(dc.batch) > 0 {
			dc.hashCh <- dc.batch
		}
		close(dc.hashCh)
		<-dc.hashed
	})
}

// start runs the reference checks over every replayed object, in workers
// fed chunks of the replay's index. Caller has called endHashing.
func (dc *deepCheck) start() {
	type rec struct {
		id ID
		l  proj.Loc
	}
	chunks := make(chan []rec, 2*deepWorkers)
	dc.workerPs = make([][]VerifyProblem, deepWorkers)
	for w := range deepWorkers {
		dc.done.Add(1)
		go func() {
			defer dc.done.Done()
			for c := range chunks {
				for _, r := range c {
					dc.check(&dc.workerPs[w], r.id, r.l)
				}
			}
		}()
	}
	dc.done.Add(1)
	go func() {
		defer dc.done.Done()
		defer close(chunks)
		var c []rec
		dc.fresh.Idx.Mem.Each(func(id ID, l proj.Loc) {
			if c = append(c, rec{id, l}); len(c) == 512 {
				chunks <- c
				c = nil
			}
		})
		if len(c) > 0 {
			chunks <- c
		}
	}()
}

// wait returns every problem the object checks found.
func (dc *deepCheck) wait() []VerifyProblem {
	dc.done.Wait()
	out := dc.hashPs
	for _, ps := range dc.workerPs {
		out = append(out, ps...)
	}
	return append(out, dc.refProblems...)
}

func (dc *deepCheck) expect(ps *[]VerifyProblem, from string, id ID, k objects.Kind) {
	if l, ok := dc.fresh.Idx.Mem.Get(id); !ok {
		*ps = append(*ps, VerifyProblem{Object: from, Reason: fmt.Sprintf("names %s %s, which does not exist", k, id)})
	} else if l.Kind != k {
		*ps = append(*ps, VerifyProblem{Object: from, Reason: fmt.Sprintf("names %s as a %s, but it is a %s", id, k, l.Kind)})
	}
}

// check checks one replayed object: a loose one is read and hashed, an
// inline one was hashed beside the scan; then its references.
func (dc *deepCheck) check(ps *[]VerifyProblem, id ID, l proj.Loc) {
	problem := func(file string, off int64, format string, args ...any) {
		*ps = append(*ps, VerifyProblem{File: file, Offset: off, Object: id.String(), Reason: fmt.Sprintf(format, args...)})
	}
	var data []byte
	var file string
	var off int64
	if l.Loose {
		_, file = loose.Path(dc.s.dir, id)
		data = make([]byte, l.Size)
		if err := loose.Read(dc.s.fs, file, data); err != nil {
			problem(file, 0, "loose object: %v", err)
			return
		}
		if objects.IDOf(l.Kind, data) != id {
			problem(file, 0, "%s does not hash to its id", l.Kind)
			return
		}
	} else {
		var ok bool
		if data, file, ok = dc.inlineData(l); !ok {
			problem("", 0, "%s has no inline copy in the journal at %d/%d", l.Kind, l.Seg, l.Off)
			return
		}
		if dc.badHash[id] {
			return // reported by the hasher
		}
		off = l.Off
	}
	switch l.Kind {
	case objects.KindTree:
		t, err := objects.DecodeTree(data)
		if err != nil {
			problem(file, off, "tree does not decode: %v", err)
			return
		}
		for _, e := range t.Entries {
			k := objects.KindBlob
			if e.Mode == objects.ModeDir {
				k = objects.KindTree
			}
			dc.expect(ps, "tree "+id.String()+" entry "+e.Name, e.ID, k)
		}
	case objects.KindChangeset:
		cs, err := objects.DecodeChangeset(data)
		if err != nil {
			problem(file, off, "changeset does not decode: %v", err)
			return
		}
		dc.expect(ps, "changeset "+id.String()+" root", cs.Root, objects.KindTree)
		for _, p := range cs.Parents {
			dc.expect(ps, "changeset "+id.String()+" parent", p, objects.KindChangeset)
			pl, ok := dc.fresh.Idx.Mem.Get(p)
			if !ok {
				continue
			}
			if pl.Seq >= l.Seq {
				problem(file, off, "parent %s comes later in the journal", p)
			}
			if pd, _, ok := dc.inlineData(pl); ok && !pl.Loose {
				if pcs, err := objects.DecodeChangeset(pd); err == nil && pcs.Generation >= cs.Generation {
					problem(file, off, "generation %d not above parent %s's %d", cs.Generation, p, pcs.Generation)
				}
			}
		}
	}
}
