package core

// This file fixes the public API while the store is built. Bodies that say
// "not implemented" are filled in by the store work (issue 3).

import (
	"errors"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// ID is an object id.
type ID = objects.ID

// Weakening is a set of test-only canaries that deliberately break a
// durability rule, so the crash sweep can prove it would notice. The zero
// value is the correct store. No CLI flag or environment variable sets it.
type Weakening uint32

// The canaries.
const (
	WeakSkipDatasync  Weakening = 1 << iota // never fdatasync the journal
	WeakAckBeforeSync                       // acknowledge, then sync
	WeakSkipDirSync                         // skip SyncDir when a segment or loose object is created
	WeakSkipChecksum                        // do not verify checksums on read or recovery
	WeakEarlyDurable                        // publish the durable offset before the sync
	WeakFalseFresh                          // write every frame as fresh, even one whose changeset the store holds
)

// Options configure a Store.
type Options struct {
	FS              vfs.FS        // nil: the real OS
	LockTimeout     time.Duration // 0: 10s
	CheckpointEvery int           // frames between checkpoints; 0: default
	InlineThreshold int           // blobs larger than this are loose objects; 0: default
	SegmentSize     int64         // journal segment size; 0: default
	// CacheBytes bounds each of a Store's two read caches, the changesets
	// its snapshots have read and verified (csCache) and the index run
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
	Weaken     Weakening
	// InlineCheckpoint, for tests, runs the checkpoint that follows an
	// acknowledged commit synchronously in the committing call instead of
	// on a background goroutine, so the sequence of filesystem calls is
	// deterministic (crash-point sweeps). The commit is acknowledged before
	// the checkpoint starts either way, and a checkpoint error is reported
	// by Close in both modes.
	InlineCheckpoint bool
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

var errNotImplemented = errors.New("core: not implemented")
