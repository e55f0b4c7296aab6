package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Commit writes a changeset whose tree is Parents[0]'s tree (empty if none)
// with req.Changes applied, and, if req.Advance is set, moves that ref from
// Parents[0] (or absence) to it in the same journal frame. It returns only
// after one fdatasync covers the frame. Errors: ErrInvalid for a bad path,
// mode, ref name or parent list; ErrNotFound for a missing parent or a
// delete of a missing path; *ConflictError when Advance's expectation fails;
// ErrBusy, ErrIO, ErrNoSpace, ErrClosed.
func (s *Store) Commit(req CommitRequest) (ID, error) {
	if err := s.usable(); err != nil {
		return ID{}, err
	}
	if len(req.Parents) > objects.MaxParents {
		return ID{}, fmt.Errorf("%w: %d parents", ErrInvalid, len(req.Parents))
	}
	for i, p := range req.Parents {
		if p.IsZero() {
			return ID{}, fmt.Errorf("%w: parent %d is the zero id", ErrInvalid, i)
		}
		for _, q := range req.Parents[:i] {
			if p == q {
				return ID{}, fmt.Errorf("%w: parent %s given twice", ErrInvalid, p)
			}
		}
	}
	if req.Advance != "" {
		if err := refs.ValidateName(req.Advance); err != nil {
			return ID{}, errs.Ref(err)
		}
		if err := commitOrigin(req).Validate(); err != nil {
			return ID{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	for attempt := 0; ; attempt++ {
		id, err := s.commitOnce(req)
		if errors.Is(err, errRebuild) && attempt < 3 {
			continue
		}
		return id, err
	}
}

// errRebuild says another process's recovery changed the journal while the
// commit was being built: objects the builder left out as already stored
// may have been cut, so the commit is built again.
var errRebuild = fmt.Errorf("%w: the store was recovered or garbage collected by another process during the commit, three times; run it again", ErrBusy)

func (s *Store) commitOnce(req CommitRequest) (ID, error) {
	// Build outside the writer lock: read the parents, build trees, hash.
	s.view.mu.Lock()
	epoch, gcGen := s.view.epoch, s.view.gc
	s.view.mu.Unlock()
	b := treebuild.New((*writerView)(s), s.opts.InlineThreshold)
	when := s.opts.Now
	if !req.Time.IsZero() {
		when = func() time.Time { return req.Time }
	}
	skipDirSync := s.opts.weaken&testknobs.SkipDirSync != 0
	// A chunk's blobs are durable before the commit's frame is appended:
	// the loose ones as loose objects always are, the inline ones in a
	// frame acknowledged by the sync step. Its frame is checked against
	// the epoch the commit was built in, as the commit's own is, so a
	// recovery that cut an earlier chunk's frame makes the commit rebuild.
	b.Stream(s.opts.CommitChunkBytes, func(objs, lo []txn.Obj) error {
		if err := loose.Write(s.fs, s.dir, lo, skipDirSync); err != nil {
			return err
		}
		return s.pipe.Commit(&txn.Txn{Time: s.opts.Now().UTC(), Objs: objs, BuiltEpoch: epoch, BuiltGC: gcGen}, nil)
	})
	id, t, err := b.Build(req.Parents, req.Changes, req.Agent, req.Message, when)
	if err != nil {
		return ID{}, err
	}
	if req.RefuseEmpty && len(req.Parents) <= 1 && b.Changed() == 0 {
		// Nothing was flushed either: a change that alters nothing adds
		// no blob.
		return ID{}, fmt.Errorf("%w: the changes leave the tree as it is", ErrEmpty)
	}
	var moves []refs.Move
	if req.Advance != "" {
		var old ID
		if len(req.Parents) > 0 {
			old = req.Parents[0]
		}
		moves = append(moves, refs.Move{Name: req.Advance, Old: old, New: id})
	}
	if err := loose.Write(s.fs, s.dir, b.Loose(), skipDirSync); err != nil {
		return ID{}, err
	}
	tx := &txn.Txn{Time: t, Objs: b.Objects(), Moves: moves, Origin: commitOrigin(req), BuiltEpoch: epoch, BuiltGC: gcGen}
	if err := s.pipe.Commit(tx, req.Parents); err != nil {
		return ID{}, err
	}
	s.recent.Remember(b.Objects())
	s.cacheCommitted(id, tx)
	return id, nil
}

// cacheCommitted puts changeset id, just committed in tx, in the snapshot
// changeset cache as a snapshot's read of it would: a writer's next
// commit names it as its parent, and resolving that parent then reads and
// hashes nothing (under a server, 6–8 % of a commit's CPU).
func (s *Store) cacheCommitted(id ID, tx *txn.Txn) {
	for _, o := range tx.Objs {
		if o.ID != id || o.Kind != objects.KindChangeset || o.Loose || o.Stored != 0 {
			continue
		}
		if cs, err := treebuild.DecodeChangeset(id, o.Data); err == nil {
			s.csc.Put(id, tx.Seq, cs)
		}
		return
	}
}

// commitOrigin is the origin of a commit's Advance move: its agent, and its
// operation (OpCommit unless the request names another).
func commitOrigin(req CommitRequest) refs.Origin {
	o := refs.Origin{Agent: req.Agent, Op: req.Op}
	if o.Op == OpUnknown {
		o.Op = OpCommit
	}
	return o
}

// writerView is the store as a commit's builder reads it: every frame
// appended so far (the writer's view), and the last commits' objects.
type writerView Store

// Has reports whether the projection holds object id of kind k: one table
// per run, whose filters answer once checks have paid for loading them.
func (v *writerView) Has(id ID, k objects.Kind) bool {
	s := (*Store)(v)
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.proj.Idx.Has(id, k)
}

// Read reads an object in the writer's view, from the last commits'
// objects (Recent) when it is one of them and the projection holds it as
// such.
func (v *writerView) Read(id ID, k objects.Kind) ([]byte, error) {
	s := (*Store)(v)
	if data, ok := s.recent.Get(id); ok {
		s.view.mu.Lock()
		l, ok := s.view.proj.Idx.GetKind(id, k)
		s.view.mu.Unlock()
		if ok && l.Kind == k && !l.Loose && l.Size == int64(len(data)) {
			return data, nil
		}
	}
	return s.readObject(id, k, ^uint64(0), true)
}

// UpdateRefs applies every compare-and-swap in u in one journal frame, all
// or nothing. Old zero means the ref must not exist; New zero deletes it.
// A failed expectation returns a *ConflictError with the current value; a
// New that is not a known changeset is ErrNotFound. The moves are recorded
// with no agent, as OpRefCreate when every one creates its ref, OpRefDelete
// when every one deletes it, and OpRefSet otherwise.
func (s *Store) UpdateRefs(u ...RefUpdate) error { return s.UpdateRefsAs(Origin{}, u...) }

// UpdateRefsAs is UpdateRefs recording o as the moves' origin: the agent
// that made them and the operation (zero: chosen as UpdateRefs does). An
// origin that Validate refuses is ErrInvalid; OpUndo is Undo's own.
func (s *Store) UpdateRefsAs(o Origin, u ...RefUpdate) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(u) == 0 {
		return fmt.Errorf("%w: no ref updates", ErrInvalid)
	}
	if o.Op == OpUnknown {
		o.Op = updateOp(u)
	}
	if o.Op == OpUndo {
		return fmt.Errorf("%w: an undo is made by Undo", ErrInvalid)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	moves := make([]refs.Move, len(u))
	var need []ID
	seen := map[string]bool{}
	for i, x := range u {
		if err := refs.ValidateName(x.Name); err != nil {
			return errs.Ref(err)
		}
		if seen[x.Name] {
			return fmt.Errorf("%w: ref %q updated twice", ErrInvalid, x.Name)
		}
		seen[x.Name] = true
		if x.Old.IsZero() && x.New.IsZero() {
			return fmt.Errorf("%w: ref %q: old and new both absent", ErrInvalid, x.Name)
		}
		moves[i] = refs.Move{Name: x.Name, Old: x.Old, New: x.New}
		if !x.New.IsZero() {
			need = append(need, x.New)
		}
	}
	return s.pipe.Commit(&txn.Txn{Time: s.opts.Now().UTC(), Moves: moves, Origin: o}, need)
}

// updateOp is the operation of ref updates whose caller named none.
func updateOp(u []RefUpdate) Op {
	creates, deletes := true, true
	for _, x := range u {
		creates = creates && x.Old.IsZero()
		deletes = deletes && x.New.IsZero()
	}
	switch {
	case creates:
		return OpRefCreate
	case deletes:
		return OpRefDelete
	}
	return OpRefSet
}
