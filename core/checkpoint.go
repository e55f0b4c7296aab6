package core

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Checkpoint writes a checkpoint of the durable prefix now, whatever the
// number of frames since the last one, so that the next open or recovery
// replays no journal: what a tool does before it leaves a store idle, as
// SQLite's wal_checkpoint or Pebble's Flush. It waits up to LockTimeout for
// a checkpoint another process is writing (ErrBusy after that), then makes
// the index merges that are due (unless another process is compacting).
// Like every checkpoint it changes no data, and its failure leaves the
// previous checkpoint valid.
func (s *Store) Checkpoint() error {
	if err := s.usable(); err != nil {
		return err
	}
	busy, err := s.checkpointWithin(s.opts.LockTimeout, true)
	if busy {
		return fmt.Errorf("checkpoint lock of %s not taken within %v: %w", s.dir, s.opts.LockTimeout, err)
	}
	if err != nil {
		return err
	}
	// And the merges it makes due, unless another process is compacting.
	return s.compactor.Loop()
}

// checkpointDue reports whether a checkpoint is due past the newest one
// this process knows of (dueAfter).
func (s *Store) checkpointDue() bool {
	k := s.ckptKnown.Load()
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.dueAfter(k.next, k.pos, s.view.proj.NextSeq, s.view.proj.Pos)
}

// checkpointNow writes a checkpoint of the durable prefix if it can take
// CKPTLOCK at once (another process writing one makes this one
// unnecessary, so a busy lock is not an error). force writes one even if
// few frames are new. It returns every I/O error, typed.
func (s *Store) checkpointNow(force bool) error {
	if busy, err := s.checkpointWithin(0, force); !busy {
		return err
	}
	return nil
}

// checkpointWithin writes a checkpoint under CKPTLOCK, waiting up to
// timeout for it. busy reports that the lock was not had in time (err is
// then the lock's ErrBusy); every other error is typed.
func (s *Store) checkpointWithin(timeout time.Duration, force bool) (busy bool, err error) {
	l, err := s.fs.Lock(s.lockPath(ckpt.LockName), timeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return true, err
		}
		return false, errs.IO("checkpoint lock", err)
	}
	if err = s.checkDir(); err == nil {
		err = s.checkpointLocked(force)
	}
	if uerr := l.Unlock(); uerr != nil && err == nil {
		err = errs.IO("checkpoint unlock", uerr)
	}
	return false, err
}

// checkpointLocked writes a checkpoint of the durable prefix, if one is
// due (or force), or else makes the projection use the runs of a newer
// checkpoint another process wrote. Caller holds CKPTLOCK.
func (s *Store) checkpointLocked(force bool) error {
	cur, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	s.noteCheckpoint(cur.NextSeq, cur.Pos)
	dur, ok, err := s.state.ReadStable(state.Durable, s.boot)
	if err != nil {
		return err
	}
	if !ok {
		// The state is being recovered (or was lost): the next opener
		// recovers, and a later checkpoint covers its prefix.
		return nil
	}
	batch, rnames, rlogs, due, err := s.checkpointBatch(cur, dur, force)
	if err != nil || !due {
		return err
	}
	defer cur.Proj.Idx.Close()
	return s.publishCheckpoint(cur, dur, batch, rnames, rlogs)
}

// checkpointBatch gathers, under view.mu, what a checkpoint of the durable
// prefix dur past the current checkpoint cur holds: the index records of
// the frames since cur (batch) and their ref moves (rnames, rlogs). due is
// false when none is due, after the projection has swapped its tail for
// cur's runs if another process wrote cur.
func (s *Store) checkpointBatch(cur *ckpt.Checkpoint, dur state.Rec, force bool) (batch index.Batch, rnames []string, rlogs [][]refs.Entry, due bool, err error) {
	s.view.mu.Lock()
	if dur.Epoch != s.view.epoch || (!force && !s.dueAfter(cur.NextSeq, cur.Pos, dur.NextSeq, dur.Pos)) {
		// Another process wrote the checkpoint this one was due for: the
		// projection swaps its tail of the frames before it for the
		// checkpoint's runs, as after a checkpoint of its own. Without
		// this, every process but the one that happened to write each
		// checkpoint kept every frame it replayed in memory: with 32
		// writers, maps that grew without end, and their growth was a
		// quarter of the page faults of W2.
		adopt := cur.Epoch == s.view.epoch && cur.NextSeq > s.view.proj.CkptSeq && s.view.proj.NextSeq >= cur.NextSeq
		s.view.mu.Unlock()
		if adopt {
			x := cur.Proj.Idx.Detach() // installIndex owns the open runs now
			s.installIndex(x, cur.Runs, cur.NextSeq, cur.Epoch, cur.ReflogLen)
		}
		return batch, nil, nil, false, nil
	}
	defer s.view.mu.Unlock()
	if err := s.catchUp(dur.NextSeq); err != nil {
		return batch, nil, nil, false, err
	}
	// The projection may include frames past the durable position; the
	// checkpoint covers exactly the durable prefix. The records of the frames
	// since the current checkpoint become a new index run (durable before the
	// checkpoint names it); the ref table goes into the checkpoint.
	batch = s.view.proj.Idx.BatchBetween(cur.NextSeq, dur.NextSeq)
	if b := s.view.proj.Refs.Base(); b > cur.NextSeq {
		return batch, nil, nil, false, fmt.Errorf("%w: the ref table holds moves from frame %d on, the checkpoint needs them from %d", ErrIO, b, cur.NextSeq)
	}
	rnames, rlogs = s.view.proj.Refs.Since(cur.NextSeq, dur.NextSeq)
	return batch, rnames, rlogs, true, nil
}

// publishCheckpoint writes the new run, the reflog chunk and the
// checkpoint naming them, in that order, each durable before the next
// names it, and swaps the projection's tail for the runs.
func (s *Store) publishCheckpoint(cur *ckpt.Checkpoint, dur state.Rec, batch index.Batch, rnames []string, rlogs [][]refs.Entry) error {
	// Replay does not look blobs and trees up in the runs, so the tail may
	// repeat some the runs hold: they stay out of the new run.
	cur.Proj.Idx.ExpectObjectChecks(len(batch.Objects))
	objs := batch.Objects[:0]
	for _, o := range batch.Objects {
		if !cur.Proj.Idx.Has(ID(o.ID), o.Kind) {
			objs = append(objs, o)
		}
	}
	if err := cur.Proj.Idx.TakeErr(); err != nil {
		return err
	}
	batch.Objects = objs
	names := append([]string(nil), cur.Runs...)
	if len(batch.Changesets)+len(batch.Objects) > 0 {
		// Merging runs is compaction's (internal/compact), after this
		// checkpoint is published: a merge inside it held every later
		// checkpoint back for as long as the merge took.
		name := ckpt.RunName(dur.NextSeq, dur.Epoch, "")
		r, err := index.WriteRun(s.fs, path.Join(s.dir, ckpt.IndexDir, name), dur.NextSeq, batch)
		if err != nil {
			return errs.Index("write index run", err)
		}
		r.Close()
		names = append([]string{name}, names...)
	}
	// The moves since the current checkpoint go to the reflog file, durable
	// before the checkpoint names its new length; the checkpoint keeps only
	// each ref's last move.
	reflogLen := cur.ReflogLen
	if len(rnames) > 0 {
		var err error
		chunk := reflog.EncodeChunk(cur.NextSeq, dur.NextSeq, rnames, rlogs)
		if reflogLen, err = reflog.Append(s.fs, s.dir, cur.ReflogLen, chunk, s.opts.weaken&testknobs.SkipReflogSync != 0); err != nil {
			return err
		}
	}
	s.view.mu.Lock()
	rt := s.view.proj.Refs
	if s.opts.weaken&testknobs.DropProtections != 0 {
		rt = rt.Unprotected()
	}
	b := ckpt.Encode(s.id, dur.Pos, dur.NextSeq, dur.Epoch, names, reflogLen, rt)
	s.view.mu.Unlock()
	if err := ckpt.Write(s.fs, s.dir, b, false); err != nil {
		return err
	}
	s.noteCheckpoint(dur.NextSeq, dur.Pos)
	// The checkpoint naming the new run list is durable: the projection
	// swaps its tail for the runs.
	return s.installRuns(names, dur.NextSeq, dur.Epoch, reflogLen)
}

// adoptForReader swaps the projection's tail for the runs of a newer
// checkpoint once the tail holds more than 2K frames. Writers do this when
// they are due for a checkpoint (checkpointLocked); a process that only
// reads never is, and its tail held every frame it had replayed, without
// end in a long-lived process beside busy writers. It is best effort: a
// busy CKPTLOCK (held while a checkpoint or a merge installs runs), an I/O
// error or no newer checkpoint leaves the projection as it is, complete,
// and it tries again K frames later.
func (s *Store) adoptForReader() {
	k := uint64(s.opts.CheckpointEvery)
	s.view.mu.Lock()
	next, base := s.view.proj.NextSeq, s.view.proj.CkptSeq
	s.view.mu.Unlock()
	if next < base+2*k || next < s.adopt.tried.Load()+k || !s.adopt.running.CompareAndSwap(false, true) {
		return
	}
	defer s.adopt.running.Store(false)
	s.adopt.tried.Store(next)
	l, err := s.fs.Lock(s.lockPath(ckpt.LockName), 0)
	if err != nil {
		return
	}
	defer l.Unlock()
	// The checkpoint file alone first: its runs are opened only if it is
	// newer than the projection's.
	cur, err := ckpt.ReadFile(s.fs, s.dir)
	if err != nil || cur.NextSeq <= base {
		return
	}
	x, err := ckpt.OpenRuns(s.fs, s.dir, cur.Runs)
	if err != nil {
		return
	}
	s.noteCheckpoint(cur.NextSeq, cur.Pos)
	s.installIndex(x, cur.Runs, cur.NextSeq, cur.Epoch, cur.ReflogLen)
}

// installRuns makes the projection use the runs of a durable checkpoint at
// (nextSeq, epoch): it swaps its tail of earlier frames for them, if it has
// replayed that far in that epoch. If the runs cannot be opened the
// projection keeps what it has (still complete), and the error is the
// caller's (C9).
func (s *Store) installRuns(names []string, nextSeq, epoch uint64, reflogLen int64) error {
	x, err := ckpt.OpenRuns(s.fs, s.dir, names)
	if err != nil {
		return err
	}
	s.installIndex(x, names, nextSeq, epoch, reflogLen)
	return nil
}

// installIndex is installRuns with the runs already open; it owns x.
func (s *Store) installIndex(x *index.Index, names []string, nextSeq, epoch uint64, reflogLen int64) {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if s.view.epoch != epoch || s.view.proj.NextSeq < nextSeq || nextSeq < s.view.proj.CkptSeq {
		x.Close()
		return
	}
	old := s.view.proj.Idx
	nx := proj.NewRunIdx(x, names)
	nx.SetCache(s.blk)
	nx.Mem = old.Since(nextSeq)
	s.view.proj.Idx = nx
	s.view.proj.CkptSeq = nextSeq
	old.Retire()
	s.view.proj.Refs.Trim(nextSeq)
	s.view.proj.ReflogLen = reflogLen
}
