// Package errs holds the store's error values and the mapping of causes to
// them. Package core re-exports every sentinel and error type under its own
// name; the store's internal packages build their errors here, so that
// every error a caller of core sees satisfies errors.Is for at most one
// sentinel (plus the underlying cause), and the CLI maps it to a code in one
// table.
package errs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/textmerge"
	"github.com/swarmops/swarmops/core/vfs"
)

// The sentinels (see core's documentation of each).
var (
	ErrBusy      = vfs.ErrBusy
	ErrConflict  = errors.New("core: conflict")
	ErrNotFound  = errors.New("core: not found")
	ErrAmbiguous = errors.New("core: ambiguous id prefix")
	ErrCorrupt   = errors.New("core: corrupt")
	ErrInvalid   = errors.New("core: invalid argument")
	ErrNoSpace   = errors.New("core: no space")
	ErrIO        = errors.New("core: I/O error")
	ErrExist     = errors.New("core: store exists")
	ErrNotStore  = errors.New("core: not a store")
	ErrClosed    = errors.New("core: store closed")
	ErrProtected = errors.New("core: protected ref")
	ErrReadOnly  = errors.New("core: store not writable")
	ErrEmpty     = errors.New("core: nothing to commit")
	ErrMoved     = errors.New("core: store directory moved")
	ErrCrashed   = vfs.ErrCrashed
)

// ConflictError is a failed ref compare-and-swap. Current is the ref's value
// (the zero id if it does not exist). MovedAt, when not zero, says the ref
// holds the expected value but moved since the move an undo reverses: it
// is the frame of the ref's last move. UndoneBy, when not zero, is the
// frame of an undo that already reversed the move an undo was asked for
// (a retried undo finds its first try landed).
type ConflictError struct {
	Ref      string
	Expected objects.ID
	Current  objects.ID
	MovedAt  uint64
	UndoneBy uint64
}

func (e *ConflictError) Error() string {
	if e.UndoneBy != 0 {
		return fmt.Sprintf("ref %q: the move was already undone (frame %d); it is %s", e.Ref, e.UndoneBy, Short(e.Current))
	}
	if e.MovedAt != 0 {
		return fmt.Sprintf("ref %q: is %s, but moved since (frame %d)", e.Ref, Short(e.Current), e.MovedAt)
	}
	return fmt.Sprintf("ref %q: expected %s, is %s", e.Ref, Short(e.Expected), Short(e.Current))
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ProtectedError is a move of a protected ref by an operation other than
// a land.
type ProtectedError struct {
	Ref     string
	Pattern string
	Op      refs.Op
}

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("ref %q is protected (by %q): only a land moves it, not %s", e.Ref, e.Pattern, e.Op)
}

// Unwrap makes errors.Is(err, ErrProtected) true.
func (e *ProtectedError) Unwrap() error { return ErrProtected }

// MergeConflictError is a three-way merge that conflicted on Paths
// (sorted). Hunks holds, for each of those paths whose text was merged by
// lines, the conflicting hunks: ours is the side merged onto (a land's
// target), theirs the side merged in (the change landed). A path without
// hunks conflicted as a whole file: binary content, a mode or type change,
// a delete against an edit, or a file where the other side has a
// directory.
type MergeConflictError struct {
	Paths []string
	Hunks map[string][]textmerge.Conflict
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
	Candidates []objects.ID
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

// Short prints id as its first 12 hex digits, or "(absent)" for the zero
// id, for messages.
func Short(id objects.ID) string {
	if id.IsZero() {
		return "(absent)"
	}
	return id.String()[:12]
}

// NotWritable reports whether err is the filesystem refusing to change a
// file: a read-only mount (EROFS), or files the process may read but not
// write (EACCES, EPERM: another user's store).
func NotWritable(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// IO turns an error from the filesystem or a store subpackage into the
// store's typed error, keeping the cause wrapped and naming what was being
// done. A simulated crash, a busy lock and an already typed error pass
// through with context only; ENOSPC becomes ErrNoSpace; EROFS, EACCES and
// EPERM become ErrReadOnly (NotWritable); a journal corruption
// becomes a *CorruptError; every other failure is ErrIO.
func IO(what string, err error) error {
	if err == nil {
		return nil
	}
	var jc *journal.CorruptError
	switch {
	case errors.As(err, &jc):
		return &CorruptError{File: jc.File, Offset: jc.Offset, Reason: jc.Reason}
	case isTyped(err):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %s: %w", ErrNoSpace, what, err)
	case NotWritable(err):
		return fmt.Errorf("%w: %s: %w", ErrReadOnly, what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrIO, what, err)
}

// isTyped reports whether err already satisfies one of the store's
// sentinels, so wrapping it again would give it a second one.
func isTyped(err error) bool {
	for _, s := range []error{ErrBusy, ErrConflict, ErrNotFound, ErrAmbiguous, ErrCorrupt, ErrInvalid,
		ErrNoSpace, ErrIO, ErrExist, ErrNotStore, ErrClosed, ErrCrashed, ErrReadOnly} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Ref maps a refs package error to the store's.
func Ref(err error) error {
	var c *refs.Conflict
	var r *refs.Refused
	switch {
	case err == nil:
		return nil
	case errors.As(err, &c):
		return &ConflictError{Ref: c.Ref, Expected: c.Expected, Current: c.Current, MovedAt: c.MovedAt}
	case errors.As(err, &r):
		return &ProtectedError{Ref: r.Ref, Pattern: r.Pattern, Op: r.Op}
	case errors.Is(err, refs.ErrInvalidName):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// Index types an error from core/index: damage is ErrCorrupt, the rest
// I/O.
func Index(op string, err error) error {
	var ce *index.CorruptError
	if errors.As(err, &ce) {
		return Corrupt(ce.File, ce.Offset, "%s: %s", op, ce.Reason)
	}
	return IO(op, err)
}

// Corrupt builds a *CorruptError.
func Corrupt(file string, off int64, format string, args ...any) error {
	return &CorruptError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// NeedsRecoveryError is a read of a store that must be recovered first
// (its state is from before a power loss, missing, or poisoned by a
// failed sync: see state.Healthy), by a process that cannot write it.
// Recovery cuts a torn tail and publishes the durable end, so it needs
// write access; reading without it could show frames recovery would cut
// (claim C4). errors.Is(err, ErrReadOnly) holds for it, and it wraps the
// error that refused the write.
type NeedsRecoveryError struct {
	Dir    string
	Reason string
	Err    error
}

func (e *NeedsRecoveryError) Error() string {
	return fmt.Sprintf("store %s needs recovery (%s), which needs write access: %v", e.Dir, e.Reason, e.Err)
}

// Unwrap makes errors.Is(err, ErrReadOnly) true and keeps the cause.
func (e *NeedsRecoveryError) Unwrap() []error { return []error{ErrReadOnly, e.Err} }
