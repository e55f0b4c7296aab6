package core

import "github.com/swarmops/swarmops/core/journal"

// ckptMark is a checkpoint as the due check needs it: the next sequence
// number it covers up to and the journal position it starts replay at.
type ckptMark struct {
	next uint64
	pos  journal.Pos
}

// noteCheckpoint records that a checkpoint covering the frames before
// next (replay starting at pos) exists, unless a newer one is known.
func (s *Store) noteCheckpoint(next uint64, pos journal.Pos) {
	m := &ckptMark{next: next, pos: pos}
	for {
		old := s.ckptKnown.Load()
		if old != nil && old.next >= next {
			return
		}
		if s.ckptKnown.CompareAndSwap(old, m) {
			return
		}
	}
}

// ckptNext is the next seq of the newest checkpoint this process knows.
func (s *Store) ckptNext() uint64 { return s.ckptKnown.Load().next }

// dueAfter reports whether a checkpoint at (seq, pos) is due after one at
// (ckSeq, ckPos): when the frames between them reach CheckpointEvery (K),
// or their bytes reach CheckpointBytes (B). Either bound alone leaves
// replay unbounded in the other: K frames of a large import were tens of
// megabytes for every later open to replay, and B bytes of one-sector
// commits are thousands of frames to decode. A frame of B bytes or more
// makes a checkpoint due right after it, so the next open replays none of
// it.
func (s *Store) dueAfter(ckSeq uint64, ckPos journal.Pos, seq uint64, pos journal.Pos) bool {
	if seq >= ckSeq+uint64(s.opts.CheckpointEvery) {
		return true
	}
	return seq > ckSeq && journal.Distance(ckPos, pos, s.opts.SegmentSize) >= s.opts.CheckpointBytes
}
