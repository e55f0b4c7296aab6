package core

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/groupsync"
	"github.com/swarmops/swarmops/core/internal/recovery"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
)

// recoverLocked re-establishes the durable prefix (core/internal/recovery)
// and installs the recovered projection. Caller holds LOCK; it takes
// SYNCLOCK too, so no writer appends and no syncer publishes while it runs.
// When the state is healthy it only catches the projection up, unless
// explicit, in which case it verifies every frame up to the end, syncs and
// publishes durable = end, cutting nothing.
func (s *Store) recoverLocked(explicit bool) (*RecoverReport, error) {
	l, err := s.fs.Lock(s.lockPath(groupsync.LockName), s.opts.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("sync lock of %s: %w", s.dir, err)
		}
		return nil, errs.IO("sync lock", err)
	}
	defer l.Unlock()
	rep := &RecoverReport{}
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return nil, err
	}
	if state.Healthy(end, eok, dur, dok, s.boot) && !explicit {
		s.view.mu.Lock()
		defer s.view.mu.Unlock()
		if end.Epoch != s.view.epoch {
			return rep, s.reload(end.Epoch, end.NextSeq)
		}
		return rep, s.catchUp(end.NextSeq)
	}
	c, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return rep, err
	}
	if c.Store != s.id {
		return rep, errs.Corrupt(s.dir+"/checkpoint", 0, "checkpoint names another store")
	}
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	s.view.reader.Forget()
	s.appender.w.Close()
	var rr recovery.Report
	p, epoch, err := recovery.Run(recovery.Input{FS: s.fs, Dir: s.dir, Journal: s.jcfg, Reader: s.view.reader, Checkpoint: c,
		State: s.state, End: end, Dur: dur, EOK: eok, DOK: dok, Boot: s.boot}, &rr)
	rep.TornBytesCut, rep.FramesReplayed = rr.TornBytesCut, rr.FramesReplayed
	for _, ce := range rr.Corrupt {
		rep.Corrupt = append(rep.Corrupt, VerifyProblem{File: ce.File, Offset: ce.Offset, Reason: ce.Reason})
	}
	if err != nil {
		c.Proj.Idx.Close()
		return rep, err
	}
	if s.view.proj != nil {
		s.view.proj.Idx.Retire()
	}
	s.view.proj = p
	s.view.proj.Idx.SetCache(s.blk)
	s.view.epoch = epoch
	s.markLocked()
	s.csc.Clear()
	s.poisoned.Store(false)
	return rep, nil
}

// Recover is the explicit repair: it takes the writer lock, replays the
// journal from the checkpoint, cuts a torn tail if the state says one may
// exist, syncs and publishes, and reports what it did. On corruption inside
// the durable prefix it changes nothing and returns the report with the
// problem and a *CorruptError. It then writes a checkpoint of the recovered
// prefix; if that fails the error is returned (typed, wrapping the cause)
// with the report: the recovery itself stands, and the old checkpoint stays
// valid, so the store still opens.
func Recover(dir string, o Options) (*RecoverReport, error) {
	s, err := openStore(dir, o)
	if err != nil {
		return nil, err
	}
	defer s.closeFiles()
	var rep *RecoverReport
	err = s.writer.With(func() error {
		var err error
		rep, err = s.recoverLocked(true)
		return err
	})
	if err != nil {
		return rep, err
	}
	if err := s.checkpointNow(true); err != nil {
		return rep, fmt.Errorf("recovered, but the checkpoint after it failed: %w", err)
	}
	return rep, nil
}

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

// checkpointDue reports whether CheckpointEvery frames have passed the
// newest checkpoint this process knows of.
func (s *Store) checkpointDue() bool {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.proj.NextSeq >= s.ckptNext.Load()+uint64(s.opts.CheckpointEvery)
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
	err = s.checkpointLocked(force)
	if uerr := l.Unlock(); uerr != nil && err == nil {
		err = errs.IO("checkpoint unlock", uerr)
	}
	return false, err
}

func (s *Store) checkpointLocked(force bool) error {
	cur, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	s.ckptNext.Store(max(s.ckptNext.Load(), cur.NextSeq))
	dur, ok, err := s.state.ReadStable(state.Durable, s.boot)
	if err != nil {
		return err
	}
	if !ok {
		// The state is being recovered (or was lost): the next opener
		// recovers, and a later checkpoint covers its prefix.
		return nil
	}
	s.view.mu.Lock()
	if dur.Epoch != s.view.epoch || (!force && dur.NextSeq < cur.NextSeq+uint64(s.opts.CheckpointEvery)) {
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
		return nil
	}
	if err := s.catchUp(dur.NextSeq); err != nil {
		s.view.mu.Unlock()
		return err
	}
	// The projection may include frames past the durable position; the
	// checkpoint covers exactly the durable prefix. The records of the frames
	// since the current checkpoint become a new index run (durable before the
	// checkpoint names it); the ref table goes into the checkpoint.
	batch := s.view.proj.Idx.BatchBetween(cur.NextSeq, dur.NextSeq)
	if b := s.view.proj.Refs.Base(); b > cur.NextSeq {
		s.view.mu.Unlock()
		return fmt.Errorf("%w: the ref table holds moves from frame %d on, the checkpoint needs them from %d", ErrIO, b, cur.NextSeq)
	}
	rnames, rlogs := s.view.proj.Refs.Since(cur.NextSeq, dur.NextSeq)
	s.view.mu.Unlock()
	defer cur.Proj.Idx.Close()
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
		// Merging runs is compaction's (compact.go), after this
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
		chunk := reflog.EncodeChunk(cur.NextSeq, dur.NextSeq, rnames, rlogs)
		if reflogLen, err = reflog.Append(s.fs, s.dir, cur.ReflogLen, chunk); err != nil {
			return err
		}
	}
	s.view.mu.Lock()
	b := ckpt.Encode(s.id, dur.Pos, dur.NextSeq, dur.Epoch, names, reflogLen, s.view.proj.Refs)
	s.view.mu.Unlock()
	if err := ckpt.Write(s.fs, s.dir, b, false); err != nil {
		return err
	}
	s.ckptNext.Store(dur.NextSeq)
	// The checkpoint naming the new run list is durable: the projection
	// swaps its tail for the runs.
	return s.installRuns(names, dur.NextSeq, dur.Epoch, reflogLen)
}
