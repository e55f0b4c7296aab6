package core

import (
	"errors"
	"fmt"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/groupsync"
	"github.com/swarmops/swarmops/core/internal/recovery"
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
		return rep, s.refreshLocked(end.Epoch, end.GC, end.NextSeq)
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
	in := recovery.Input{FS: s.fs, Dir: s.dir, Journal: s.jcfg, Reader: s.view.reader, Checkpoint: c,
		State: s.state, End: end, Dur: dur, EOK: eok, DOK: dok, Boot: s.boot}
	p, epoch, err := recovery.Run(in, &rr)
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
	s.view.epoch, s.view.gc = epoch, recovery.GC(in)
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
