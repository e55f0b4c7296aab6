package core

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/core/internal/errs"
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
	ReflogRoots     int      // changesets kept for reflog moves inside the retention
	Leases          []string // live leases, whose roots were kept
	LeasedRoots     int      // changesets and objects named by live leases
	LeasesExpired   int      // expired leases removed
	Copied          int      // live objects copied forward out of reclaimed segments
	CopiedBytes     int64
	RecordsDropped  int // index records of unreachable objects dropped
	SegmentsRemoved int
	LooseRemoved    int
}

// gcCopyBytes bounds the objects one copy-forward frame carries: each is
// one turn of the writer lock, no longer than a commit of that size.
const gcCopyBytes = 1 << 20

// GC removes what no ref, no reflog move inside opts.Retention and no live
// lease reaches, and reclaims its space on disk: the journal segments
// wholly before the checkpoint it starts with, the index records naming
// unreachable objects, and unreachable loose objects. It runs beside
// writers: see docs/storage.md, "Garbage collection", for the protocol
// and docs/durability.md for what it keeps. One GC runs at a time (it
// holds the compaction lock); ErrBusy if that is not had within
// LockTimeout.
func (s *Store) GC(opts GCOptions) (*GCReport, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("%w: gc retention %v", ErrInvalid, opts.Retention)
	}
	ml, err := s.fs.Lock(s.lockPath(compact.LockName), s.opts.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("compaction lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
		}
		return nil, errs.IO("merge lock", err)
	}
	defer ml.Unlock()
	g := &gc{s: s, opts: opts, rep: &GCReport{}, live: map[ID]bool{}}
	if err := g.run(); err != nil {
		return nil, err
	}
	return g.rep, nil
}

// gc is one garbage collection's state.
type gc struct {
	s    *Store
	opts GCOptions
	rep  *GCReport
	live map[ID]bool
	// cut is the first segment kept: every earlier one is reclaimed.
	cut uint64
	// copies maps each copied object to its old record and the seq of the
	// frame that copies it.
	copies    map[ID]gcCopy
	deadLoose []ID
}

type gcCopy struct {
	seq uint64
	cs  *index.CSRecord // set for a changeset
	obj index.ObjRecord
}

func (g *gc) run() error {
	s := g.s
	// 1. A checkpoint: every durable frame is in the runs, and the
	// segments before its position are never replayed again.
	if busy, err := s.checkpointWithin(s.opts.LockTimeout, true); busy || err != nil {
		if busy {
			return fmt.Errorf("checkpoint lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
		}
		return err
	}
	c0, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	defer c0.Proj.Idx.Close()
	g.cut = c0.Pos.Seg
	// 2. Mark from a snapshot taken after it.
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	if err := g.mark(sn); err != nil {
		return err
	}
	g.rep.Live = len(g.live)
	// 3. Copy the live objects of the reclaimed segments forward.
	x := c0.Proj.Idx.Detach()
	defer x.Close()
	if err := g.copyForward(x.View()); err != nil {
		return err
	}
	// 4. A checkpoint covering the copies, then one whose runs name the
	// copies and no longer name what was dropped.
	if busy, err := s.checkpointWithin(s.opts.LockTimeout, true); busy || err != nil {
		if busy {
			return fmt.Errorf("checkpoint lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
		}
		return err
	}
	if err := g.rewrite(c0); err != nil {
		return err
	}
	// 5. Only then delete what nothing names.
	return g.sweep()
}

// mark fills g.live with everything the roots reach.
func (g *gc) mark(sn *Snapshot) error {
	s := g.s
	refs, err := sn.Refs()
	if err != nil {
		return err
	}
	var roots []ID
	for _, r := range refs {
		roots = append(roots, r.ID)
	}
	g.rep.Refs = len(refs)
	moves, err := sn.Moves(MoveQuery{})
	if err != nil {
		return err
	}
	since := s.opts.Now().Add(-g.opts.Retention)
	for _, m := range moves {
		if m.Time.Before(since) {
			continue
		}
		for _, id := range []ID{m.Old, m.New} {
			if !id.IsZero() {
				roots = append(roots, id)
				g.rep.ReflogRoots++
			}
		}
	}
	leased, err := g.leaseRoots()
	if err != nil {
		return err
	}
	for _, id := range roots {
		if err := g.walkChangeset(sn, id); err != nil {
			return err
		}
	}
	for _, id := range leased {
		if err := g.walkAny(sn, id); err != nil {
			return err
		}
	}
	return nil
}

// leaseRoots returns the roots of the live leases and removes expired ones.
func (g *gc) leaseRoots() ([]ID, error) {
	s := g.s
	leases, bad, err := s.Leases()
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		// A lease being written is renamed in whole, so a bad one is
		// damage, not a write in progress: refuse rather than guess.
		return nil, errs.Corrupt(path.Join(s.dir, LeaseDir, bad[0]), 0, "lease file does not decode")
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

// walkAny marks id, whatever its kind: a lease may name a changeset, a
// tree or a blob. An id the store does not hold is skipped: a lease may
// name work not yet committed.
func (g *gc) walkAny(sn *Snapshot, id ID) error {
	if g.live[id] {
		return nil
	}
	if _, err := sn.Changeset(id); err == nil {
		return g.walkChangeset(sn, id)
	}
	if _, err := sn.Tree(id); err == nil {
		return g.walkTree(sn, id)
	}
	if _, err := sn.Blob(id); err == nil {
		g.live[id] = true
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// walkChangeset marks a changeset, its tree and its ancestry.
func (g *gc) walkChangeset(sn *Snapshot, id ID) error {
	stack := []ID{id}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if g.live[id] {
			continue
		}
		cs, err := sn.Changeset(id)
		if err != nil {
			return err
		}
		g.live[id] = true
		if err := g.walkTree(sn, cs.Root); err != nil {
			return err
		}
		stack = append(stack, cs.Parents...)
	}
	return nil
}

// walkTree marks a tree and everything under it, stopping at trees
// already marked.
func (g *gc) walkTree(sn *Snapshot, id ID) error {
	if g.live[id] {
		return nil
	}
	t, err := sn.Tree(id)
	if err != nil {
		return err
	}
	g.live[id] = true
	for _, e := range t.Entries {
		if e.Mode.IsDir() {
			if err := g.walkTree(sn, e.ID); err != nil {
				return err
			}
			continue
		}
		g.live[e.ID] = true
	}
	return nil
}
