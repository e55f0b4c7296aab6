package core

import (
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/zblob"
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
	// DefaultCheckpointBytes is B, the journal bytes between checkpoints
	// (a checkpoint is due at K frames or B bytes, whichever comes first).
	// An open reads at most about B of frames past the checkpoint plus
	// the last frame's head, and a head of B/16 or more makes a checkpoint
	// due by itself (noteAppended). Small commits (one 512-byte sector a frame)
	// reach K long before B, so B changes nothing for them. A checkpoint
	// costs about five syncs, so one per 4 MiB of journal adds less than
	// 0.1 sync to each commit under 80 KiB; a bigger commit pays about
	// five syncs per 4 MiB it writes, beside its own 160 sectors or more.
	DefaultCheckpointBytes = 4 << 20
	// DefaultInlineThreshold: blobs up to this size travel inside their
	// frame; larger ones become loose objects (one extra datasync and
	// directory sync each), which keeps the journal from being dominated by
	// a few large files while a small commit stays at one sync.
	DefaultInlineThreshold = 64 << 10
	// DefaultCommitChunkBytes: a commit writes its new blobs ahead of its
	// frame, in frames of their own, each time they reach this many bytes,
	// so a commit holds about this much content at once whatever its size
	// (three times over while a chunk's frame is encoded and appended).
	// Each such chunk costs one more data sync, so a commit under it keeps
	// its one sync; an import of Go's src (128 MB) pays about 32.
	DefaultCommitChunkBytes = 4 << 20
)

// DefaultCacheBytes is the default Options.CacheBytes: about a hundred
// thousand small changesets, or the changeset and delta tables of the index
// runs of about 150,000 changesets.
const DefaultCacheBytes = 32 << 20

// Options configure a Store.
type Options struct {
	FS              vfs.FS        // nil: the real OS
	LockTimeout     time.Duration // 0: 10s
	CheckpointEvery int           // frames between checkpoints; 0: default
	InlineThreshold int           // blobs larger than this are loose objects; 0: default
	SegmentSize     int64         // journal segment size; 0: default
	// CommitChunkBytes is the new blob bytes a commit holds before it
	// writes them ahead of its frame (loose objects, and a frame of their
	// own for the inline ones, made durable with one data sync); 0:
	// DefaultCommitChunkBytes, negative: never (the whole commit in one
	// frame, held in memory until it is written).
	CommitChunkBytes int64
	// CheckpointBytes is the journal bytes between checkpoints: one is due
	// when the frames since the last reach CheckpointEvery or their bytes
	// reach CheckpointBytes. 0: DefaultCheckpointBytes.
	CheckpointBytes int64
	// CacheBytes bounds each of a Store's two read caches, the changesets
	// its snapshots have read and verified and the index run blocks its
	// lookups have read, so a long-lived process answers repeated lookups
	// without reading; 0: DefaultCacheBytes, negative: no caches.
	CacheBytes int64
	// GroupCache is how many compressed groups of inline blobs a Store
	// keeps decoded, each up to 256 KiB, so that reading a group's blobs
	// again does not decode it again. The first read of a blob inside a
	// group it does not hold decodes only as far as that blob and keeps
	// nothing; a read of a group's first blob, or a second read of the
	// group, decodes the whole group and keeps it. 0: zblob's default of 4
	// (1 MiB), which serves a walk in commit order; a long-lived process
	// that serves many readers, such as swarmops serve, keeps more.
	GroupCache int
	// RetryPlace is how long a process keeps its place in the writer
	// queue after a commit advancing a ref lost its compare-and-swap
	// there, so that its retry (the next transaction moving that ref)
	// waits from that place instead of from the back: writers racing for
	// one ref then publish in the order they first queued, not in the
	// order they learned of their losses. A place no retry takes within
	// this time is given up, and so is one the process's next transaction
	// does not fit. 0: DefaultRetryPlace, negative: places are not kept.
	RetryPlace time.Duration
	Now        func() time.Time // the clock of changesets and ref moves; nil: time.Now
	// InlineCheckpoint, for tests, runs the checkpoint that follows an
	// acknowledged commit synchronously in the committing call instead of
	// on a background goroutine, so the sequence of filesystem calls is
	// deterministic (crash-point sweeps). The commit is acknowledged before
	// the checkpoint starts either way, and a checkpoint error is reported
	// by Close in both modes.
	InlineCheckpoint bool

	// weaken is the test-only canaries (internal/testknobs.Weaken).
	weaken testknobs.Weakening
}

func init() {
	testknobs.RegisterOptions(func(o *Options) *testknobs.Weakening { return &o.weaken })
}

// orDefault sets option name's zero value *v to def, and refuses a
// negative one as ErrInvalid.
func orDefault[T ~int | ~int64](v *T, def T, name string) error {
	if *v == 0 {
		*v = def
	}
	if *v < 0 {
		return fmt.Errorf("%w: Options.%s %v is negative", ErrInvalid, name, *v)
	}
	return nil
}

// fill sets the defaults of o's zero fields and checks the others: a
// malformed option is ErrInvalid, never a silent default.
func (o *Options) fill() error {
	if o.FS == nil {
		o.FS = defaultFS()
		if o.FS == nil {
			return fmt.Errorf("%w: Options.FS is nil and no real-OS filesystem is linked", ErrInvalid)
		}
	}
	// A lockorder build checks the order of the file locks too.
	o.FS = lockorder.WrapFS(o.FS)
	if err := orDefault(&o.LockTimeout, DefaultLockTimeout, "LockTimeout"); err != nil {
		return err
	}
	if err := orDefault(&o.CheckpointEvery, DefaultCheckpointEvery, "CheckpointEvery"); err != nil {
		return err
	}
	if err := orDefault(&o.CheckpointBytes, DefaultCheckpointBytes, "CheckpointBytes"); err != nil {
		return err
	}
	if o.InlineThreshold == 0 {
		o.InlineThreshold = DefaultInlineThreshold
	}
	if o.InlineThreshold < 0 || o.InlineThreshold > journal.MaxPayload/4 {
		return fmt.Errorf("%w: Options.InlineThreshold %d out of range", ErrInvalid, o.InlineThreshold)
	}
	if o.CommitChunkBytes == 0 {
		o.CommitChunkBytes = DefaultCommitChunkBytes
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
	if err := orDefault(&o.GroupCache, zblob.DefaultEntries, "GroupCache"); err != nil {
		return err
	}
	if o.RetryPlace == 0 {
		o.RetryPlace = DefaultRetryPlace
	}
	return nil
}
