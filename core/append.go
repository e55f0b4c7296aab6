package core

import (
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/pipeline"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// pipeEnv is the store as its commit pipeline sees it (pipeline.Env).
type pipeEnv Store

// ReadState reads both state records.
func (e *pipeEnv) ReadState() (*state.Both, error) { return e.state.ReadPair() }

// CatchUp replays, without the writer lock, the frames published up to the
// end read (catchUpTo).
func (e *pipeEnv) CatchUp(st *state.Both) error { return (*Store)(e).catchUpTo(st.End, st.EOK) }

// EarlyRefs lends the projection's ref table for the early conflict checks
// when it is exactly at st's end on a healthy store and not in use: it
// returns with view.mu held, which EarlyDone releases.
func (e *pipeEnv) EarlyRefs(st *state.Both) *refs.Table {
	s := (*Store)(e)
	end := st.End
	if !state.Healthy(end, st.EOK, st.Dur, st.DOK, s.boot) || !s.view.mu.TryLock() {
		return nil
	}
	if end.Epoch != s.view.epoch || s.view.proj.NextSeq != end.NextSeq || s.view.proj.Pos != end.Pos {
		s.view.mu.Unlock()
		return nil
	}
	return s.view.proj.Refs
}

// EarlyDone ends the loan of EarlyRefs.
func (e *pipeEnv) EarlyDone() { e.view.mu.Unlock() }

// Append is the critical section (appendLocked); behind is what the last
// append of this process found.
func (e *pipeEnv) Append(r *pipeline.Request) (seq, epoch uint64, behind bool, err error) {
	s := (*Store)(e)
	seq, epoch, err = s.appendLocked(r.Txn, r.Payload, r.Digests, r.Need)
	return seq, epoch, s.appender.behind, err
}

// Sync is the sync step (groupsync).
func (e *pipeEnv) Sync(seq, epoch uint64, peek bool) error { return e.syncer.To(seq, epoch, peek) }

// Acked schedules a checkpoint if one is due.
func (e *pipeEnv) Acked() { e.sched.Acked() }

// appendLocked is the critical section: read the tail state, catch up,
// check, append, publish the end. Caller holds LOCK. For a failed ref
// compare-and-swap it returns the end the check saw (seq, epoch) with the
// *ConflictError: the caller makes that end durable before reporting it.
func (s *Store) appendLocked(t *txn.Txn, payload []byte, digests journal.Digests, need []ID) (uint64, uint64, error) {
	end, dur, err := s.stateForAppend()
	if err != nil {
		return 0, 0, err
	}
	s.view.mu.Lock()
	kind, refErr, err := s.checkLocked(t, need, end)
	if err != nil || refErr != nil {
		s.view.mu.Unlock()
		if err != nil {
			return 0, 0, err
		}
		// The conflict reports a value from the projection up to end,
		// which may include frames not yet durable.
		return end.NextSeq - 1, end.Epoch, refErr
	}
	seq := end.NextSeq
	s.appender.behind = dur.NextSeq != end.NextSeq
	// The append runs without view.mu. A write into the page a sync is
	// writing back waits for it, and crossing into a new window zero-fills
	// it: a snapshot in this process waited behind both (P7). Nothing moves
	// the projection meanwhile: this holds the writer lock, so no recovery
	// can change the epoch, and every catch-up stops at the published end,
	// which is the projection's until the end below is written.
	s.view.mu.Unlock()
	frame := journal.EncodeFrameDigests(s.key, kind, seq, dur.NextSeq-1, payload, digests)
	at, err := s.appender.w.AppendRoll(end.Pos, seq, frame, t.Roll)
	if err != nil {
		s.appender.w.Close()
		return 0, 0, errs.IO(fmt.Sprintf("append frame %d to %s", seq, journal.SegName(at.Seg)), err)
	}
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if s.view.epoch != end.Epoch || s.view.proj.NextSeq != seq || s.view.proj.Pos != end.Pos {
		return 0, 0, fmt.Errorf("%w: the projection moved to %s/%d while frame %d was appended at %s",
			ErrIO, s.view.proj.Pos, s.view.proj.NextSeq, seq, end.Pos)
	}
	fr := &journal.Frame{Kind: kind, Seq: seq, Watermark: dur.NextSeq - 1, Payload: payload, Len: len(payload), Head: digests.Head,
		Pos: at, Size: int64(len(frame))}
	newEnd := state.Rec{Epoch: end.Epoch, Pos: fr.End(), NextSeq: seq + 1, Boot: s.boot, GC: end.GC}
	if err := s.state.Write(state.End, newEnd); err != nil {
		return 0, 0, err
	}
	// The in-memory moves carry the time as a replay decodes it.
	t.Time = time.Unix(0, t.Time.UnixNano()).UTC()
	if err := s.view.proj.ApplyTxn(fr, t, &s.jcfg); err != nil {
		return 0, 0, err
	}
	t.Seq = seq
	s.markLocked()
	s.noteAppended(seq, digests.Head, len(payload))
	return seq, end.Epoch, nil
}

// stateForAppend reads both state records under LOCK, recovering first if
// they cannot be trusted.
func (s *Store) stateForAppend() (end, dur state.Rec, err error) {
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return end, dur, err
	}
	if !state.Healthy(end, eok, dur, dok, s.boot) {
		if _, err := s.recoverLocked(false); err != nil {
			return end, dur, err
		}
		if end, eok, dur, dok, err = s.state.ReadBoth(); err != nil {
			return end, dur, err
		}
		if !eok || !dok {
			return end, dur, errs.Corrupt(s.state.Path(), 0, "state unreadable after recovery")
		}
	}
	return end, dur, nil
}

// checkLocked brings the projection to the published end and checks t
// against it: the epoch it was built in, the changesets it needs, and its
// ref moves (refErr, the compare-and-swap that failed). It returns the
// kind of t's frame: fresh when no changeset of t is in the store already,
// the check replay would make, made once here and recorded in the frame.
// Caller holds LOCK and view.mu.
func (s *Store) checkLocked(t *txn.Txn, need []ID, end state.Rec) (kind byte, refErr, err error) {
	if end.Epoch != s.view.epoch || end.GC != s.view.gc {
		// A recovery started a new epoch, or a garbage collection
		// installed an index without what it reclaimed: the projection
		// rereads the checkpoint, so this check and the next build see
		// only what the store keeps.
		if err := s.reload(end.Epoch, end.GC, end.NextSeq); err != nil {
			return 0, nil, err
		}
	}
	if len(t.Objs) > 0 && (s.view.epoch != t.BuiltEpoch || (s.view.gc != t.BuiltGC && s.opts.weaken&testknobs.GCSkipsRebuild == 0)) {
		// The builder left objects out as already stored; a recovery may
		// have cut them, or a garbage collection reclaimed them.
		return 0, nil, errRebuild
	}
	if err := s.catchUp(end.NextSeq); err != nil {
		return 0, nil, err
	}
	p := s.view.proj
	if p.NextSeq != end.NextSeq || p.Pos != end.Pos {
		return 0, nil, errs.Corrupt(s.state.Path(), 0, "published end %s/%d does not match the journal (%s/%d)",
			end.Pos, end.NextSeq, p.Pos, p.NextSeq)
	}
	for _, id := range need {
		if l, ok := p.Idx.GetKind(id, objects.KindChangeset); !ok || l.Kind != objects.KindChangeset {
			if err := p.Idx.TakeErr(); err != nil {
				return 0, nil, err
			}
			return 0, nil, fmt.Errorf("%w: changeset %s", ErrNotFound, id)
		}
	}
	if err := p.Refs.CheckProtected(t.Origin.Op, t.Moves); err != nil {
		return 0, errs.Ref(err), nil
	}
	if err := p.Refs.CheckIf(t.Moves, s.opts.weaken&testknobs.CASIfExists != 0); err != nil {
		return 0, errs.Ref(err), nil
	}
	kind = txn.FrameFresh
	for _, o := range t.Objs {
		if o.Kind == objects.KindChangeset && p.Idx.Has(o.ID, o.Kind) {
			kind = txn.FrameTxn
		}
	}
	if err := p.Idx.TakeErr(); err != nil {
		return 0, nil, err
	}
	if s.opts.weaken&testknobs.FalseFresh != 0 {
		kind = txn.FrameFresh
	}
	return kind, nil, nil
}
