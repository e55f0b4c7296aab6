package core

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/core/internal/cscache"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/groupsync"
	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/pipeline"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Defaults of Options.
const (
	DefaultLockTimeout = 10 * time.Second
	// DefaultRetryPlace is the default Options.RetryPlace. A retry comes
	// back within a few milliseconds even with 32 writers on two cores;
	// a place nobody comes back for holds up the writers behind it for
	// at most this long, and only once it reaches the front.
	DefaultRetryPlace = 20 * time.Millisecond
	// DefaultCheckpointEvery is K, the frames between checkpoints. Every
	// open replays the frames past the newest checkpoint, up to K, and a
	// CLI command is one open: at 1,024 a 32-agent CLI run spent most of
	// its CPU replaying (22.7 commits/s; 36.3 at 256). A checkpoint costs
	// about five syncs, 0.02 per commit at 256 (P1 allows 0.1), and the
	// size-tiered compaction (compact.MergeCount) keeps the index rewrites
	// logarithmic in the history, whatever K is.
	DefaultCheckpointEvery = 256
	// DefaultInlineThreshold: blobs up to this size travel inside their
	// frame; larger ones become loose objects (one extra datasync and
	// directory sync each), which keeps the journal from being dominated by
	// a few large files while a small commit stays at one sync.
	DefaultInlineThreshold = 64 << 10
)

// DefaultCacheBytes is the default Options.CacheBytes: about a hundred
// thousand small changesets, or the changeset and delta tables of the index
// runs of about 150,000 changesets.
const DefaultCacheBytes = 32 << 20

// Store is an open SwarmOps store. It is safe for concurrent use by many
// goroutines; many processes may open the same store at once.
//
// Its state is grouped by concern, each group with the lock that guards
// it; the order in which they may be taken is the lock-order table of the
// package documentation.
type Store struct {
	dir  string
	fs   vfs.FS
	opts Options
	id   journal.StoreID
	key  journal.Key
	boot [16]byte // state.BootHash of the boot this handle opened in
	jcfg journal.Config
	// state is the shared state file: each record is written whole by the
	// holder of its file lock (LOCK for the end, SYNCLOCK for the durable
	// record), and every read checks what it read, so it needs no mutex.
	state *state.File

	// writer is the writer lock: the FIFO queue in lockq/, LOCK, kept
	// places and Hold (its mutexes are its own).
	writer *writelock.Lock
	// appender is the journal's write end and what the last append found.
	// It is appended to only under LOCK, outside view.mu; it is closed
	// under view.mu by a reload or a recovery, which no append of this
	// process can overlap (an epoch changes only under LOCK).
	appender struct {
		w      *journal.Writer
		behind bool // the last append found frames awaiting a sync
	}
	// pipe is the commit pipeline, syncer the sync step (group commit),
	// made once the boot is known, and recent the last commit's objects;
	// each guards itself.
	pipe   *pipeline.Pipeline
	syncer *groupsync.Syncer
	recent treebuild.Recent

	// view is this process's projection of the journal.
	view struct {
		// mu guards proj, reader and epoch: the projection, the reader
		// it replays with, and the epoch it belongs to.
		mu     lockorder.Mutex[lockorder.Projection]
		proj   *proj.Proj
		reader *journal.Reader
		epoch  uint64
		// mark publishes the epoch and end of proj for Snapshot, which
		// takes no mutex when proj already holds the durable prefix
		// (see markLocked). It is written under mu, read without it.
		mark atomic.Pointer[projMark]
	}
	// csc caches changesets snapshots have read; emptied with every
	// reload. blk caches the index run blocks lookups read, for every run
	// the projection opens (nil when Options.CacheBytes < 0). Each guards
	// itself.
	csc *cscache.Cache
	blk *index.BlockCache

	// sched decides when this process checkpoints and compacts, and
	// keeps the first error of those for Close; compactor merges runs.
	sched     *ckpt.Scheduler
	compactor *compact.Compactor
	// ckptNext is the next seq of the newest checkpoint this process knows.
	ckptNext atomic.Uint64
	// adopt keeps one reader-side checkpoint adoption at a time
	// (adoptForReader); tried is the projection end it last tried at.
	adopt struct {
		running atomic.Bool
		tried   atomic.Uint64
	}

	// poisoned is set by a failed journal sync, closed by Close; bg counts
	// the background goroutines (checkpoints, compactions) Close waits for.
	poisoned atomic.Bool
	closed   atomic.Bool
	bg       sync.WaitGroup
}

func (o *Options) fill() error {
	if o.FS == nil {
		o.FS = defaultFS()
		if o.FS == nil {
			return fmt.Errorf("%w: Options.FS is nil and no real-OS filesystem is linked", ErrInvalid)
		}
	}
	// A lockorder build checks the order of the file locks too.
	o.FS = lockorder.WrapFS(o.FS)
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.LockTimeout < 0 {
		return fmt.Errorf("%w: Options.LockTimeout %v is negative", ErrInvalid, o.LockTimeout)
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.CheckpointEvery < 0 {
		return fmt.Errorf("%w: Options.CheckpointEvery %d is negative", ErrInvalid, o.CheckpointEvery)
	}
	if o.InlineThreshold == 0 {
		o.InlineThreshold = DefaultInlineThreshold
	}
	if o.InlineThreshold < 0 || o.InlineThreshold > journal.MaxPayload/4 {
		return fmt.Errorf("%w: Options.InlineThreshold %d out of range", ErrInvalid, o.InlineThreshold)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = journal.DefaultSegmentSize
	}
	if o.SegmentSize < 4*journal.FirstFrame {
		return fmt.Errorf("%w: Options.SegmentSize %d too small", ErrInvalid, o.SegmentSize)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.RetryPlace == 0 {
		o.RetryPlace = DefaultRetryPlace
	}
	return nil
}

func newStore(dir string, o Options, id journal.StoreID) *Store {
	s := &Store{dir: dir, fs: o.FS, opts: o, id: id, key: journal.DeriveKey(id)}
	s.jcfg = journal.Config{
		FS: o.FS, Dir: path.Join(dir, "journal"), Store: id, Key: s.key, SegmentSize: o.SegmentSize,
		SkipChecksum: o.weaken&testknobs.SkipChecksum != 0, SkipDirSync: o.weaken&testknobs.SkipDirSync != 0,
	}
	s.appender.w = journal.NewWriter(s.jcfg)
	s.view.reader = journal.NewReader(s.jcfg)
	s.state = state.New(o.FS, path.Join(dir, "state"), s.key)
	s.writer = writelock.New(writelock.Config{FS: o.FS, Dir: dir, Timeout: o.LockTimeout, RetryPlace: o.RetryPlace,
		CatchUp: s.catchUpUnlocked, Closed: &s.closed})
	s.compactor = compact.New(compact.Config{FS: o.FS, Dir: dir, Store: id, LockTimeout: o.LockTimeout, Install: s.installRuns})
	s.sched = ckpt.NewScheduler(ckpt.SchedulerConfig{Inline: o.InlineCheckpoint, Background: s.background,
		Due: s.checkpointDue, Known: s.ckptNext.Load, Write: func() error { return s.checkpointNow(false) },
		Compact: s.compactor.Loop})
	s.pipe = pipeline.New(pipeline.Config{Env: (*pipeEnv)(s), Lock: s.writer, NotNeeded: writelock.ErrNotNeeded,
		AckBeforeSync: o.weaken&testknobs.AckBeforeSync != 0, Background: s.background})
	s.csc = cscache.New(o.CacheBytes)
	if o.CacheBytes > 0 {
		s.blk = index.NewBlockCache(o.CacheBytes)
	}
	return s
}

// background runs fn on a goroutine Close waits for.
func (s *Store) background(fn func()) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn()
	}()
}

func (s *Store) lockPath(name string) string { return path.Join(s.dir, name) }

// setBoot records the current boot id, and makes the parts that carry it.
func (s *Store) setBoot(boot string) {
	s.boot = state.BootHash(boot)
	s.syncer = groupsync.New(groupsync.Config{FS: s.fs, Dir: s.dir, State: s.state, Boot: s.boot, Journal: s.jcfg,
		LockTimeout: s.opts.LockTimeout, Poisoned: &s.poisoned,
		SkipDatasync: s.opts.weaken&testknobs.SkipDatasync != 0, EarlyDurable: s.opts.weaken&testknobs.EarlyDurable != 0})
}

// Create initializes a new store in dir, creating dir if needed. It fails
// with ErrExist if dir holds anything. When Create returns nil the store is
// durable: segment, checkpoint and every directory entry are synced.
func Create(dir string, o Options) (*Store, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	fsys := o.FS
	if st, err := fsys.Stat(dir); err == nil {
		if !st.IsDir() {
			return nil, fmt.Errorf("%w: %s exists and is not a directory", ErrExist, dir)
		}
		d, err := fsys.Open(dir)
		if err != nil {
			return nil, errs.IO("open "+dir, err)
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
			return nil, errs.IO("read "+dir, err)
		}
		if len(names) > 0 && !interruptedInit(names) {
			return nil, fmt.Errorf("%w: %s is not empty", ErrExist, dir)
		}
		// An init that crashed before its checkpoint was durable was never
		// acknowledged: its leftovers are removed and init starts over.
		for _, n := range names {
			if err := fsys.RemoveAll(path.Join(dir, n)); err != nil {
				return nil, errs.IO("remove leftover of an interrupted init", err)
			}
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, errs.IO("create "+dir, err)
		}
	} else {
		return nil, errs.IO("stat "+dir, err)
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
	for _, sub := range []string{"journal", "objects", "index"} {
		if err := fsys.Mkdir(path.Join(dir, sub), 0o755); err != nil {
			return nil, errs.IO("create "+sub, err)
		}
	}
	if err := s.appender.w.CreateSegment(1, 1, 0); err != nil {
		return nil, errs.IO("create first segment", err)
	}
	if err := s.jcfg.Sync(1, 1); err != nil {
		return nil, errs.IO("sync first segment", err)
	}
	// The reflog file starts empty (no data to sync); its directory entry
	// is made durable with the others below.
	if f, err := fsys.OpenFile(path.Join(dir, reflog.Name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, errs.IO("create reflog", err)
	} else if err := f.Close(); err != nil {
		return nil, errs.IO("close reflog", err)
	}
	// The checkpoint is the file whose presence makes a store, so every
	// entry of dir it depends on (journal, objects, index, reflog) is made durable
	// before it is renamed in. Otherwise a torn power loss could keep the
	// rename and drop the journal directory, leaving a directory that is
	// neither a store nor an interrupted init.
	if err := fsys.SyncDir(dir); err != nil {
		return nil, errs.IO("sync store directory", err)
	}
	start := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	epoch := state.RandEpoch()
	s.view.proj = proj.New(start, 1)
	// writeCheckpoint syncs dir after the rename.
	if err := ckpt.Write(fsys, dir, ckpt.Encode(id, start, 1, epoch, nil, 0, s.view.proj.Refs), false); err != nil {
		return nil, err
	}
	boot, err := fsys.BootID()
	if err != nil {
		return nil, errs.IO("boot id", err)
	}
	s.setBoot(boot)
	s.view.epoch = epoch
	s.ckptNext.Store(1)
	rec := state.Rec{Epoch: epoch, Pos: start, NextSeq: 1, Boot: s.boot}
	if err := s.state.Write(state.Durable, rec); err != nil {
		return nil, err
	}
	if err := s.state.Write(state.End, rec); err != nil {
		return nil, err
	}
	return s, nil
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
	s.ckptNext.Store(c.NextSeq)
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
		return s.writer.With(func() error {
			_, err := s.recoverLocked(false)
			return err
		})
	}
	s.view.mu.Lock()
	s.view.epoch = end.Epoch
	err = s.catchUp(end.NextSeq)
	s.view.mu.Unlock()
	if err != nil || dur.NextSeq >= end.NextSeq {
		return err
	}
	return s.syncer.Orphaned(end.NextSeq-1, end.Epoch)
}

// catchUp replays frames into the projection until the frame carrying
// target. Frames before a published end or durable position were written
// whole, so a scan that stops short is corruption. Caller holds s.view.mu.
func (s *Store) catchUp(target uint64) error {
	if s.view.proj.NextSeq >= target {
		s.markLocked()
		return nil
	}
	s.view.proj.Idx.Mem.Reserve(target - s.view.proj.NextSeq)
	var aerr error
	// apply keeps nothing of a payload but what it decodes: the scan may
	// lend it.
	res, err := s.view.reader.ScanBorrowed(s.view.proj.Pos, s.view.proj.NextSeq, target, func(fr *journal.Frame) error {
		aerr = s.view.proj.Apply(fr, s.jcfg.SegPath(fr.Pos.Seg))
		return aerr
	})
	if aerr != nil {
		return aerr
	}
	if err != nil {
		return errs.IO("replay journal", err)
	}
	if res.NextSeq < target {
		return errs.Corrupt(s.jcfg.SegPath(res.End.Seg), res.End.Off,
			"frame %d is missing or damaged before the published position (frame %d)", res.NextSeq, target-1)
	}
	s.markLocked()
	return nil
}

// projMark is what Snapshot needs to know of the projection: the epoch it
// belongs to, and that it holds every frame below next.
type projMark struct{ epoch, next uint64 }

// markLocked publishes the projection's epoch and end. A mark is never
// ahead of the projection: within an epoch the projection only grows (a
// recovery that keeps the epoch rebuilds it through the published end, and
// one that cuts frames starts a new epoch), so a snapshot of a durable
// prefix the mark covers finds all of it, as one taken under s.view.mu would.
// Caller holds s.view.mu.
func (s *Store) markLocked() {
	if m := s.view.mark.Load(); m == nil || m.epoch != s.view.epoch || m.next != s.view.proj.NextSeq {
		s.view.mark.Store(&projMark{epoch: s.view.epoch, next: s.view.proj.NextSeq})
	}
}

// reload replaces the projection with one rebuilt from the checkpoint, after
// another process's recovery changed the epoch. Caller holds s.view.mu.
func (s *Store) reload(epoch uint64, target uint64) error {
	c, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	s.view.reader.Forget()
	s.appender.w.Close()
	if s.view.proj != nil {
		s.view.proj.Idx.Close()
	}
	s.view.proj = c.Proj
	s.view.proj.Idx.SetCache(s.blk)
	s.view.epoch = epoch
	s.csc.Clear()
	return s.catchUp(target)
}

func (s *Store) closeFiles() {
	s.view.mu.Lock()
	s.view.reader.Close()
	if s.view.proj != nil {
		s.view.proj.Idx.Retire()
	}
	s.view.mu.Unlock()
	s.appender.w.Close()
	s.state.Close()
	s.writer.Close()
	if s.syncer != nil {
		s.syncer.Close()
	}
}

// Close waits for background checkpoint work and releases files. Later
// calls on s fail with ErrClosed. If a checkpoint written after an
// acknowledged commit failed, Close still releases everything and then
// returns that error (ErrIO or ErrNoSpace, wrapping the cause): the commits
// stay acknowledged and durable; only recovery has more journal to replay.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("%w: already closed", ErrClosed)
	}
	s.bg.Wait()
	s.closeFiles()
	return s.sched.Failed()
}

func (s *Store) usable() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: store is closed", ErrClosed)
	}
	if s.poisoned.Load() {
		return fmt.Errorf("%w: a journal sync failed; reopen the store to recover", ErrClosed)
	}
	return nil
}

// Info summarizes the durable state of the store.
func (s *Store) Info() (*Info, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	in := &Info{DurableSeq: sn.seq, CheckpointSeq: s.ckptNext.Load() - 1}
	s.view.proj.Idx.Each(func(_ ID, l proj.Loc) {
		if l.Seq > sn.seq {
			return
		}
		in.Objects++
		if l.Kind == 3 {
			in.Changesets++
		}
		if l.Loose {
			in.LooseObjects++
		}
	})
	if err := s.view.proj.Idx.TakeErr(); err != nil {
		return nil, err
	}
	rt, err := s.refsAt(sn.seq)
	if err != nil {
		return nil, err
	}
	in.Refs = rt.Len(sn.seq)
	in.DurableOffset = sn.pos.Off
	segs, err := s.jcfg.Segments()
	if err != nil {
		return nil, errs.IO("list journal", err)
	}
	in.Segments = len(segs)
	for _, n := range segs {
		if st, err := s.fs.Stat(s.jcfg.SegPath(n)); err == nil {
			in.JournalBytes += st.Size()
		}
	}
	return in, nil
}

// openFlags is used for files the store creates.
const openFlags = os.O_RDWR | os.O_CREATE
