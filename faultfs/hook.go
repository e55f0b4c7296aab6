package faultfs

import "github.com/swarmops/swarmops/core/vfs"

// Hook calls a function before every call of vfs.FS, of the files it opens
// and of the locks it takes, as the other wrappers do, and forwards the
// call to the inner FS unless that function returns an error. It is the
// seam of a caller that needs to see or stop every call outside this
// package: a scheduler that parks the calling goroutine at each call.
type Hook struct {
	wrapFS
}

// NewHook wraps inner. before sees each call's Op, its path (the file's
// name for calls on a file, "" for BootID) and, for Rename and Link, the
// second path; a non-nil error fails the call without reaching inner.
func NewHook(inner vfs.FS, before func(op Op, path, to string) error) *Hook {
	return &Hook{wrapFS{inner: inner, before: before}}
}
