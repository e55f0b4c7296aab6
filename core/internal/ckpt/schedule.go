package ckpt

import (
	"fmt"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/internal/lockorder"
)

// LockName is the checkpoint lock's file name in the store directory: one
// process writes or installs a checkpoint at a time.
const LockName = "CKPTLOCK"

// SchedulerConfig is what a Scheduler works with.
type SchedulerConfig struct {
	// Inline runs the checkpoint after an acknowledged commit in the
	// committing call (core.Options.InlineCheckpoint); otherwise it runs on
	// a goroutine started with Background.
	Inline     bool
	Background func(fn func())
	// Due reports whether CheckpointEvery frames have passed the newest
	// checkpoint the process knows of.
	Due func() bool
	// Known returns the next seq of the newest checkpoint the process
	// knows of, which a checkpoint written (by it or another) advances.
	Known func() uint64
	// Write writes a checkpoint unless another process is writing one.
	Write func() error
	// Compact makes the index merges that are due, unless another process
	// is compacting.
	Compact func() error
}

// Scheduler decides when a process writes checkpoints and compacts: after
// acknowledged commits, off the commit path, one of each at a time, and
// keeps the first error for the process's Close.
type Scheduler struct {
	cfg        SchedulerConfig
	running    atomic.Bool // a checkpoint pass is running
	compacting atomic.Bool // a background compaction is running
	// failure is the first error of a checkpoint or compaction run after
	// an acknowledged commit; mu guards err.
	failure struct {
		mu  lockorder.Mutex[lockorder.Leaf]
		err error
	}
}

// NewScheduler returns a scheduler.
func NewScheduler(c SchedulerConfig) *Scheduler { return &Scheduler{cfg: c} }

// Acked writes a checkpoint when one is due. It runs after a commit is
// acknowledged, off the commit path: on a background goroutine, or inline
// in the committing call (Inline). A checkpoint is an optimization of
// recovery (the journal stays authoritative), so its failure never turns
// the acknowledged commit into an error; it is recorded and returned by
// Failed.
//
// The background goroutine goes again while a checkpoint is still due when
// it finishes: commits that arrived during a checkpoint would otherwise
// find one running, skip theirs, and leave recovery more than K frames to
// replay once the writers stop (C7). It stops on an error or when a pass
// made no progress (another process holds CKPTLOCK). The store's Close
// waits for it, so a store closed right after a burst of commits leaves
// less than K frames past its newest checkpoint.
func (s *Scheduler) Acked() {
	if !s.cfg.Due() || !s.running.CompareAndSwap(false, true) {
		return
	}
	if s.cfg.Inline {
		defer s.running.Store(false)
		err := s.cfg.Write()
		if err == nil {
			err = s.cfg.Compact()
		}
		s.record(err)
		return
	}
	s.cfg.Background(func() {
		defer s.running.Store(false)
		for {
			before := s.cfg.Known()
			if err := s.cfg.Write(); err != nil {
				s.record(err)
				return
			}
			s.compact()
			if s.cfg.Known() == before || !s.cfg.Due() {
				return
			}
		}
	})
}

// compact starts a background compaction unless this process runs one
// already, so that checkpoints go on while it merges.
func (s *Scheduler) compact() {
	if !s.compacting.CompareAndSwap(false, true) {
		return
	}
	s.cfg.Background(func() {
		defer s.compacting.Store(false)
		s.record(s.cfg.Compact())
	})
}

// record keeps the first error.
func (s *Scheduler) record(err error) {
	if err == nil {
		return
	}
	s.failure.mu.Lock()
	if s.failure.err == nil {
		s.failure.err = err
	}
	s.failure.mu.Unlock()
}

// Failed returns (and clears) the recorded error, wrapped to say that no
// acknowledged commit is affected.
func (s *Scheduler) Failed() error {
	s.failure.mu.Lock()
	defer s.failure.mu.Unlock()
	err := s.failure.err
	s.failure.err = nil
	if err == nil {
		return nil
	}
	return fmt.Errorf("a checkpoint after an acknowledged commit failed (every acknowledged commit is durable; recovery replays more journal until a checkpoint succeeds): %w", err)
}
