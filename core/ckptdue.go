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
// it; so does a frame with a big head that this process appended between
// them (noteAppended).
func (s *Store) dueAfter(ckSeq uint64, ckPos journal.Pos, seq uint64, pos journal.Pos) bool {
	if seq >= ckSeq+uint64(s.opts.CheckpointEvery) {
		return true
	}
	if h := s.bigHead.Load(); h != 0 && h >= ckSeq && h < seq {
		return true
	}
	return seq > ckSeq && journal.Distance(ckPos, pos, s.opts.SegmentSize) >= s.opts.CheckpointBytes
}

// A frame whose replay reads a sixteenth of CheckpointBytes (B), and at
// least bigHeadMin, makes a checkpoint due right after it: 256 KiB at the
// default B. Below 64 KiB an open reads the head in less time than the
// checkpoint's syncs would cost the commit.
const (
	bigHeadShare = 16
	bigHeadMin   = 64 << 10
)

// noteAppended records the frame seq this process appended, with its split
// head's length (0: not split) and its payload's: replay reads a split
// frame's head and any other frame whole. One that would make every later
// open read a big head (see bigHeadShare; the trees and blob ids of Go's
// src are a 680 KB head) makes a checkpoint due after it (dueAfter),
// even though the journal bytes since the last are short of B: the
// process that appended it writes the checkpoint before it closes, and
// no later command replays the frame. Commits with smaller heads are
// unaffected.
func (s *Store) noteAppended(seq uint64, head, payload int) {
	replay := int64(head)
	if head == 0 {
		replay = int64(payload)
	}
	if replay < max(s.opts.CheckpointBytes/bigHeadShare, bigHeadMin) {
		return
	}
	for {
		old := s.bigHead.Load()
		if old >= seq || s.bigHead.CompareAndSwap(old, seq) {
			return
		}
	}
}
