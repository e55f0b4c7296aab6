package core

import "github.com/swarmops/swarmops/core/internal/errs"

// Sentinel errors. Every error the store returns satisfies errors.Is for at
// most one of these (plus the underlying cause), and the CLI maps them to
// codes in one table.
var (
	// ErrBusy: the writer lock was not taken within Options.LockTimeout.
	// Retryable. The lock is never broken.
	ErrBusy = errs.ErrBusy
	// ErrConflict: a ref CAS expectation failed, or a merge conflicted.
	ErrConflict = errs.ErrConflict
	// ErrNotFound: an id, prefix, ref or path does not exist.
	ErrNotFound = errs.ErrNotFound
	// ErrAmbiguous: an id prefix matches more than one object.
	ErrAmbiguous = errs.ErrAmbiguous
	// ErrCorrupt: a checksum or structural check failed inside the durable
	// prefix. The store fails closed; it never truncates acknowledged data.
	ErrCorrupt = errs.ErrCorrupt
	// ErrInvalid: the caller's input is malformed (a bad path, a bad name).
	ErrInvalid = errs.ErrInvalid
	// ErrNoSpace: the filesystem is full.
	ErrNoSpace = errs.ErrNoSpace
	// ErrIO: an I/O error the store could not complete the operation past.
	ErrIO = errs.ErrIO
	// ErrExist: Create found a store (or other files) already there.
	ErrExist = errs.ErrExist
	// ErrNotStore: the directory is not a SwarmOps store.
	ErrNotStore = errs.ErrNotStore
	// ErrClosed: the store was closed, or poisoned by a failed sync; reopen it.
	ErrClosed = errs.ErrClosed
	// ErrReadOnly: the store's files can be read but not changed (a
	// read-only mount, or another user's store). Every read works without
	// write access; a write fails with it, and so does a read of a store
	// that needs recovery first (a *NeedsRecoveryError), which only a
	// process that can write may run.
	ErrReadOnly = errs.ErrReadOnly
	// ErrEmpty: a commit with RefuseEmpty would leave its parent's tree as
	// it is; nothing was written.
	ErrEmpty = errs.ErrEmpty
	// ErrMoved: the store's directory was moved, removed or replaced by
	// another while this handle had it open; nothing was written. The
	// handle's files no longer all belong to the directory at its path, so
	// it refuses to write; reopen the store by its path.
	ErrMoved = errs.ErrMoved
	// ErrCrashed is a simulated crash (tests only).
	ErrCrashed = errs.ErrCrashed
)

// ConflictError is a failed ref compare-and-swap: the ref (Ref), the value
// the caller expected (Expected) and the ref's current value (Current, the
// zero ID if it does not exist). errors.Is(err, ErrConflict) holds for it.
type ConflictError = errs.ConflictError

// MergeConflictError is a land whose 3-way merge conflicted on Paths.
// errors.Is(err, ErrConflict) holds for it.
type MergeConflictError = errs.MergeConflictError

// CorruptError names where corruption was found: the file (File), the byte
// offset in it (Offset) and what is wrong (Reason). errors.Is(err,
// ErrCorrupt) holds for it.
type CorruptError = errs.CorruptError

// AmbiguousError lists the candidates (Candidates) of an ambiguous prefix
// (Prefix). errors.Is(err, ErrAmbiguous) holds for it.
type AmbiguousError = errs.AmbiguousError

// NeedsRecoveryError is a store that must be recovered before it can be
// read, opened by a process without write access (Dir, Reason, and the
// refused write in Err). errors.Is(err, ErrReadOnly) holds for it.
type NeedsRecoveryError = errs.NeedsRecoveryError
