package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
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
	s.mu.Lock()
	epoch := s.epoch
	s.mu.Unlock()
	changes := make([]treebuild.Change, len(req.Changes))
	for i, c := range req.Changes {
		changes[i] = treebuild.Change{Path: c.Path, Delete: c.Delete, Data: c.Data, Mode: c.Mode}
	}
	b := treebuild.New((*writerView)(s), s.o.InlineThreshold)
	when := s.o.Now
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
	if err := loose.Write(s.fs, s.dir, b.Loose(), s.o.Weaken&WeakSkipDirSync != 0); err != nil {
		return ID{}, err
	}
	tx := &txn.Txn{Time: t, Objs: b.Objects(), Moves: moves, BuiltEpoch: epoch}
	if err := s.transact(tx, req.Parents); err != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p.Idx.Has(id, k)
}

// Read reads an object in the writer's view, from the last commit's
// objects when it is one of them and the projection holds it as such.
func (v *writerView) Read(id ID, k objects.Kind) ([]byte, error) {
	s := (*Store)(v)
	if data, ok := s.recent.Get(id); ok {
		s.mu.Lock()
		l, ok := s.p.Idx.GetKind(id, k)
		s.mu.Unlock()
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
	return s.transact(&txn.Txn{Time: s.o.Now().UTC(), Moves: moves}, need)
}

// transact appends t as one frame and returns once it is durable. need
// lists changesets that must exist (parents, ref targets).
//
// Transactions of one process go through a commit pipeline: the first to
// arrive leads a batch of every transaction waiting when it starts, takes
// the writer lock once for all of them, appends each as its own frame
// (each with its own checks, so one transaction's conflict is its alone),
// makes them durable with one sync step, and hands the lead to the first
// transaction that arrived meanwhile. Goroutines sharing a Store thus pay
// one queue turn and one fdatasync per batch instead of one each, the way
// Pebble's commit pipeline batches its writers; across processes, the sync
// step groups the same way (syncTo).
func (s *Store) transact(t *txn.Txn, need []ID) error {
	payload := txn.Encode(t)
	if len(payload) > journal.MaxPayload {
		return fmt.Errorf("%w: transaction of %d bytes exceeds the frame limit", ErrInvalid, len(payload))
	}
	r := &commitReq{t: t, payload: payload, digest: journal.PayloadDigest(payload), need: need, turn: make(chan bool, 1)}
	if s.writer.Held() {
		// This process holds the writer lock (writelock.Lock.Hold): commit
		// at once. Joining the pipeline could wait on a leader that waits
		// in the queue behind the held turn.
		s.commitBatch([]*commitReq{r})
		return r.err
	}
	s.pipeMu.Lock()
	s.pending = append(s.pending, r)
	lead := !s.leading
	s.leading = true
	s.pipeMu.Unlock()
	if !lead && !<-r.turn {
		return r.err
	}
	s.pipeMu.Lock()
	batch := s.pending
	s.pending = nil
	s.pipeMu.Unlock()
	s.commitBatch(batch)
	for _, o := range batch {
		if o != r {
			o.turn <- false
		}
	}
	s.pipeMu.Lock()
	if len(s.pending) > 0 {
		s.pending[0].turn <- true
	} else {
		s.leading = false
	}
	s.pipeMu.Unlock()
	return r.err
}

// commitReq is one transaction in the commit pipeline.
type commitReq struct {
	t       *txn.Txn
	payload []byte
	digest  [32]byte
	need    []ID
	seq     uint64 // frame appended (or, on a conflict, the end the check saw)
	epoch   uint64
	err     error
	early   bool      // failed its compare-and-swap before its turn (earlyConflicts)
	behind  bool      // other frames awaited a sync when this one was appended
	turn    chan bool // true: lead the next batch; false: done, see err
}

// earlyConflicts fails, without the writer lock, every request of batch
// whose ref moves conflict with the store as of the published end, and
// returns how many requests still need their turn, or an I/O error. It decides only from a
// projection caught up to an end read in this call, on a healthy store (the
// precondition appendLocked checks under the lock), so the value a loser is
// told of is one the ref held after the loser's call began, as under the
// lock. Like a conflict found under the lock, its seq is the end the check
// saw, which the sync step makes durable before the error is returned (C4,
// C5). Anything else (the projection busy or behind, a torn read, another
// epoch) leaves the decision to the turn. st is a read of both state
// records made for this call (nil: the call reads them).
func (s *Store) earlyConflicts(batch []*commitReq, st *state.Both) (live int, err error) {
	moves := false
	for _, r := range batch {
		if !r.early {
			live++
			moves = moves || len(r.t.Moves) > 0
		}
	}
	if !moves {
		return live, nil
	}
	if st == nil {
		if st, err = s.st.ReadPair(); err != nil {
			return live, err
		}
	}
	end, eok, dur, dok := st.End, st.EOK, st.Dur, st.DOK
	if !state.Healthy(end, eok, dur, dok, s.boot) || !s.mu.TryLock() {
		return live, nil
	}
	defer s.mu.Unlock()
	if end.Epoch != s.epoch || s.p.NextSeq != end.NextSeq || s.p.Pos != end.Pos {
		return live, nil
	}
	for _, r := range batch {
		if r.early || len(r.t.Moves) == 0 {
			continue
		}
		var c *refs.Conflict
		if err := s.p.Refs.Check(r.t.Moves); errors.As(err, &c) {
			r.early, r.err = true, errs.Ref(err)
			r.seq, r.epoch = end.NextSeq-1, end.Epoch
			live--
		}
	}
	return live, nil
}

// contended reports whether a request of batch moves a ref that another
// writer moves too: one this process has seen moved from a value it did
// not set, now or before (the mark stays: the winner of the last race for
// a shared ref starts the next from its own value). Such a request may
// lose its compare-and-swap while it queues, so it queues with lookahead
// (writelock.Lock.WithIf), which lets it find out and leave early. A writer on
// refs of its own waits once instead.
func (s *Store) contended(batch []*commitReq) bool {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	hit := false
	for _, r := range batch {
		if r.early {
			continue
		}
		for _, m := range r.t.Moves {
			if s.shared[m.Name] {
				hit = true
			} else if s.ownHeads[m.Name] != m.Old {
				if s.shared == nil {
					s.shared = map[string]bool{}
				}
				s.shared[m.Name] = true
				hit = true
			}
		}
	}
	return hit
}

// commitBatch appends every transaction of batch under one hold of the
// writer lock and makes them durable; each request's err is its result.
func (s *Store) commitBatch(batch []*commitReq) {
	// One read of the state serves the catch-up before queueing and the
	// first early conflict check (a system call less a commit).
	st, err := s.st.ReadPair()
	if err == nil {
		err = s.catchUpTo(st.End, st.EOK)
	}
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
		return
	}
	// A transaction whose compare-and-swap has already lost, to a frame
	// published before it queued or while it queued, fails without its
	// turn: with 32 writers racing for one ref, each publish used to cost
	// a lock pass for every loser (about 30 per publish), and the winner,
	// who learns the new head first, was the likeliest to win again.
	// An I/O error on the way is the operation's (C9): it ends the wait
	// and fails every request still waiting.
	var nerr error
	needed := func() bool {
		live, err := s.earlyConflicts(batch, st)
		st = nil
		if err != nil {
			nerr = err
			return false
		}
		return live > 0
	}
	if !needed() {
		if nerr == nil {
			s.writer.RenewPlace()
		}
	} else {
		// A place lost in the queue is kept for a commit that advances
		// a ref: it is retried as one call, and its retry publishes next.
		// A bare ref update is not: its retry usually follows a new
		// commit, and its place would hold up the queue, front and all,
		// until given up (a fifth of the publishes per second of commit
		// then ref CAS, 32 writers). Only a contended batch queues with
		// the checks that can lose it its turn.
		s.writer.FitPlace(func(yield func(string) bool) {
			for _, r := range batch {
				for _, m := range r.t.Moves {
					if !yield(m.Name) {
						return
					}
				}
			}
		})
		contended := s.contended(batch)
		var moves []string
		for _, r := range batch {
			if !contended || len(r.t.Objs) == 0 {
				continue
			}
			for _, m := range r.t.Moves {
				moves = append(moves, m.Name)
			}
		}
		err = s.writer.WithIf(func() error {
			for _, r := range batch {
				if !r.early {
					r.seq, r.epoch, r.err = s.appendLocked(r.t, r.payload, r.digest, r.need)
					r.behind = s.durBehind
				}
			}
			return nil
		}, needed, contended, moves)
	}
	if errors.Is(err, writelock.ErrNotNeeded) || err == nil {
		err = nerr
	}
	if err != nil {
		for _, r := range batch {
			if r.err == nil {
				r.err = err
			}
		}
	}
	// The sync step: one syncTo for the highest frame of each epoch (one
	// epoch, unless a recovery ran inside the batch). A conflict's seq is
	// the end its check saw: a loser must be told only a value every later
	// reader sees (C4, C5), so that end is made durable before the
	// ConflictError is returned, by the same step.
	top := map[uint64]uint64{}
	peek := map[uint64]bool{}
	for _, r := range batch {
		var ce *ConflictError
		if (r.err == nil || errors.As(r.err, &ce)) && r.seq > 0 && r.seq > top[r.epoch] {
			top[r.epoch] = r.seq
		}
		peek[r.epoch] = peek[r.epoch] || r.behind
	}
	if s.o.Weaken&WeakAckBeforeSync != 0 {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			for epoch, seq := range top {
				s.syncer.To(seq, epoch, true)
			}
		}()
		return
	}
	serr := map[uint64]error{}
	for epoch, seq := range top {
		serr[epoch] = s.syncer.To(seq, epoch, peek[epoch])
	}
	acked := false
	for _, r := range batch {
		var ce *ConflictError
		switch {
		case errors.As(r.err, &ce) && r.seq > 0 && serr[r.epoch] != nil:
			r.err = fmt.Errorf("ref %q conflicts, but the value it saw could not be made durable: %w", ce.Ref, serr[r.epoch])
		case r.err == nil:
			r.err = serr[r.epoch]
			acked = acked || r.err == nil
		}
		if r.err == nil && len(r.t.Moves) > 0 {
			s.ownMu.Lock()
			if s.ownHeads == nil {
				s.ownHeads = map[string]ID{}
			}
			for _, m := range r.t.Moves {
				s.ownHeads[m.Name] = m.New
			}
			s.ownMu.Unlock()
		}
	}
	if acked {
		s.maybeCheckpoint()
	}
}

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
	end, ok, err := s.st.Read(state.End)
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
	if !s.mu.TryLock() {
		// Another goroutine of this process is using the projection
		// (appending, or catching it up already).
		return nil
	}
	defer s.mu.Unlock()
	if end.Epoch != s.epoch || s.p.NextSeq >= end.NextSeq {
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
	end, eok, dur, dok, err := s.st.ReadBoth()
	if err != nil {
		return 0, 0, err
	}
	if !state.Healthy(end, eok, dur, dok, s.boot) {
		if _, err := s.recoverLocked(false); err != nil {
			return 0, 0, err
		}
		if end, eok, dur, dok, err = s.st.ReadBoth(); err != nil {
			return 0, 0, err
		}
		if !eok || !dok {
			return 0, 0, errs.Corrupt(s.st.Path(), 0, "state unreadable after recovery")
		}
	}
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	if end.Epoch != s.epoch {
		if err := s.reload(end.Epoch, end.NextSeq); err != nil {
			return 0, 0, err
		}
	}
	if len(t.Objs) > 0 && s.epoch != t.BuiltEpoch {
		return 0, 0, errRebuild
	}
	if err := s.catchUp(end.NextSeq); err != nil {
		return 0, 0, err
	}
	if s.p.NextSeq != end.NextSeq || s.p.Pos != end.Pos {
		return 0, 0, errs.Corrupt(s.st.Path(), 0, "published end %s/%d does not match the journal (%s/%d)",
			end.Pos, end.NextSeq, s.p.Pos, s.p.NextSeq)
	}
	for _, id := range need {
		if l, ok := s.p.Idx.GetKind(id, objects.KindChangeset); !ok || l.Kind != objects.KindChangeset {
			if err := s.p.Idx.TakeErr(); err != nil {
				return 0, 0, err
			}
			return 0, 0, fmt.Errorf("%w: changeset %s", ErrNotFound, id)
		}
	}
	if err := s.p.Refs.Check(t.Moves); err != nil {
		// The conflict reports a value from the projection up to end,
		// which may include frames not yet durable: the caller makes
		// end durable before reporting it (see transact).
		return end.NextSeq - 1, end.Epoch, errs.Ref(err)
	}
	// Whether any changeset of t is in the store already: the check replay
	// would make, made once here and recorded in the frame's kind.
	kind := byte(txn.FrameFresh)
	for _, o := range t.Objs {
		if o.Kind == objects.KindChangeset && s.p.Idx.Has(o.ID, o.Kind) {
			kind = txn.FrameTxn
		}
	}
	if err := s.p.Idx.TakeErr(); err != nil {
		return 0, 0, err
	}
	if s.o.Weaken&WeakFalseFresh != 0 {
		kind = txn.FrameFresh
	}
	seq := end.NextSeq
	s.durBehind = dur.NextSeq != end.NextSeq
	// The append runs without s.mu. A write into the page a sync is
	// writing back waits for it, and crossing into a new window zero-fills
	// it: a snapshot in this process waited behind both (P7). Nothing moves
	// the projection meanwhile: this holds the writer lock, so no recovery
	// can change the epoch, and every catch-up stops at the published end,
	// which is the projection's until the end below is written.
	s.mu.Unlock()
	locked = false
	frame := journal.EncodeFrame(s.key, kind, seq, dur.NextSeq-1, payload, digest)
	at, err := s.w.Append(end.Pos, seq, frame)
	if err != nil {
		s.w.Close()
		return 0, 0, errs.IO(fmt.Sprintf("append frame %d to %s", seq, journal.SegName(at.Seg)), err)
	}
	s.mu.Lock()
	locked = true
	if s.epoch != end.Epoch || s.p.NextSeq != seq || s.p.Pos != end.Pos {
		return 0, 0, fmt.Errorf("%w: the projection moved to %s/%d while frame %d was appended at %s",
			ErrIO, s.p.Pos, s.p.NextSeq, seq, end.Pos)
	}
	fr := &journal.Frame{Kind: kind, Seq: seq, Watermark: dur.NextSeq - 1, Payload: payload, Pos: at, Size: int64(len(frame))}
	newEnd := state.Rec{Epoch: end.Epoch, Pos: fr.End(), NextSeq: seq + 1, Boot: s.boot}
	if err := s.st.Write(state.End, newEnd); err != nil {
		return 0, 0, err
	}
	// The in-memory moves carry the time as a replay decodes it.
	t.Time = time.Unix(0, t.Time.UnixNano()).UTC()
	if err := s.p.ApplyTxn(fr, t, s.jcfg.SegPath(at.Seg)); err != nil {
		return 0, 0, err
	}
	s.markLocked()
	return seq, end.Epoch, nil
}
