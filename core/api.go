package core

import (
	"time"

	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/objects"
)

// ID is an object id.
type ID = objects.ID

// Change is one path change of a commit: Path, and either Delete, or the
// content, Data, with its Mode (0: objects.ModeFile). When Data is nil,
// Open returns the content: Commit calls it once per attempt, while it
// builds, and holds the bytes only until their chunk is written
// (Options.CommitChunkBytes), so a caller committing a big tree need not
// hold it in memory. Open's error fails the commit as it is. The type is
// the commit builder's own, so the builder takes a commit's changes as the
// caller gave them.
type Change = treebuild.Change

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
	// Op is the operation the Advance move records, with Agent (zero:
	// OpCommit); Land records OpLand, an import OpImport.
	Op Op
	// RefuseEmpty makes a commit of at most one parent whose changes
	// leave that parent's tree as it is fail with ErrEmpty, writing
	// nothing. (A merge's second parent is a change in itself.)
	RefuseEmpty bool
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
	Origin   // who moved it, and by which operation
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
