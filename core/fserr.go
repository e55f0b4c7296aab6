package core

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/refs"
)

// ioErr turns an error from the filesystem or a store subpackage into the
// store's typed error, keeping the cause wrapped and naming what was being
// done. A simulated crash, a busy lock and an already typed error pass
// through with context only; ENOSPC becomes ErrNoSpace; a journal corruption
// becomes a *CorruptError; every other failure is ErrIO.
func ioErr(what string, err error) error {
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
	}
	return fmt.Errorf("%w: %s: %w", ErrIO, what, err)
}

// isTyped reports whether err already satisfies one of the store's
// sentinels, so wrapping it again would give it a second one.
func isTyped(err error) bool {
	for _, s := range []error{ErrBusy, ErrConflict, ErrNotFound, ErrAmbiguous, ErrCorrupt, ErrInvalid,
		ErrNoSpace, ErrIO, ErrExist, ErrNotStore, ErrClosed, ErrCrashed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// refErr maps a refs package error to the store's.
func refErr(err error) error {
	var c *refs.Conflict
	switch {
	case err == nil:
		return nil
	case errors.As(err, &c):
		return &ConflictError{Ref: c.Ref, Expected: c.Expected, Current: c.Current}
	case errors.Is(err, refs.ErrInvalidName):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// corrupt builds a *CorruptError.
func corrupt(file string, off int64, format string, args ...any) error {
	return &CorruptError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
