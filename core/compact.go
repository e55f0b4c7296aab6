package core

import (
	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/proj"
)

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
