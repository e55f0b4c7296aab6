package core

import (
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// ID is an object id.
type ID = objects.ID

// Options configure a Store.
type Options struct {
	FS              vfs.FS        // nil: the real OS
	LockTimeout     time.Duration // 0: 10s
	CheckpointEvery int           // frames between checkpoints; 0: default
	InlineThreshold int           // blobs larger than this are loose objects; 0: default
	SegmentSize     int64         // journal segment size; 0: default
	// CacheBytes bounds each of a Store's two read caches, the changesets
	// its snapshots have read and verified (internal/cscache) and the index run
	// blocks its lookups have read (index.BlockCache), so a long-lived
	// process answers repeated lookups without reading; 0:
	// DefaultCacheBytes, negative: no caches.
	CacheBytes int64
	// RetryPlace is how long a process keeps its place in the writer
	// queue after a commit advancing a ref lost its compare-and-swap
	// there, so that its retry (the next transaction moving that ref)
	// waits from that place instead of from the back: writers racing for
	// one ref then publish in the order they first queued, not in the
	// order they learned of their losses. A place no retry takes within
	// this time is given up, and so is one the process's next transaction
	// does not fit. 0: DefaultRetryPlace, negative: places are not kept.
	RetryPlace time.Duration
	Now        func() time.Time
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
	testknobs.RegisterOptions(func(opts any, w testknobs.Weakening) bool {
		o, ok := opts.(*Options)
		if ok {
			o.weaken = w
		}
		return ok
	})
}

// Change is one path change of a commit.
type Change struct {
	Path   string
	Delete bool
	Data   []byte
	Mode   objects.Mode // 0: objects.ModeFile
}

// CommitRequest describes a commit.
type CommitRequest struct {
	Parents []ID
	Changes []Change // applied to Parents[0]'s tree (an empty tree if none)
	Agent   string
	Message string
	Time    time.Time // zero: Options.Now()
	// Advance names a ref moved to the new changeset in the same journal
	// frame. Its expected old value is Parents[0], or absence if there are
	// no parents.
	Advance string
}

// RefUpdate is one compare-and-swap of a ref. Old zero means the ref must
// not exist (create); New zero deletes it.
type RefUpdate struct {
	Name     string
	Old, New ID
}

// RefEntry is a ref and its value.
type RefEntry struct {
	Name string
	ID   ID
}

// RefLogEntry is one move of a ref.
type RefLogEntry struct {
	Seq      uint64 // journal sequence number of the frame that moved it
	Old, New ID
	Time     time.Time
}

// PathChange is one entry of a diff.
type PathChange struct {
	Path     string
	Op       string // "add", "modify", "delete"
	Old, New objects.Entry
}

// LandOptions tune Land.
type LandOptions struct {
	MaxAttempts int // 0: default
	Agent       string
	Message     string
}

// LandResult reports a land.
type LandResult struct {
	Changeset ID   // the changeset now at the head of the target (the merge, or CHANGE itself on fast-forward)
	NoOp      bool // the target already held the change's delta hash
	Attempts  int
	// Remerged counts, per retry after a lost race, the paths re-merged:
	// only those the target gained since the previous attempt.
	Remerged []int
}

// Info is a summary of a store.
type Info struct {
	Changesets    int64
	Objects       int64
	Refs          int
	JournalBytes  int64
	Segments      int
	DurableSeq    uint64
	DurableOffset int64
	CheckpointSeq uint64
	LooseObjects  int64
}

// VerifyProblem is one problem found by Verify.
type VerifyProblem struct {
	File   string
	Offset int64
	Object string
	Reason string
}

// VerifyReport lists every problem Verify found.
type VerifyReport struct {
	Objects  int64
	Frames   int64
	Problems []VerifyProblem
}

// RecoverReport says what recovery did.
type RecoverReport struct {
	TornBytesCut   int64
	FramesReplayed int64
	Corrupt        []VerifyProblem
}
