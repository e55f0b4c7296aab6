package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/pipeline"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
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
var errRebuild = fmt.Errorf("%w: the store was recovered by another process during the commit", ErrIO)

func (s *Store) commitOnce(req CommitRequest) (ID, error) {
	// Build outside the writer lock: read the parents, build trees, hash.
	s.view.mu.Lock()
	epoch := s.view.epoch
	s.view.mu.Unlock()
	changes := make([]treebuild.Change, len(req.Changes))
	for i, c := range req.Changes {
		changes[i] = treebuild.Change{Path: c.Path, Delete: c.Delete, Data: c.Data, Mode: c.Mode}
	}
	b := treebuild.New((*writerView)(s), s.opts.InlineThreshold)
	when := s.opts.Now
	if !req.Time.IsZero() {
		when = func() time.Time { return req.Time }
	}
	id, t, err := b.Build(req.Parents, changes, req.Agent, req.Message, when)
	if err != nil {
		return ID{}, err
	}
	var moves []refs.Move
	if req.Advance != "" {
		var old ID
		if len(req.Parents) > 0 {
			old = req.Parents[0]
		}
		moves = append(moves, refs.Move{Name: req.Advance, Old: old, New: id})
	}
	if err := loose.Write(s.fs, s.dir, b.Loose(), s.opts.weaken&testknobs.SkipDirSync != 0); err != nil {
		return ID{}, err
	}
	tx := &txn.Txn{Time: t, Objs: b.Objects(), Moves: moves, BuiltEpoch: epoch}
	if err := s.pipe.Commit(tx, req.Parents); err != nil {
		return ID{}, err
	}
	s.recent.Remember(b.Objects())
	return id, nil
}

// writerView is the store as a commit's builder reads it: every frame
// appended so far (the writer's view), and the last commit's objects.
type writerView Store

// Has reports whether the projection holds object id of kind k: one table
// per run, whose filters answer once checks have paid for loading them.
func (v *writerView) Has(id ID, k objects.Kind) bool {
	s := (*Store)(v)
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.proj.Idx.Has(id, k)
}

// Read reads an object in the writer's view, from the last commit's
// objects when it is one of them and the projection holds it as such.
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
// New that is not a known changeset is ErrNotFound.
func (s *Store) UpdateRefs(u ...RefUpdate) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(u) == 0 {
		return fmt.Errorf("%w: no ref updates", ErrInvalid)
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
	return s.pipe.Commit(&txn.Txn{Time: s.opts.Now().UTC(), Moves: moves}, need)
}

// pipeEnv is the store as its commit pipeline sees it (pipeline.Env).
type pipeEnv Store

// ReadState reads both state records.
func (e *pipeEnv) ReadState() (*state.Both, error) { return e.state.ReadPair() }

// CatchUp replays, without the writer lock, the frames published up to the
// end read (catchUpTo).
func (e *pipeEnv) CatchUp(st *state.Both) error { return (*Store)(e).catchUpTo(st.End, st.EOK) }

// EarlyRefs lends the projection's ref table for the early conflict checks
// when it is exactly at st's end on a healthy store and not in use.
func (e *pipeEnv) EarlyRefs(st *state.Both, check func(*refs.Table)) bool {
	s := (*Store)(e)
	end := st.End
	if !state.Healthy(end, st.EOK, st.Dur, st.DOK, s.boot) || !s.view.mu.TryLock() {
		return false
	}
	defer s.view.mu.Unlock()
	if end.Epoch != s.view.epoch || s.view.proj.NextSeq != end.NextSeq || s.view.proj.Pos != end.Pos {
		return false
	}
	check(s.view.proj.Refs)
	return true
}

// Append is the critical section (appendLocked); behind is what the last
// append of this process found.
func (e *pipeEnv) Append(r *pipeline.Request) (seq, epoch uint64, behind bool, err error) {
	s := (*Store)(e)
	seq, epoch, err = s.appendLocked(r.Txn, r.Payload, r.Digest, r.Need)
	return seq, epoch, s.appender.behind, err
}

// Sync is the sync step (groupsync).
func (e *pipeEnv) Sync(seq, epoch uint64, peek bool) error { return e.syncer.To(seq, epoch, peek) }

// Acked schedules a checkpoint if one is due.
func (e *pipeEnv) Acked() { e.sched.Acked() }

// catchUpUnlocked replays, without the writer lock, the frames other
// writers have published since this process last looked: before a writer
// queues, and while it queues (lockq.Join's progress), so the critical
// section only replays the last few frames appended ahead of it. With many
// writers nearly every frame is someone else's, and replaying them all under
// the lock made every hand-off as long as a round of the others' frames.
//
// The published end is read without the lock, so what it finds may be
// stale or cut under it by a concurrent recovery: a torn read, another
// epoch, or a scan that stops short (ErrCorrupt) makes it stop and leave the
// authoritative catch-up to appendLocked, which rereads the end under the
// lock and reloads the projection if the epoch moved. An I/O error is the
// operation's (C9): it is returned, and the caller fails.
func (s *Store) catchUpUnlocked() error {
	end, ok, err := s.state.Read(state.End)
	if err != nil {
		return err
	}
	return s.catchUpTo(end, ok)
}

// catchUpTo is catchUpUnlocked from an end record already read (ok false:
// it was unreadable, and there is nothing to do).
func (s *Store) catchUpTo(end state.Rec, ok bool) error {
	if !ok {
		return nil
	}
	if !s.view.mu.TryLock() {
		// Another goroutine of this process is using the projection
		// (appending, or catching it up already).
		return nil
	}
	defer s.view.mu.Unlock()
	if end.Epoch != s.view.epoch || s.view.proj.NextSeq >= end.NextSeq {
		return nil
	}
	if err := s.catchUp(end.NextSeq); err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	return nil
}

// appendLocked is the critical section: read the tail state, catch up,
// check, append, publish the end. Caller holds LOCK.
func (s *Store) appendLocked(t *txn.Txn, payload []byte, digest [32]byte, need []ID) (uint64, uint64, error) {
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return 0, 0, err
	}
	if !state.Healthy(end, eok, dur, dok, s.boot) {
		if _, err := s.recoverLocked(false); err != nil {
			return 0, 0, err
		}
		if end, eok, dur, dok, err = s.state.ReadBoth(); err != nil {
			return 0, 0, err
		}
		if !eok || !dok {
			return 0, 0, errs.Corrupt(s.state.Path(), 0, "state unreadable after recovery")
		}
	}
	s.view.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.view.mu.Unlock()
		}
	}()
	if end.Epoch != s.view.epoch {
		if err := s.reload(end.Epoch, end.NextSeq); err != nil {
			return 0, 0, err
		}
	}
	if len(t.Objs) > 0 && s.view.epoch != t.BuiltEpoch {
		return 0, 0, errRebuild
	}
	if err := s.catchUp(end.NextSeq); err != nil {
		return 0, 0, err
	}
	if s.view.proj.NextSeq != end.NextSeq || s.view.proj.Pos != end.Pos {
		return 0, 0, errs.Corrupt(s.state.Path(), 0, "published end %s/%d does not match the journal (%s/%d)",
			end.Pos, end.NextSeq, s.view.proj.Pos, s.view.proj.NextSeq)
	}
	for _, id := range need {
		if l, ok := s.view.proj.Idx.GetKind(id, objects.KindChangeset); !ok || l.Kind != objects.KindChangeset {
			if err := s.view.proj.Idx.TakeErr(); err != nil {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("%w: changeset %s", ErrNotFound, id)
		}
	}
	if err := s.view.proj.Refs.Check(t.Moves); err != nil {
		// The conflict reports a value from the projection up to end,
		// which may include frames not yet durable: the caller makes
		// end durable before reporting it (see transact).
		return end.NextSeq - 1, end.Epoch, errs.Ref(err)
	}
	// Whether any changeset of t is in the store already: the check replay
	// would make, made once here and recorded in the frame's kind.
	kind := byte(txn.FrameFresh)
	for _, o := range t.Objs {
		if o.Kind == objects.KindChangeset && s.view.proj.Idx.Has(o.ID, o.Kind) {
			kind = txn.FrameTxn
		}
	}
	if err := s.view.proj.Idx.TakeErr(); err != nil {
		return 0, 0, err
	}
	if s.opts.weaken&testknobs.FalseFresh != 0 {
		kind = txn.FrameFresh
	}
	seq := end.NextSeq
	s.appender.behind = dur.NextSeq != end.NextSeq
	// The append runs without s.view.mu. A write into the page a sync is
	// writing back waits for it, and crossing into a new window zero-fills
	// it: a snapshot in this process waited behind both (P7). Nothing moves
	// the projection meanwhile: this holds the writer lock, so no recovery
	// can change the epoch, and every catch-up stops at the published end,
	// which is the projection's until the end below is written.
	s.view.mu.Unlock()
	locked = false
	frame := journal.EncodeFrame(s.key, kind, seq, dur.NextSeq-1, payload, digest)
	at, err := s.appender.w.Append(end.Pos, seq, frame)
	if err != nil {
		s.appender.w.Close()
		return 0, 0, errs.IO(fmt.Sprintf("append frame %d to %s", seq, journal.SegName(at.Seg)), err)
	}
	s.view.mu.Lock()
	locked = true
	if s.view.epoch != end.Epoch || s.view.proj.NextSeq != seq || s.view.proj.Pos != end.Pos {
		return 0, 0, fmt.Errorf("%w: the projection moved to %s/%d while frame %d was appended at %s",
			ErrIO, s.view.proj.Pos, s.view.proj.NextSeq, seq, end.Pos)
	}
	fr := &journal.Frame{Kind: kind, Seq: seq, Watermark: dur.NextSeq - 1, Payload: payload, Pos: at, Size: int64(len(frame))}
	newEnd := state.Rec{Epoch: end.Epoch, Pos: fr.End(), NextSeq: seq + 1, Boot: s.boot}
	if err := s.state.Write(state.End, newEnd); err != nil {
		return 0, 0, err
	}
	// The in-memory moves carry the time as a replay decodes it.
	t.Time = time.Unix(0, t.Time.UnixNano()).UTC()
	if err := s.view.proj.ApplyTxn(fr, t, s.jcfg.SegPath(at.Seg)); err != nil {
		return 0, 0, err
	}
	s.markLocked()
	return seq, end.Epoch, nil
}
