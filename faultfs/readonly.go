package faultfs

import (
	"os"
	"syscall"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// ReadOnly refuses every call that would change the inner FS, as a
// read-only mount (EROFS) or files owned by another user (EACCES) do, and
// forwards the rest: a store behind it can be read and never written.
//
// Refused with Errno: Create; OpenFile with O_WRONLY, O_RDWR, O_CREATE,
// O_TRUNC or O_APPEND; Mkdir, Remove, Rename, Link, Chmod, Symlink; Lock
// (vfs.OS opens the lock file for writing, creating it if needed); every
// write, Truncate and Allocate on a file. Reads, Stat, Readdir, SyncDir and
// syncs of a file opened for reading go through: the kernel allows them on
// a read-only file too.
type ReadOnly struct {
	wrapFS
	errno syscall.Errno
}

var _ vfs.FS = (*ReadOnly)(nil)

// NewReadOnly wraps inner so that every call that would change it fails
// with errno (syscall.EROFS or syscall.EACCES).
func NewReadOnly(inner vfs.FS, errno syscall.Errno) *ReadOnly {
	r := &ReadOnly{errno: errno}
	r.wrapFS = wrapFS{inner: inner, before: r.before}
	return r
}

func (r *ReadOnly) before(op Op, path, _ string) error {
	if op.Is(KindWrite) || op == OpLock {
		return perr(op.String(), path, r.errno)
	}
	return nil
}

// OpenFile refuses a flag that asks to write.
func (r *ReadOnly) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, perr("open", name, r.errno)
	}
	return r.wrapFS.OpenFile(name, flag, perm)
}
