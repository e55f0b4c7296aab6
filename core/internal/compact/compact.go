// Package compact merges index runs, apart from the checkpoint that writes
// them. A checkpoint writes the frames since the last one as a new run and
// publishes itself at once; compaction then merges the newest runs (the
// size-tiered policy of MergeCount) without CKPTLOCK, under MERGELOCK,
// which one process holds at a time, and installs the merged run with a
// second checkpoint, under CKPTLOCK, that changes nothing but the run list.
//
// This is what keeps recovery bounded (C7) on a large store: a merge at
// 1M changesets rewrites up to a few hundred megabytes and takes seconds.
// Were it run inside the checkpoint, no checkpoint could advance meanwhile,
// and a writer killed then would leave a thousand frames or more past the
// newest checkpoint (975 at K = 256) for the next open to replay. Apart,
// checkpoints go on during a merge, and the run list can grow past MaxRuns
// by the checkpoints written meanwhile, until the next merge.
//
// Leftovers of a merge or a checkpoint that crashed (a temp file, a run
// never named, a run retired but not yet removed) are removed by the next
// compaction: a run file a checkpoint does not name and whose sequence
// number is at most the checkpoint's can be no checkpoint's work in
// progress, since a checkpoint in progress writes a run named past the
// current checkpoint, and a merge in progress holds MERGELOCK.
package compact

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
)

// LockName is the merge lock's file name in the store directory: one
// process compacts at a time.
const LockName = "MERGELOCK"

// Config is what a Compactor works with.
type Config struct {
	FS    vfs.FS
	Dir   string // the store directory
	Store journal.StoreID
	// LockTimeout bounds the wait for CKPTLOCK to install a merge.
	LockTimeout time.Duration
	// Install makes the process's projection use the runs of a durable
	// checkpoint (names, newest first, at nextSeq of epoch, with reflogLen
	// bytes of reflog).
	Install func(names []string, nextSeq, epoch uint64, reflogLen int64) error
}

// Compactor merges the index runs of one store. Its merges are serialized
// by MERGELOCK across every process, and its installs by CKPTLOCK.
type Compactor struct {
	fs      vfs.FS
	dir     string
	store   journal.StoreID
	timeout time.Duration
	install func(names []string, nextSeq, epoch uint64, reflogLen int64) error
}

// New returns the compactor of the store in c.Dir.
func New(c Config) *Compactor {
	return &Compactor{fs: c.FS, dir: c.Dir, store: c.Store, timeout: c.LockTimeout, install: c.Install}
}

// Loop merges until no merge is due, and reports the first error.
func (c *Compactor) Loop() error {
	for {
		merged, err := c.Once()
		if err != nil || !merged {
			return err
		}
	}
}

// Once makes one merge if one is due and no other process is
// compacting; merged reports that it installed one.
func (c *Compactor) Once() (merged bool, err error) {
	ml, err := c.fs.Lock(path.Join(c.dir, LockName), 0)
	if errors.Is(err, errs.ErrBusy) {
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
	cur, err := ckpt.Read(c.fs, c.dir)
	if err != nil {
		return false, err
	}
	defer cur.Proj.Idx.Close()
	if err := c.removeLeftovers(cur); err != nil {
		return false, err
	}
	runs := cur.Proj.Idx.Runs()
	sizes := make([]int64, len(runs))
	for i, r := range runs {
		sizes[i] = r.Size()
	}
	n := MergeCount(sizes)
	if n < 2 {
		return false, nil
	}
	inputs := cur.Runs[:n:n]
	mname := inputs[0] + "m"
	for slices.Contains(cur.Runs, mname) {
		mname += "m"
	}
	m, err := index.MergeRuns(c.fs, path.Join(c.dir, ckpt.IndexDir, mname), runs[0].Meta(), runs[:n])
	if err != nil {
		return false, errs.Index("compact index runs", err)
	}
	m.Close()
	installed, err := c.installMerge(inputs, mname)
	if err != nil || !installed {
		// The merged run stays until the next compaction removes it: it
		// may be named by a checkpoint that reached the disk even though
		// ckpt.Write failed after the rename.
		return false, err
	}
	for _, name := range inputs {
		_ = c.fs.Remove(path.Join(c.dir, ckpt.IndexDir, name))
	}
	return true, nil
}

// Replace installs the run name in place of inputs, a run of consecutive
// names in the current checkpoint, as a merge is installed; garbage
// collection installs its rewritten run this way. Caller holds MERGELOCK.
func (c *Compactor) Replace(inputs []string, name string) (bool, error) {
	return c.installMerge(inputs, name)
}

// installMerge replaces inputs, a run of consecutive names in the current
// checkpoint, by mname, in a checkpoint that is otherwise the current one.
func (c *Compactor) installMerge(inputs []string, mname string) (bool, error) {
	l, err := c.fs.Lock(path.Join(c.dir, ckpt.LockName), c.timeout)
	if err != nil {
		if errors.Is(err, errs.ErrBusy) {
			return false, fmt.Errorf("checkpoint lock of %s not taken within %v to install a merged index run: %w", c.dir, c.timeout, err)
		}
		return false, errs.IO("checkpoint lock", err)
	}
	defer l.Unlock()
	now, err := ckpt.ReadFile(c.fs, c.dir)
	if err != nil {
		return false, err
	}
	if now.Store != c.store {
		return false, errs.Corrupt(c.dir+"/"+ckpt.Name, 0, "checkpoint names another store")
	}
	// Checkpoints only add runs in front, and only the holder of
	// MERGELOCK removes any, so the inputs are still there, in order.
	i := slices.Index(now.Runs, inputs[0])
	if i < 0 || len(now.Runs) < i+len(inputs) || !slices.Equal(now.Runs[i:i+len(inputs)], inputs) {
		return false, fmt.Errorf("%w: the checkpoint no longer names the runs merged into %s", errs.ErrIO, mname)
	}
	names := slices.Concat(now.Runs[:i], []string{mname}, now.Runs[i+len(inputs):])
	b := ckpt.Encode(c.store, now.Pos, now.NextSeq, now.Epoch, names, now.ReflogLen, now.Proj.Refs)
	if err := ckpt.Write(c.fs, c.dir, b, false); err != nil {
		return false, err
	}
	if err := c.install(names, now.NextSeq, now.Epoch, now.ReflogLen); err != nil {
		return false, err
	}
	return true, nil
}

// removeLeftovers removes the run files of index/ that cur does not name
// and that no checkpoint or merge in progress can be writing: those whose
// sequence number is at most cur's. Caller holds MERGELOCK.
func (c *Compactor) removeLeftovers(cur *ckpt.Checkpoint) error {
	dir := path.Join(c.dir, ckpt.IndexDir)
	d, err := c.fs.Open(dir)
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
		if err := c.fs.Remove(path.Join(dir, n)); err != nil {
			return errs.IO("remove leftover index run", err)
		}
	}
	return nil
}

// MaxRuns bounds the runs compaction leaves (checkpoints written while a
// merge runs add to them until the next merge).
const MaxRuns = 8

// MergeCount picks the runs compaction merges: given the sizes of the
// checkpoint's runs, newest first, it returns how many of the newest to
// merge into one (0 or 1: none).
//
// The policy is size-tiered: the newest runs are merged while the next
// older run is no more than twice the size gathered so far, so runs form a
// roughly geometric series and each record is rewritten O(log(N/K)) times
// over a store's life. Merging every run whenever there are too many (the
// earlier policy) rewrote the whole index every MaxRuns+1 checkpoints: at
// 1M changesets, hundreds of megabytes per few thousand commits. The run
// count is also capped at MaxRuns, by merging as many of the newest as it
// takes.
func MergeCount(sizes []int64) int {
	if len(sizes) < 2 {
		return 0
	}
	n, acc := 1, sizes[0]
	for n < len(sizes) && sizes[n] <= 2*acc {
		acc += sizes[n]
		n++
	}
	if len(sizes)-n+1 > MaxRuns {
		n = len(sizes) - MaxRuns + 1
	}
	if n < 2 {
		return 0
	}
	return n
}
