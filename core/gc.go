package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// GCOptions tunes a garbage collection.
type GCOptions struct {
	// Retention keeps every changeset a ref moved from or to within this
	// long of now (the reflog's retention window). Negative is ErrInvalid.
	Retention time.Duration
}

// GCReport is what a garbage collection kept and reclaimed.
type GCReport struct {
	Live            int      // objects reachable from the roots
	Refs            int      // refs that were roots
	ReflogRoots     int      // changesets kept for reflog moves inside the retention (not those an earlier gc removed)
	FreshRoots      int      // changesets nothing reaches kept for being made inside the retention
	Leases          []string // live leases, whose roots were kept
	LeasedRoots     int      // changesets and objects named by live leases
	LeasesExpired   int      // expired leases removed
	LeasesBad       []string // leases that did not decode (torn by a power loss), removed
	Copied          int      // live objects copied forward out of reclaimed segments
	CopiedBytes     int64
	RecordsDropped  int // index records of unreachable objects dropped (a record of a run repeating one counts again)
	SegmentsRemoved int
	LooseRemoved    int
}

// GCLockName is the garbage collection lock's file name in the store
// directory: one collection runs at a time.
const GCLockName = "GCLOCK"

// gcCopyBytes bounds the objects one copy-forward frame carries: each is
// one turn of the writer lock, no longer than a commit of that size.
const gcCopyBytes = 1 << 20

// GC removes what no ref, no reflog move inside opts.Retention and no live
// lease reaches, nor a changeset made inside opts.Retention, and reclaims
// its space on disk: the journal segments
// wholly before the checkpoint it starts with, the index records naming
// unreachable objects, and unreachable loose objects. It runs beside
// writers: see docs/storage.md, "Garbage collection", for the protocol
// and docs/durability.md for what it keeps. One GC runs at a time (it
// holds GCLOCK); ErrBusy if that is not had within
// LockTimeout.
func (s *Store) GC(opts GCOptions) (*GCReport, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("%w: gc retention %v", ErrInvalid, opts.Retention)
	}
	gl, err := s.fs.Lock(s.lockPath(GCLockName), s.opts.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("gc lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
		}
		return nil, errs.IO("gc lock", err)
	}
	defer gl.Unlock()
	g := &gc{s: s, opts: opts, rep: &GCReport{}, live: map[ID]bool{}}
	if err := g.run(); err != nil {
		return nil, err
	}
	return g.rep, nil
}

// gc is one garbage collection's state.
type gc struct {
	s      *Store
	groups zblob.Cache // groups decoded by readAt
	opts   GCOptions
	rep    *GCReport
	live   map[ID]bool
	// cut is the first segment kept: every earlier one is reclaimed.
	cut uint64
	// x0 is the index of the checkpoint gc starts with: its records are
	// the candidates (every later record is of a frame after the mark
	// began, and kept). It stays open, and the reclaimed segments stay,
	// until the sweep, so that what a late commit names can be found.
	x0 *index.View
	r  *journal.Reader
	// copies maps each copied object to its old record and the seq of the
	// frame that copies it.
	copies map[ID]gcCopy
	// dropped is true once the rewritten index is installed: an object
	// marked live after that which only x0 holds is resurrected.
	dropped   bool
	resurrect []txn.Obj
	// scanPos and scanSeq are where the next rescan of the journal starts.
	scanPos journal.Pos
	scanSeq uint64
}

type gcCopy struct {
	seq uint64
	cs  *index.CSRecord // set for a changeset
	obj index.ObjRecord
}

// run is the collection, in the order its safety needs: each step is
// durable before the next depends on it (docs/storage.md, "Garbage
// collection").
func (g *gc) run() error {
	s := g.s
	// 1. A frame in a new segment, then a checkpoint: every durable frame
	// is in the runs, and every segment before the new one is reclaimed.
	if err := s.pipe.Commit(&txn.Txn{Time: s.opts.Now().UTC(), Roll: true}, nil); err != nil {
		return err
	}
	if err := g.checkpoint(); err != nil {
		return err
	}
	c0, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	g.cut = c0.Pos.Seg
	x := c0.Proj.Idx.Detach()
	c0.Proj.Idx.Close()
	defer x.Close()
	g.x0 = x.View()
	g.r = journal.NewReader(s.jcfg)
	defer g.r.Close()
	// 2. Mark from a snapshot taken after it, then from every frame
	// appended since, until the copies are done.
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	g.scanPos, g.scanSeq = sn.pos, sn.seq+1
	if err := g.mark(sn); err != nil {
		return err
	}
	if h := testknobs.GCAfterMark; h != nil {
		h()
	}
	// 3. Copy the live objects of the reclaimed segments forward.
	if err := g.rescan(); err != nil {
		return err
	}
	if err := g.copyForward(); err != nil {
		return err
	}
	// 4. A checkpoint covering the copies.
	if err := g.checkpoint(); err != nil {
		return err
	}
	if err := g.rescan(); err != nil {
		return err
	}
	if h := testknobs.GCBeforeFinish; h != nil {
		h()
	}
	// 5. In one turn of the writer lock: the last rescan, the
	// resurrection of what it found revived, the checkpoint whose runs
	// name the copies and not what is reclaimed, and the generation step.
	// No commit can revive anything meanwhile, and every live object is
	// indexed at every instant: its old record is dropped only once its
	// copy is durable and in the new run.
	if err := g.finish(c0); err != nil {
		return err
	}
	g.rep.Live = len(g.live)
	return g.sweep()
}

func (g *gc) checkpoint() error {
	s := g.s
	busy, err := s.checkpointWithin(s.opts.LockTimeout, true)
	if busy {
		return fmt.Errorf("checkpoint lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
	}
	return err
}

// mark fills g.live with everything the roots reach.
func (g *gc) mark(sn *Snapshot) error {
	refs, err := sn.Refs()
	if err != nil {
		return err
	}
	var roots []ID
	for _, r := range refs {
		roots = append(roots, r.ID)
	}
	g.rep.Refs = len(refs)
	logged, older, err := g.reflogRoots(sn)
	if err != nil {
		return err
	}
	roots = append(roots, logged...)
	leased, err := g.leaseRoots()
	if err != nil {
		return err
	}
	for _, id := range roots {
		if err := g.walkChangeset(id); err != nil {
			return err
		}
	}
	for _, id := range older {
		if err := g.walkOlderRoot(id); err != nil {
			return err
		}
	}
	for _, id := range leased {
		if err := g.walkAny(id); err != nil {
			return err
		}
	}
	return g.freshRoots()
}

// freshRoots marks the changesets nothing else reaches that were made
// inside the retention window (by their time), with all they reach: a
// commit made without a ref, about to be landed or set on one, is not
// taken from under its agent, as git keeps unreachable objects younger
// than gc.pruneExpire. Only the candidates the roots left unmarked are
// read.
func (g *gc) freshRoots() error {
	var cands []ID
	err := g.x0.ForEachChangeset(func(c index.CSRecord) error {
		if !g.live[c.ID] {
			cands = append(cands, c.ID)
		}
		return nil
	})
	if err != nil {
		return errs.Index("gc: read index runs", err)
	}
	since := g.s.opts.Now().Add(-g.opts.Retention)
	for _, id := range cands {
		if g.live[id] {
			continue // a fresher one's ancestor
		}
		cs, err := readAs(g, id, objects.KindChangeset, objects.DecodeChangeset)
		if err != nil {
			return err
		}
		if cs.Time.Before(since) {
			continue
		}
		g.rep.FreshRoots++
		if err := g.walkChangeset(id); err != nil {
			return err
		}
	}
	return nil
}

// reflogRoots returns the changesets the reflog moves inside the retention
// name, split by the horizon the collections before this one recorded:
// older are those of moves before it. Such a changeset was a candidate of
// an earlier collection, whose retention may have been shorter than this
// one's, so it may be gone. One of a later move was a ref's value while
// the last collection ran, and a collection keeps what a ref reaches
// while it runs (docs/durability.md), so missing it is damage.
func (g *gc) reflogRoots(sn *Snapshot) (roots, older []ID, err error) {
	s := g.s
	moves, err := sn.Moves(MoveQuery{})
	if err != nil {
		return nil, nil, err
	}
	horizon, err := readCollected(s.fs, s.dir)
	if err != nil {
		return nil, nil, err
	}
	since := s.opts.Now().Add(-g.opts.Retention)
	for _, m := range moves {
		if m.Time.Before(since) {
			continue
		}
		for _, id := range []ID{m.Old, m.New} {
			switch {
			case id.IsZero():
			case m.Seq < horizon:
				older = append(older, id)
			default:
				roots = append(roots, id)
				g.rep.ReflogRoots++
			}
		}
	}
	return roots, older, nil
}

// leaseRoots returns the roots of the live leases and removes expired ones.
func (g *gc) leaseRoots() ([]ID, error) {
	s := g.s
	leases, bad, err := s.Leases()
	if err != nil {
		return nil, err
	}
	// A lease is written without a sync (its holder renews it on its next
	// command), so a power loss can leave one empty or torn, as it can
	// leave one missing. A torn lease holds what a missing one holds:
	// nothing. It is removed and reported, not a reason to refuse gc for
	// good.
	for _, n := range bad {
		if err := s.ReleaseLease(n); err != nil {
			return nil, err
		}
		g.rep.LeasesBad = append(g.rep.LeasesBad, n)
	}
	now := s.opts.Now()
	var roots []ID
	for _, l := range leases {
		if !l.Expiry.After(now) {
			if err := s.ReleaseLease(l.Name); err != nil {
				return nil, err
			}
			g.rep.LeasesExpired++
			continue
		}
		if s.opts.weaken&testknobs.GCIgnoresLeases != 0 {
			continue
		}
		g.rep.Leases = append(g.rep.Leases, l.Name)
		roots = append(roots, l.Roots...)
	}
	g.rep.LeasedRoots = len(roots)
	return roots, nil
}
