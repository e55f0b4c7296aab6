package core

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/compact"
	"github.com/swarmops/swarmops/core/internal/cscache"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/groupsync"
	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/pipeline"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Store is an open SwarmOps store. It is safe for concurrent use by many
// goroutines; many processes may open the same store at once.
//
// Its state is grouped by concern, each group with the lock that guards
// it; the order in which they may be taken is the lock-order table of the
// package documentation.
type Store struct {
	dir string
	// dirID is the identity of the directory dir named when the store
	// was opened (dirKnown: the filesystem gives one). Files are reached
	// by path, but the state file stays open: if dir is moved or replaced
	// meanwhile, a frame appended by path would land in another directory
	// while the end it publishes lands here, so writes check it first
	// (checkDir).
	dirID    vfs.Inode
	dirKnown bool

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
	// made once the boot is known, and recent the last commits' objects;
	// each guards itself.
	pipe   *pipeline.Pipeline
	syncer *groupsync.Syncer
	recent treebuild.Recent
	// groups keeps the last compressed groups of inline blobs a read
	// decoded (zblob.Cache): a checkout or export reads a group's blobs
	// one after another.
	groups zblob.Cache

	// view is this process's projection of the journal.
	view struct {
		// mu guards proj, reader and epoch: the projection, the reader
		// it replays with, and the epoch it belongs to.
		mu     lockorder.Mutex[lockorder.Projection]
		proj   *proj.Proj
		reader *journal.Reader
		epoch  uint64
		// gc is the garbage collection generation (state.Rec.GC) the
		// projection's index belongs to.
		gc uint32
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
	// ckptKnown is the newest checkpoint this process knows (noteCheckpoint).
	ckptKnown atomic.Pointer[ckptMark]
	// bigHead is the newest frame this process appended whose replay
	// would read a large head (noteAppended).
	bigHead atomic.Uint64
	// adopt keeps one reader-side checkpoint adoption at a time
	// (adoptForReader); tried is the projection end it last tried at.
	adopt struct {
		running atomic.Bool
		tried   atomic.Uint64
	}

	// lands serializes this handle's lands onto one ref. Goroutines of one
	// process (a server's clients) would otherwise race each other for the
	// ref's compare-and-swap and re-merge after every loss, and a loser
	// could run out of attempts behind the others; across processes the
	// writer queue orders them. mu guards the map only.
	lands struct {
		mu sync.Mutex
		by map[string]*lockorder.Mutex[lockorder.Land]
	}

	// poisoned is set by a failed journal sync, closed by Close; bg counts
	// the background goroutines (checkpoints, compactions) Close waits for.
	poisoned atomic.Bool
	closed   atomic.Bool
	bg       sync.WaitGroup
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
		CatchUp: s.catchUpUnlocked, Closed: &s.closed, SkipWaiter: o.weaken&testknobs.QueueSkipWaiter != 0,
		Check: s.checkDir})
	s.compactor = compact.New(compact.Config{FS: o.FS, Dir: dir, Store: id, LockTimeout: o.LockTimeout, Install: s.installRuns})
	s.sched = ckpt.NewScheduler(ckpt.SchedulerConfig{Inline: o.InlineCheckpoint, Background: s.background,
		Due: s.checkpointDue, Known: s.ckptNext, Write: func() error { return s.checkpointNow(false) },
		Compact: s.compactor.Loop})
	s.noteDir()
	s.pipe = pipeline.New(pipeline.Config{Env: (*pipeEnv)(s), Lock: s.writer,
		AckBeforeSync: o.weaken&testknobs.AckBeforeSync != 0, Background: s.background,
		CASIfExists: o.weaken&testknobs.CASIfExists != 0})
	s.groups.SetEntries(o.GroupCache)
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

// lockPath names a lock file of the store directory.
func (s *Store) lockPath(name string) string { return path.Join(s.dir, name) }

// Dir returns the store's directory as it was opened.
func (s *Store) Dir() string { return s.dir }

// setBoot records the current boot id, and makes the parts that carry it.
func (s *Store) setBoot(boot string) {
	s.boot = state.BootHash(boot)
	s.syncer = groupsync.New(groupsync.Config{FS: s.fs, Dir: s.dir, State: s.state, Boot: s.boot, Journal: s.jcfg,
		LockTimeout: s.opts.LockTimeout, Poisoned: &s.poisoned,
		SkipDatasync: s.opts.weaken&testknobs.SkipDatasync != 0, EarlyDurable: s.opts.weaken&testknobs.EarlyDurable != 0})
}

// closeFiles releases the handle's files: its projection's runs (or they
// are closed by their last borrower), readers, writer, the state file, its
// place in the writer queue and the kept segment handle.
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

// usable reports ErrClosed for a closed handle, or one a failed sync
// poisoned.
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
	in := &Info{DurableSeq: sn.seq, CheckpointSeq: s.ckptNext() - 1}
	s.view.proj.Idx.Each(func(_ ID, l proj.Loc) {
		if l.Seq > sn.seq {
			return
		}
		in.Objects++
		if l.Kind == objects.KindChangeset {
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

// landLock returns the mutex that orders this handle's lands onto ref.
func (s *Store) landLock(ref string) *lockorder.Mutex[lockorder.Land] {
	s.lands.mu.Lock()
	defer s.lands.mu.Unlock()
	if s.lands.by == nil {
		s.lands.by = map[string]*lockorder.Mutex[lockorder.Land]{}
	}
	m := s.lands.by[ref]
	if m == nil {
		m = new(lockorder.Mutex[lockorder.Land])
		s.lands.by[ref] = m
	}
	return m
}

// noteDir records the identity of the store's directory, if the
// filesystem gives one.
func (s *Store) noteDir() {
	if fi, err := s.fs.Stat(s.dir); err == nil {
		s.dirID, s.dirKnown = vfs.InodeOf(fi)
	}
}

// checkDir fails with ErrMoved when the store's path no longer names the
// directory it named at open. It runs before every section under LOCK
// and before a checkpoint is written: each would write by path.
func (s *Store) checkDir() error {
	if !s.dirKnown {
		return nil
	}
	fi, err := s.fs.Stat(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s no longer exists", ErrMoved, s.dir)
	}
	if err != nil {
		return errs.IO("stat "+s.dir, err)
	}
	if id, ok := vfs.InodeOf(fi); ok && (id.Dev != s.dirID.Dev || id.Ino != s.dirID.Ino) {
		return fmt.Errorf("%w: %s is another directory now", ErrMoved, s.dir)
	}
	return nil
}
