package core

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
)

// Compaction merges index runs, apart from the checkpoint that writes
// them. A checkpoint writes the frames since the last one as a new run and
// publishes itself at once; compaction then merges the newest runs (the
// size-tiered policy of mergeCount) without CKPTLOCK, under MERGELOCK,
// which one process holds at a time, and installs the merged run with a
// second checkpoint, under CKPTLOCK, that changes nothing but the run list.
//
// This is what keeps recovery bounded (C7) on a large store: a merge at
// 1M changesets rewrites up to a few hundred megabytes and takes seconds,
// and while it ran inside the checkpoint no checkpoint could advance, so a
// writer killed then left a thousand frames or more past the newest
// checkpoint (975 measured, against K = 256) for the next open to replay.
// Now checkpoints go on during a merge, and the run list can grow past
// maxRuns by the checkpoints written meanwhile, until the next merge.
//
// Leftovers of a merge or a checkpoint that crashed (a temp file, a run
// never named, a run retired but not yet removed) are removed by the next
// compaction: a run file a checkpoint does not name and whose sequence
// number is at most the checkpoint's can be no checkpoint's work in
// progress, since a checkpoint in progress writes a run named past the
// current checkpoint, and a merge in progress holds MERGELOCK.

// mergeLockName is the lock file one compacting process holds.
const mergeLockName = "MERGELOCK"

// compactLoop merges until no merge is due, and reports the first error.
func (s *Store) compactLoop() error {
	for {
		merged, err := s.compactOnce()
		if err != nil || !merged {
			return err
		}
	}
}

// compactOnce makes one merge if one is due and no other process is
// compacting; merged reports that it installed one.
func (s *Store) compactOnce() (merged bool, err error) {
	ml, err := s.fs.Lock(s.lockPath(mergeLockName), 0)
	if errors.Is(err, ErrBusy) {
		return false, nil
	}
	if err != nil {
		return false, errs.IO("merge lock", err)
	}
	defer func() {
		if uerr := ml.Unlock(); uerr != nil && err == nil {
			err = errs.IO("merge unlock", uerr)
		}
	}()
	cur, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return false, err
	}
	defer cur.Proj.Idx.Close()
	if err := s.removeLeftovers(cur); err != nil {
		return false, err
	}
	runs := cur.Proj.Idx.Runs()
	sizes := make([]int64, len(runs))
	for i, r := range runs {
		sizes[i] = r.Size()
	}
	n := mergeCount(sizes)
	if n < 2 {
		return false, nil
	}
	inputs := cur.Runs[:n:n]
	mname := inputs[0] + "m"
	for slices.Contains(cur.Runs, mname) {
		mname += "m"
	}
	m, err := index.MergeRuns(s.fs, path.Join(s.dir, ckpt.IndexDir, mname), runs[0].Meta(), runs[:n])
	if err != nil {
		return false, errs.Index("compact index runs", err)
	}
	m.Close()
	installed, err := s.installMerge(inputs, mname)
	if err != nil || !installed {
		// The merged run stays until the next compaction removes it: it
		// may be named by a checkpoint that reached the disk even though
		// writeCheckpoint failed after the rename.
		return false, err
	}
	for _, name := range inputs {
		_ = s.fs.Remove(path.Join(s.dir, ckpt.IndexDir, name))
	}
	return true, nil
}

// installMerge replaces inputs, a run of consecutive names in the current
// checkpoint, by mname, in a checkpoint that is otherwise the current one.
func (s *Store) installMerge(inputs []string, mname string) (bool, error) {
	l, err := s.fs.Lock(s.lockPath("CKPTLOCK"), s.o.LockTimeout)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return false, fmt.Errorf("checkpoint lock of %s not taken within %v to install a merged index run: %w", s.dir, s.o.LockTimeout, err)
		}
		return false, errs.IO("checkpoint lock", err)
	}
	defer l.Unlock()
	now, err := ckpt.ReadFile(s.fs, s.dir)
	if err != nil {
		return false, err
	}
	if now.Store != s.id {
		return false, errs.Corrupt(s.dir+"/"+ckpt.Name, 0, "checkpoint names another store")
	}
	// Checkpoints only add runs in front, and only the holder of
	// MERGELOCK removes any, so the inputs are still there, in order.
	i := slices.Index(now.Runs, inputs[0])
	if i < 0 || len(now.Runs) < i+len(inputs) || !slices.Equal(now.Runs[i:i+len(inputs)], inputs) {
		return false, fmt.Errorf("%w: the checkpoint no longer names the runs merged into %s", ErrIO, mname)
	}
	names := slices.Concat(now.Runs[:i], []string{mname}, now.Runs[i+len(inputs):])
	b := ckpt.Encode(s.id, now.Pos, now.NextSeq, now.Epoch, names, now.ReflogLen, now.Proj.Refs)
	if err := ckpt.Write(s.fs, s.dir, b, false); err != nil {
		return false, err
	}
	if err := s.installRuns(names, now.NextSeq, now.Epoch, now.ReflogLen); err != nil {
		return false, err
	}
	return true, nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch || s.p.NextSeq < nextSeq || nextSeq < s.p.CkptSeq {
		x.Close()
		return
	}
	old := s.p.Idx
	nx := proj.NewRunIdx(x, names)
	nx.SetCache(s.blk)
	nx.Mem = old.Since(nextSeq)
	s.p.Idx = nx
	s.p.CkptSeq = nextSeq
	old.Retire()
	s.p.Refs.Trim(nextSeq)
	s.p.ReflogLen = reflogLen
}

// removeLeftovers removes the run files of index/ that cur does not name
// and that no checkpoint or merge in progress can be writing: those whose
// sequence number is at most cur's. Caller holds MERGELOCK.
func (s *Store) removeLeftovers(cur *ckpt.Checkpoint) error {
	dir := path.Join(s.dir, ckpt.IndexDir)
	d, err := s.fs.Open(dir)
	if err != nil {
		return errs.IO("open index directory", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return errs.IO("list index directory", err)
	}
	for _, n := range names {
		if slices.Contains(cur.Runs, n) {
			continue
		}
		var seq uint64
		if _, err := fmt.Sscanf(n, "run-%016x-", &seq); err != nil {
			continue // not a run: leave it alone
		}
		if seq > cur.NextSeq {
			continue
		}
		if err := s.fs.Remove(path.Join(dir, n)); err != nil {
			return errs.IO("remove leftover index run", err)
		}
	}
	return nil
}
