// Package groupsync is the sync step of the commit path: group commit
// across every process sharing a store, the way PostgreSQL's XLogFlush
// serves many backends with one flush. A writer appends its frame under the
// writer lock and publishes the end; then, under SYNCLOCK, whoever finds
// its frame not yet covered reads the end, fdatasyncs the journal once for
// every frame appended so far by any process, and publishes the durable
// position. A waiter whose frame that sync covered returns without
// syncing.
package groupsync

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sync/atomic"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
)

// LockName is the sync lock's file name in the store directory.
const LockName = "SYNCLOCK"

// Config is what a Syncer works with.
type Config struct {
	FS      vfs.FS
	Dir     string      // the store directory
	State   *state.File // the shared state records
	Boot    [16]byte    // state.BootHash of the current boot
	Journal journal.Config
	// LockTimeout bounds the wait for SYNCLOCK (then ErrBusy).
	LockTimeout time.Duration
	// Poisoned is set when a journal sync fails: the store refuses work
	// from then on, and the durable record is marked for recovery.
	Poisoned *atomic.Bool
	// SkipDatasync and EarlyDurable are test-only canaries: never
	// fdatasync the journal, and publish the durable position before the
	// sync.
	SkipDatasync, EarlyDurable bool
}

// Syncer is one store handle's sync step. It is safe for concurrent use:
// SYNCLOCK serializes the syncs of every goroutine and process.
type Syncer struct {
	fs            vfs.FS
	dir, lockPath string
	state         *state.File
	boot          [16]byte
	journal       journal.Config
	timeout       time.Duration
	poisoned      *atomic.Bool
	skipDatasync  bool
	earlyDurable  bool

	// handle is the journal segment seg opened under epoch, kept open for
	// the sync step of later commits (see syncJournal). mu guards it.
	handle struct {
		mu         lockorder.Mutex[lockorder.SyncHandle]
		f          afero.File
		seg, epoch uint64
	}
}

// New returns the sync step of a store handle.
func New(c Config) *Syncer {
	return &Syncer{fs: c.FS, dir: c.Dir, lockPath: path.Join(c.Dir, LockName), state: c.State, boot: c.Boot,
		journal: c.Journal, timeout: c.LockTimeout, poisoned: c.Poisoned,
		skipDatasync: c.SkipDatasync, earlyDurable: c.EarlyDurable}
}

// Close closes the kept segment handle.
func (s *Syncer) Close() {
	s.handle.mu.Lock()
	s.closeHandleLocked()
	s.handle.mu.Unlock()
}

// To returns once frame seq is durable: under SYNCLOCK, if the published
// durable position already covers it (someone else's fdatasync did), it
// returns at once; otherwise it reads the end, fdatasyncs every segment from
// the durable one to the end one, and publishes durable = end. One fdatasync
// thus serves every frame appended before it (group commit). A failed sync
// poisons the store and the durable record: the frames past it are never
// synced again and acknowledged; recovery cuts them.
//
// peek: look at the durable record before queueing for SYNCLOCK. A writer
// whose append found every published frame durable already is most likely
// alone (one writer committing back to back), and nobody's sync can have
// covered its frame yet; it skips the look, a system call a commit. Either
// way the record is read again under SYNCLOCK, which decides.
func (s *Syncer) To(seq, epoch uint64, peek bool) error {
	// Most waiters in a busy store find their frame already covered by a
	// sync another writer made while they appended. They learn it from the
	// durable record without queueing for SYNCLOCK: that record is written
	// only after the fdatasync it reports, and a read torn by a concurrent
	// write fails its checksum and falls through to the locked path.
	if peek {
		dur, ok, err := s.state.Read(state.Durable)
		if err != nil {
			return err
		}
		if ok && dur.Epoch == epoch && dur.Flags&state.FlagPoisoned == 0 && dur.NextSeq > seq {
			return nil
		}
	}
	l, err := s.fs.Lock(s.lockPath, s.timeout)
	if err != nil {
		if errors.Is(err, errs.ErrBusy) {
			return fmt.Errorf("sync lock of %s: %w", s.dir, err)
		}
		return errs.IO("sync lock", err)
	}
	defer l.Unlock()
	// One read for both records. Durable is written only under SYNCLOCK,
	// which this holds; end is written by writers under LOCK, so a torn
	// read of it is read again (ReadStable).
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return err
	}
	if !dok || dur.Epoch != epoch {
		return fmt.Errorf("%w: frame %d was cut by a recovery before it became durable", errs.ErrIO, seq)
	}
	if dur.Flags&state.FlagPoisoned != 0 {
		return fmt.Errorf("%w: frame %d: an earlier journal sync failed; the tail awaits recovery", errs.ErrIO, seq)
	}
	if dur.NextSeq > seq {
		return nil
	}
	return s.locked(seq, epoch, end, eok, dur)
}

// locked is the sync step proper, for a frame seq the durable record
// dur does not cover: it fdatasyncs the journal through the published end
// and publishes durable = end. Caller holds SYNCLOCK and read end (eok: the
// read was valid) and dur under it.
func (s *Syncer) locked(seq, epoch uint64, end state.Rec, eok bool, dur state.Rec) error {
	var err error
	if !eok {
		if end, eok, err = s.state.ReadStable(state.End, s.boot); err != nil {
			return err
		}
	}
	if !eok || end.Epoch != epoch || end.NextSeq <= seq {
		return fmt.Errorf("%w: frame %d: published end unreadable or behind it", errs.ErrIO, seq)
	}
	newDur := end
	newDur.Boot = s.boot
	if s.earlyDurable {
		if err := s.state.Write(state.Durable, newDur); err != nil {
			return err
		}
	}
	if !s.skipDatasync {
		if err := s.syncJournal(dur.Pos.Seg, end.Pos.Seg, epoch); err != nil {
			s.poisoned.Store(true)
			dur.Flags |= state.FlagPoisoned
			_ = s.state.Write(state.Durable, dur)
			return errs.IO(fmt.Sprintf("sync journal for frame %d", seq), err)
		}
	}
	return s.state.Write(state.Durable, newDur)
}

// Orphaned makes the frames published through seq durable, unless a
// process is in the sync step, which will. An open calls it when the
// published end is past the durable one. Such frames belong to a writer
// that is about to sync them, is syncing them, or died in between: a
// process crash leaves them in the page cache, where they wait for the next
// writer's sync. Until then no snapshot shows them, so a client that opens
// the store after a writer was killed, reads a ref and moves it, loses its
// compare-and-swap to a frame it could not see and must retry (in W4,
// five recoveries of nine). The sync is the one the next writer would
// make; an open that finds SYNCLOCK held leaves it to its holder.
func (s *Syncer) Orphaned(seq, epoch uint64) error {
	l, err := s.fs.Lock(s.lockPath, 0)
	if errors.Is(err, errs.ErrBusy) {
		return nil
	}
	if err != nil {
		return errs.IO("sync lock", err)
	}
	defer l.Unlock()
	end, eok, dur, dok, err := s.state.ReadBoth()
	if err != nil {
		return err
	}
	if !dok || dur.Epoch != epoch || dur.Flags&state.FlagPoisoned != 0 || dur.NextSeq > seq {
		// Recovered or poisoned meanwhile (the next writer's recovery
		// decides), or already covered.
		return nil
	}
	return s.locked(seq, epoch, end, eok, dur)
}

// syncJournal fdatasyncs segments from..to. Caller holds SYNCLOCK. The
// common case, one segment, reuses a handle kept open across commits (one
// open per segment per Store instead of one per commit). The handle is tied
// to the epoch it was opened under: a segment is removed (and its number may
// be created again) only by a recovery that cuts frames, which changes the
// epoch, so a handle of the current epoch and segment names the live file.
func (s *Syncer) syncJournal(from, to, epoch uint64) error {
	if from != to {
		return s.journal.Sync(from, to)
	}
	s.handle.mu.Lock()
	defer s.handle.mu.Unlock()
	if s.handle.f == nil || s.handle.seg != to || s.handle.epoch != epoch {
		s.closeHandleLocked()
		f, err := s.fs.OpenFile(s.journal.SegPath(to), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s.handle.f, s.handle.seg, s.handle.epoch = f, to, epoch
	}
	if err := vfs.Datasync(s.handle.f); err != nil {
		// A failed sync poisons the store; the handle is not reused.
		s.closeHandleLocked()
		return err
	}
	return nil
}

// closeHandleLocked closes the kept segment handle. Caller holds handle.mu.
func (s *Syncer) closeHandleLocked() {
	if s.handle.f != nil {
		s.handle.f.Close()
		s.handle.f = nil
	}
}
