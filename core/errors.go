package core

import (
	"errors"
	"fmt"
	"strings"

	"github.com/swarmops/swarmops/core/vfs"
)

// Sentinel errors. Every error the store returns satisfies errors.Is for at
// most one of these (plus the underlying cause), and the CLI maps them to
// codes in one table.
var (
	// ErrBusy: the writer lock was not taken within Options.LockTimeout.
	// Retryable. The lock is never broken.
	ErrBusy = vfs.ErrBusy
	// ErrConflict: a ref CAS expectation failed, or a merge conflicted.
	ErrConflict = errors.New("core: conflict")
	// ErrNotFound: an id, prefix, ref or path does not exist.
	ErrNotFound = errors.New("core: not found")
	// ErrAmbiguous: an id prefix matches more than one object.
	ErrAmbiguous = errors.New("core: ambiguous id prefix")
	// ErrCorrupt: a checksum or structural check failed inside the durable
	// prefix. The store fails closed; it never truncates acknowledged data.
	ErrCorrupt = errors.New("core: corrupt")
	// ErrInvalid: the caller's input is malformed (a bad path, a bad name).
	ErrInvalid = errors.New("core: invalid argument")
	// ErrNoSpace: the filesystem is full.
	ErrNoSpace = errors.New("core: no space")
	// ErrIO: an I/O error the store could not complete the operation past.
	ErrIO = errors.New("core: I/O error")
	// ErrExist: Create found a store (or other files) already there.
	ErrExist = errors.New("core: store exists")
	// ErrNotStore: the directory is not a SwarmOps store.
	ErrNotStore = errors.New("core: not a store")
	// ErrClosed: the store was closed, or poisoned by a failed sync; reopen it.
	ErrClosed = errors.New("core: store closed")
	// ErrCrashed is a simulated crash (tests only).
	ErrCrashed = vfs.ErrCrashed
)

// ConflictError is a failed ref compare-and-swap. Current is the ref's value
// (ZeroID if it does not exist).
type ConflictError struct {
	Ref      string
	Expected ID
	Current  ID
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ref %q: expected %s, is %s", e.Ref, short(e.Expected), short(e.Current))
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// MergeConflictError is a land whose 3-way merge conflicted on Paths.
type MergeConflictError struct {
	Paths []string
}

func (e *MergeConflictError) Error() string {
	return "merge conflict in " + strings.Join(e.Paths, ", ")
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *MergeConflictError) Unwrap() error { return ErrConflict }

// CorruptError names where corruption was found.
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt: %s in file %q at offset %d", e.Reason, e.File, e.Offset)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// AmbiguousError lists the candidates of an ambiguous prefix.
type AmbiguousError struct {
	Prefix     string
	Candidates []ID
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prefix %q is ambiguous:", e.Prefix)
	for _, c := range e.Candidates {
		b.WriteString(" ")
		b.WriteString(c.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

func short(id ID) string {
	if id.IsZero() {
		return "(absent)"
	}
	return id.String()[:12]
}
