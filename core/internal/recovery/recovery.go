// Package recovery re-establishes the durable prefix of a store's journal
// from its checkpoint: it replays the frames after the checkpoint into a
// projection, fails closed when a frame known to be durable is missing or
// damaged, cuts a torn tail, makes what it kept durable and publishes it
// in the state file. The caller holds the writer lock and the sync lock, so
// no writer appends and no syncer publishes meanwhile.
//
// Every step is idempotent and never touches bytes before the stop: a crash
// at any point leaves a store the next recovery handles the same way (C10).
package recovery

import (
	"errors"
	"path"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
)

// Input is what a recovery reads and writes.
type Input struct {
	FS  vfs.FS
	Dir string // the store directory
	// Journal is the journal's configuration, and Reader a reader of it
	// with no open segment kept from before (Forget): recovery may cut
	// and remove segments.
	Journal journal.Config
	Reader  *journal.Reader
	// Checkpoint is the store's current checkpoint, with its runs open.
	Checkpoint *ckpt.Checkpoint
	// State is the state file, and End, Dur (EOK, DOK: each valid) the
	// records read from it under both locks.
	State    *state.File
	End, Dur state.Rec
	EOK, DOK bool
	// Boot is state.BootHash of the current boot.
	Boot [16]byte
}

// Report says what a recovery did.
type Report struct {
	TornBytesCut   int64
	FramesReplayed int64
	// Corrupt lists the damage that made it fail closed.
	Corrupt []*errs.CorruptError
}

// Run recovers. What it does depends on the state records:
//
//   - healthy (same boot, valid, not poisoned): it verifies every frame up
//     to the end, syncs and publishes durable = end, cutting nothing (an
//     explicit recovery of a healthy store).
//   - poisoned by a failed sync in this boot: frames past the durable
//     position were never acknowledged and their pages cannot be trusted
//     (the kernel may have dropped them), so it cuts at the durable
//     position.
//   - otherwise (power loss: another boot, or an unreadable state): it
//     scans from the checkpoint to the last valid frame, fails closed if
//     that loses a frame known durable (checkpoint, an old durable record,
//     or a later frame's watermark), and cuts the torn tail.
//
// It returns the projection of the recovered prefix (the checkpoint's,
// replayed) and the epoch it published: a new one when it cut. On error
// the projection is not returned and its runs stay open for the caller to
// close.
func Run(in Input, rep *Report) (*proj.Proj, uint64, error) {
	c, end, dur := in.Checkpoint, in.End, in.Dur
	p := c.Proj
	healthy := state.Healthy(end, in.EOK, dur, in.DOK, in.Boot)
	durableSeq := c.NextSeq - 1
	if in.DOK && dur.NextSeq-1 > durableSeq {
		durableSeq = dur.NextSeq - 1
	}
	var limit uint64
	cut := true
	switch {
	case healthy:
		limit, cut = end.NextSeq, false
	case in.DOK && dur.Boot == in.Boot && dur.Flags&state.FlagPoisoned != 0:
		limit = dur.NextSeq
	}
	res, err := replay(in, p, limit, durableSeq, rep)
	if err != nil {
		return nil, 0, err
	}
	if cut {
		n, err := in.Reader.CutTail(res.End)
		rep.TornBytesCut = n
		if err != nil {
			return nil, 0, errs.IO("cut torn tail", err)
		}
	}
	if err := in.Journal.Sync(c.Pos.Seg, res.End.Seg); err != nil {
		return nil, 0, errs.IO("sync journal after recovery", err)
	}
	if cut {
		// A power loss or a crashed init may have left entries of the
		// store (the checkpoint renamed in, the store directory itself)
		// only in the page cache; the state published below tells later
		// openers the store is sound, so they are made durable first.
		if err := in.FS.SyncDir(in.Dir); err != nil {
			return nil, 0, errs.IO("sync store directory after recovery", err)
		}
		if err := in.FS.SyncDir(path.Dir(path.Clean(in.Dir))); err != nil {
			return nil, 0, errs.IO("sync parent of the store directory after recovery", err)
		}
	}
	epoch := end.Epoch
	if cut {
		epoch = max(end.Epoch, dur.Epoch, c.Epoch) + 1
		if !in.EOK && !in.DOK {
			epoch = state.RandEpoch()
		}
	}
	rec := state.Rec{Epoch: epoch, Pos: res.End, NextSeq: res.NextSeq, Boot: in.Boot, GC: GC(in)}
	if err := in.State.Write(state.Durable, rec); err != nil {
		return nil, 0, err
	}
	if err := in.State.Write(state.End, rec); err != nil {
		return nil, 0, err
	}
	return p, epoch, nil
}

// replay scans the journal from the checkpoint into p, up to frame limit
// (0: as far as frames are valid, then classifies the stop against
// durableSeq, the last frame known durable). It fails closed on damage.
func replay(in Input, p *proj.Proj, limit, durableSeq uint64, rep *Report) (journal.ScanResult, error) {
	c := in.Checkpoint
	if limit > c.NextSeq {
		p.Idx.Mem.Reserve(limit - c.NextSeq)
	}
	var aerr error
	res, err := in.Reader.ScanBorrowed(c.Pos, c.NextSeq, limit, func(fr *journal.Frame) error {
		aerr = p.Apply(fr, &in.Journal)
		return aerr
	})
	if aerr != nil {
		return res, failClosed(rep, aerr)
	}
	if err != nil {
		return res, failClosed(rep, errs.IO("scan journal", err))
	}
	rep.FramesReplayed = res.Frames
	if limit != 0 && res.NextSeq < limit {
		return res, failClosed(rep, errs.Corrupt(in.Journal.SegPath(res.End.Seg), res.End.Off,
			"frame %d is missing or damaged before the published position (frame %d)", res.NextSeq, limit-1))
	}
	if limit == 0 {
		if err := in.Reader.Classify(res.End, res.NextSeq, durableSeq); err != nil {
			return res, failClosed(rep, errs.IO("classify journal tail", err))
		}
	}
	return res, nil
}

// failClosed records err in the report when it is damage, and returns it.
func failClosed(rep *Report, err error) error {
	var ce *errs.CorruptError
	if errors.As(err, &ce) {
		rep.Corrupt = append(rep.Corrupt, ce)
	}
	return err
}

// GC is the garbage collection generation recovery publishes: the end
// record's, kept so that a process whose projection predates a collection
// still sees the generation differ and rebuilds it (0 when the end record
// is unreadable: the recovery then starts a new epoch, which rebuilds it).
func GC(in Input) uint32 {
	if in.EOK {
		return in.End.GC
	}
	return 0
}
