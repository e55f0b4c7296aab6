package core

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/groupsync"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
)

// Create initializes a new store in dir, creating dir if needed. It fails
// with ErrExist if dir holds anything. When Create returns nil the store is
// durable: segment, checkpoint and every directory entry are synced.
func Create(dir string, o Options) (*Store, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	fsys := o.FS
	if err := emptyDir(fsys, dir); err != nil {
		return nil, err
	}
	// The parent is synced whether or not dir existed: a directory left by
	// an init that crashed (or whose parent sync failed) may exist only in
	// the page cache, and a store acknowledged inside it would vanish with it
	// at the next power loss.
	if err := fsys.SyncDir(path.Dir(path.Clean(dir))); err != nil {
		return nil, errs.IO("sync parent of "+dir, err)
	}
	var id journal.StoreID
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("%w: store id: %w", ErrIO, err)
	}
	s := newStore(dir, o, id)
	if err := s.layOut(); err != nil {
		return nil, err
	}
	start := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	epoch := state.RandEpoch()
	s.view.proj = proj.New(start, 1)
	// ckpt.Write syncs dir after the rename.
	if err := ckpt.Write(fsys, dir, ckpt.Encode(id, start, 1, epoch, nil, 0, s.view.proj.Refs), false); err != nil {
		return nil, err
	}
	boot, err := fsys.BootID()
	if err != nil {
		return nil, errs.IO("boot id", err)
	}
	s.setBoot(boot)
	s.view.epoch = epoch
	s.noteCheckpoint(1, start)
	rec := state.Rec{Epoch: epoch, Pos: start, NextSeq: 1, Boot: s.boot}
	if err := s.state.Write(state.Durable, rec); err != nil {
		return nil, err
	}
	if err := s.state.Write(state.End, rec); err != nil {
		return nil, err
	}
	return s, nil
}

// emptyDir makes sure dir is an empty directory: it creates it, or finds it
// empty, or removes what an interrupted Create left in it; anything else in
// it is ErrExist.
func emptyDir(fsys vfs.FS, dir string) error {
	st, err := fsys.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return errs.IO("create "+dir, err)
		}
		return nil
	}
	if err != nil {
		return errs.IO("stat "+dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s exists and is not a directory", ErrExist, dir)
	}
	d, err := fsys.Open(dir)
	if err != nil {
		return errs.IO("open "+dir, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return errs.IO("read "+dir, err)
	}
	if len(names) > 0 && !interruptedInit(names) {
		return fmt.Errorf("%w: %s is not empty", ErrExist, dir)
	}
	// An init that crashed before its checkpoint was durable was never
	// acknowledged: its leftovers are removed and init starts over.
	for _, n := range names {
		if err := fsys.RemoveAll(path.Join(dir, n)); err != nil {
			return errs.IO("remove leftover of an interrupted init", err)
		}
	}
	return nil
}

// layOut makes a new store's directories, first segment and empty reflog,
// all durable, before its checkpoint is written.
func (s *Store) layOut() error {
	for _, sub := range []string{"journal", "objects", "index"} {
		if err := s.fs.Mkdir(path.Join(s.dir, sub), 0o755); err != nil {
			return errs.IO("create "+sub, err)
		}
	}
	if err := s.appender.w.CreateSegment(1, 1, 0); err != nil {
		return errs.IO("create first segment", err)
	}
	if err := s.jcfg.Sync(1, 1); err != nil {
		return errs.IO("sync first segment", err)
	}
	// The reflog file starts empty (no data to sync); its directory entry
	// is made durable with the others below.
	if f, err := s.fs.OpenFile(path.Join(s.dir, reflog.Name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return errs.IO("create reflog", err)
	} else if err := f.Close(); err != nil {
		return errs.IO("close reflog", err)
	}
	// The checkpoint is the file whose presence makes a store, so every
	// entry of dir it depends on (journal, objects, index, reflog) is made
	// durable before it is renamed in. Otherwise a torn power loss could
	// keep the rename and drop the journal directory, leaving a directory
	// that is neither a store nor an interrupted init.
	if err := s.fs.SyncDir(s.dir); err != nil {
		return errs.IO("sync store directory", err)
	}
	return nil
}

// interruptedInit reports whether a directory's names are only what Create
// makes before the checkpoint, the file whose presence makes a store.
func interruptedInit(names []string) bool {
	for _, n := range names {
		switch n {
		case "journal", "objects", "index", reflog.Name, ckpt.Temp, "state", writelock.LockName, groupsync.LockName, ckpt.LockName, compact.LockName, writelock.QueueDir:
		default:
			return false
		}
	}
	return true
}

// Open opens the store in dir. If the published state is missing, invalid,
// poisoned by a failed sync, or from another boot (a power loss), Open takes
// the writer lock and recovers: it replays from the checkpoint, cuts a torn
// tail, syncs and publishes. It fails closed with a *CorruptError (naming
// file and offset) when acknowledged data is damaged; it never truncates it.
func Open(dir string, o Options) (*Store, error) {
	s, err := openStore(dir, o)
	if err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// openStore reads the checkpoint and checks the layout, without touching the
// journal.
func openStore(dir string, o Options) (*Store, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	st, err := o.FS.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNotStore, dir)
	}
	if err != nil {
		return nil, errs.IO("stat "+dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotStore, dir)
	}
	if st, err := o.FS.Stat(path.Join(dir, "journal")); err != nil || !st.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no journal directory", ErrNotStore, dir)
		}
		return nil, errs.IO("stat journal", err)
	}
	c, err := ckpt.Read(o.FS, dir)
	if err != nil {
		return nil, err
	}
	s := newStore(dir, o, c.Store)
	boot, err := o.FS.BootID()
	if err != nil {
		return nil, errs.IO("boot id", err)
	}
	s.setBoot(boot)
	s.view.proj = c.Proj
	s.view.proj.Idx.SetCache(s.blk)
	s.view.epoch = c.Epoch
	s.noteCheckpoint(c.NextSeq, c.Pos)
	if _, err := s.view.reader.SegHeader(c.Pos.Seg); err != nil {
		s.closeFiles()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errs.Corrupt(s.jcfg.SegPath(c.Pos.Seg), 0, "segment named by the checkpoint is missing")
		}
		return nil, errs.IO("read segment header", err)
	}
	return s, nil
}

// load brings the projection up to the published end, recovering first when
// the state cannot be trusted.
func (s *Store) load() error {
	// Plain reads: an invalid record (torn by a concurrent write, or lost
	// with the page cache) sends us to recoverLocked, which re-reads under
	// both locks and finds out which it was.
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return err
	}
	if !state.Healthy(end, eok, dur, dok, s.boot) {
		err := s.writer.With(func() error {
			_, err := s.recoverLocked(false)
			return err
		})
		if errors.Is(err, ErrReadOnly) {
			return &NeedsRecoveryError{Dir: s.dir, Reason: state.Unhealthy(end, eok, dur, dok, s.boot), Err: err}
		}
		return err
	}
	s.view.mu.Lock()
	s.view.epoch, s.view.gc = end.Epoch, end.GC
	err = s.catchUp(end.NextSeq)
	s.view.mu.Unlock()
	if err != nil || dur.NextSeq >= end.NextSeq {
		return err
	}
	// The orphaned frames' sync is a courtesy to the next reader; one
	// that cannot write leaves it to the next writer, and sees the
	// durable prefix meanwhile.
	if err := s.syncer.Orphaned(end.NextSeq-1, end.Epoch); err != nil && !errors.Is(err, ErrReadOnly) {
		return err
	}
	return nil
}
