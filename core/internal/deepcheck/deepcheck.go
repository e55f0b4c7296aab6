// Package deepcheck is the object half of a deep Verify: every object is
// re-hashed, and every reference of every tree and changeset (entries,
// roots, parents, generations) is checked against a replay of the whole
// journal (see Check).
package deepcheck

import (
	"fmt"
	"sort"
	"sync"

	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// Check is the object half of a deep Verify: every inline object is
// re-hashed by a goroutine that runs beside the journal scan, as the scan
// hands it each frame's objects; once the replay is complete, workers read
// and hash the loose objects and check every object's references (tree
// entries, a changeset's root and parents, generations) against it.
// Hashing and checking were a single pass after the scan, and took 45 % of
// a deep verify at 100k changesets.
type Check struct {
	fs    vfs.FS
	dir   string // the store directory
	fresh *proj.Proj
	// frames holds every frame's payload in journal order, so an inline
	// object is found from its location by a binary search (a map of every
	// object by id cost a third of the scan).
	frames []scannedFrame
	// Collected says a garbage collection has run: it copies a parent, or
	// brings it back, in a frame after children that named it where it
	// was before, so the journal order of a parent and its child says
	// nothing, and only the parent's presence is checked.
	Collected bool

	batch   []inlineObj
	hashCh  chan []inlineObj
	hashed  chan struct{}
	endOnce sync.Once
	badHash map[objects.ID]bool // written by the hasher, read after hashed closes
	hashPs  []Problem

	workerPs    [][]Problem
	refProblems []Problem
	done        sync.WaitGroup
}

type scannedFrame struct {
	seg     uint64
	off     int64 // of the payload's first byte
	payload []byte
	file    string
}

type inlineObj struct {
	id   objects.ID
	kind objects.Kind
	data []byte // the stored bytes: its group's zstd frame when z
	size int64
	// z marks a blob of a compressed group, whose bytes are at inner in
	// what data decodes to.
	z     bool
	inner int64
	file  string
	off   int64
}

// deepWorkers is how many goroutines check references after the scan.
const deepWorkers = 2

// New starts the check of a deep Verify of the store in storeDir, whose
// replay goes into fresh; the hasher runs from now on.
func New(fsys vfs.FS, storeDir string, fresh *proj.Proj) *Check {
	dc := &Check{fs: fsys, dir: storeDir, fresh: fresh, hashCh: make(chan []inlineObj, 16),
		hashed: make(chan struct{}), badHash: map[objects.ID]bool{}}
	go func() {
		defer close(dc.hashed)
		// A group's members come one after another: its frame is decoded
		// once, for the first.
		var frame, group []byte
		var gerr error
		for objs := range dc.hashCh {
			for _, o := range objs {
				data := o.data
				if o.z {
					if len(frame) != len(o.data) || &frame[0] != &o.data[0] {
						frame = o.data
						group, gerr = zblob.Decode(frame)
					}
					err := gerr
					if err == nil {
						data, err = zblob.Member(group, o.inner, o.size)
					}
					if err != nil {
						dc.badHash[o.id] = true
						dc.hashPs = append(dc.hashPs, Problem{File: o.file, Offset: o.off, Object: o.id.String(),
							Reason: fmt.Sprintf("compressed %s: %v", o.kind, err)})
						continue
					}
				}
				if objects.IDOf(o.kind, data) != o.id {
					dc.badHash[o.id] = true
					dc.hashPs = append(dc.hashPs, Problem{File: o.file, Offset: o.off, Object: o.id.String(),
						Reason: fmt.Sprintf("%s does not hash to its id", o.kind)})
				}
			}
		}
	}()
	return dc
}

// Frame records a frame the scan met, and queues its inline objects for
// hashing.
func (dc *Check) Frame(fr *journal.Frame, file string, t *txn.Txn) {
	base := fr.Pos.Off + fr.PayloadOff()
	dc.frames = append(dc.frames, scannedFrame{seg: fr.Pos.Seg, off: base, payload: fr.Payload, file: file})
	for _, o := range t.Objs {
		if o.Loose {
			continue
		}
		dc.batch = append(dc.batch, inlineObj{o.ID, o.Kind, o.Data, o.Size, o.Stored > 0, int64(o.Inner), file, base + int64(o.Off)})
		if len(dc.batch) >= 1024 {
			dc.hashCh <- dc.batch
			dc.batch = nil
		}
	}
}

// inlineData returns the stored bytes of the inline object at l, from the
// frame that holds it: a compressed blob's are its zstd frame (the hasher
// decodes it; blobs name nothing, so the reference checks need no bytes
// of theirs).
func (dc *Check) inlineData(l proj.Loc) (data []byte, file string, ok bool) {
	i := sort.Search(len(dc.frames), func(i int) bool {
		f := dc.frames[i]
		return f.seg > l.Seg || f.seg == l.Seg && f.off > l.Off
	}) - 1
	if i < 0 {
		return nil, "", false
	}
	f := dc.frames[i]
	rel := l.Off - f.off
	n := l.StoredLen()
	if f.seg != l.Seg || rel < 0 || n < 0 || rel+n > int64(len(f.payload)) {
		return nil, "", false
	}
	return f.payload[rel : rel+n], f.file, true
}

// EndHashing hands over the last batch and waits for the hasher.
func (dc *Check) EndHashing() {
	dc.endOnce.Do(func() {
		if len(dc.batch) > 0 {
			dc.hashCh <- dc.batch
		}
		close(dc.hashCh)
		<-dc.hashed
	})
}

// Start runs the reference checks over every replayed object, in workers
// fed chunks of the replay's index. Caller has called EndHashing.
func (dc *Check) Start() {
	type rec struct {
		id objects.ID
		l  proj.Loc
	}
	chunks := make(chan []rec, 2*deepWorkers)
	dc.workerPs = make([][]Problem, deepWorkers)
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
		dc.fresh.Idx.Mem.Each(func(id objects.ID, l proj.Loc) {
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

// Wait returns every problem the object checks found.
func (dc *Check) Wait() []Problem {
	dc.done.Wait()
	out := dc.hashPs
	for _, ps := range dc.workerPs {
		out = append(out, ps...)
	}
	return append(out, dc.refProblems...)
}

func (dc *Check) expect(ps *[]Problem, from string, id objects.ID, k objects.Kind) {
	if l, ok := dc.fresh.Idx.Mem.Get(id); !ok {
		*ps = append(*ps, Problem{Object: from, Reason: fmt.Sprintf("names %s %s, which does not exist", k, id)})
	} else if l.Kind != k {
		*ps = append(*ps, Problem{Object: from, Reason: fmt.Sprintf("names %s as a %s, but it is a %s", id, k, l.Kind)})
	}
}

// check checks one replayed object: a loose one is read and hashed, an
// inline one was hashed beside the scan; then its references.
func (dc *Check) check(ps *[]Problem, id objects.ID, l proj.Loc) {
	problem := func(file string, off int64, format string, args ...any) {
		*ps = append(*ps, Problem{File: file, Offset: off, Object: id.String(), Reason: fmt.Sprintf(format, args...)})
	}
	var data []byte
	var file string
	var off int64
	if l.Loose {
		_, file = loose.Path(dc.dir, id)
		data = make([]byte, l.Size)
		if err := loose.Read(dc.fs, file, data); err != nil {
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
			// A parent precedes its child, unless a collection moved it.
			if !dc.Collected && pl.Seq >= l.Seq {
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

// ExpectRef checks that ref name names a changeset the replay holds.
func (dc *Check) ExpectRef(name string, id objects.ID) {
	dc.expect(&dc.refProblems, "ref "+name, id, objects.KindChangeset)
}

// Problem is one problem found (core.VerifyProblem).
type Problem struct {
	File   string
	Offset int64
	Object string
	Reason string
}
