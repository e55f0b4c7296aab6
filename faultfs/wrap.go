package faultfs

import (
	"io/fs"
	"os"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// wrapFS is the plumbing the wrappers share: it forwards every call of
// vfs.FS, of its symlink abilities (afero.Symlinker), of the files it opens
// and of the locks it takes to an inner FS, calling before first. It offers
// no vfs.Rooter: vfs.OpenRoot over a wrapper walks with the wrapper's own
// calls, so every step of a Root operation is a call the wrapper sees. A non-nil error from before fails the call without
// reaching the inner FS, so a wrapper that refuses calls freezes the inner
// state. Each exported wrapper is a small type embedding one wrapFS.
type wrapFS struct {
	inner vfs.FS
	// before sees every call: op, the path (the file's name for calls on a
	// file, "" for BootID) and, for Rename and Link, the second path
	// (for Symlink, the link's target).
	before func(op Op, path, to string) error
	// read, if set, sees the bytes each read of a file returned.
	read func(path string, n int)
}

// shortWrite is returned by before to make a write store the first half of
// its bytes and then fail with err.
type shortWrite struct{ err error }

func (s *shortWrite) Error() string { return s.err.Error() }
func (s *shortWrite) Unwrap() error { return s.err }

func (w *wrapFS) call(op Op, path, to string) error {
	err := w.before(op, path, to)
	if sw, ok := err.(*shortWrite); ok {
		return sw.err
	}
	return err
}

func (w *wrapFS) Name() string { return w.inner.Name() }

func (w *wrapFS) file(f afero.File, err error) (afero.File, error) {
	if err != nil {
		return nil, err
	}
	return &wrapFile{f: f, w: w}, nil
}

func (w *wrapFS) Create(name string) (afero.File, error) {
	if err := w.call(OpCreate, name, ""); err != nil {
		return nil, err
	}
	return w.file(w.inner.Create(name))
}

func (w *wrapFS) Open(name string) (afero.File, error) {
	if err := w.call(OpOpen, name, ""); err != nil {
		return nil, err
	}
	return w.file(w.inner.Open(name))
}

func (w *wrapFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	if err := w.call(op, name, ""); err != nil {
		return nil, err
	}
	return w.file(w.inner.OpenFile(name, flag, perm))
}

func (w *wrapFS) Mkdir(name string, perm os.FileMode) error {
	if err := w.call(OpMkdir, name, ""); err != nil {
		return err
	}
	return w.inner.Mkdir(name, perm)
}

func (w *wrapFS) MkdirAll(name string, perm os.FileMode) error {
	if err := w.call(OpMkdir, name, ""); err != nil {
		return err
	}
	return w.inner.MkdirAll(name, perm)
}

func (w *wrapFS) Remove(name string) error {
	if err := w.call(OpRemove, name, ""); err != nil {
		return err
	}
	return w.inner.Remove(name)
}

func (w *wrapFS) RemoveAll(name string) error {
	if err := w.call(OpRemoveAll, name, ""); err != nil {
		return err
	}
	return w.inner.RemoveAll(name)
}

func (w *wrapFS) Rename(oldname, newname string) error {
	if err := w.call(OpRename, oldname, newname); err != nil {
		return err
	}
	return w.inner.Rename(oldname, newname)
}

func (w *wrapFS) Stat(name string) (os.FileInfo, error) {
	if err := w.call(OpStat, name, ""); err != nil {
		return nil, err
	}
	return w.inner.Stat(name)
}

func (w *wrapFS) Chmod(name string, mode os.FileMode) error {
	if err := w.call(OpChmod, name, ""); err != nil {
		return err
	}
	return w.inner.Chmod(name, mode)
}

func (w *wrapFS) Chown(name string, uid, gid int) error {
	if err := w.call(OpChmod, name, ""); err != nil {
		return err
	}
	return w.inner.Chown(name, uid, gid)
}

func (w *wrapFS) Chtimes(name string, atime, mtime time.Time) error {
	if err := w.call(OpChmod, name, ""); err != nil {
		return err
	}
	return w.inner.Chtimes(name, atime, mtime)
}

func (w *wrapFS) SyncDir(name string) error {
	if err := w.call(OpSyncDir, name, ""); err != nil {
		return err
	}
	return w.inner.SyncDir(name)
}

func (w *wrapFS) Link(oldname, newname string) error {
	if err := w.call(OpLink, oldname, newname); err != nil {
		return err
	}
	return w.inner.Link(oldname, newname)
}

func (w *wrapFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	if err := w.call(OpLock, name, ""); err != nil {
		return nil, err
	}
	l, err := w.inner.Lock(name, timeout)
	if err != nil {
		return nil, err
	}
	return &wrapLock{l: l, w: w, name: name}, nil
}

func (w *wrapFS) BootID() (string, error) {
	if err := w.call(OpBootID, "", ""); err != nil {
		return "", err
	}
	return w.inner.BootID()
}

// LstatIfPossible forwards to the inner FS's lstat; an inner FS without
// one reports vfs.ErrNotSupported, so wrapping never turns an lstat into a
// stat that follows links.
func (w *wrapFS) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if err := w.call(OpStat, name, ""); err != nil {
		return nil, true, err
	}
	fi, err := vfs.Lstat(w.inner, name)
	return fi, true, err
}

// SymlinkIfPossible forwards to the inner FS's symlink (vfs.Symlink).
func (w *wrapFS) SymlinkIfPossible(target, name string) error {
	if err := w.call(OpSymlink, name, target); err != nil {
		return err
	}
	return vfs.Symlink(w.inner, target, name)
}

// ReadlinkIfPossible forwards to the inner FS's readlink (vfs.Readlink).
func (w *wrapFS) ReadlinkIfPossible(name string) (string, error) {
	if err := w.call(OpReadlink, name, ""); err != nil {
		return "", err
	}
	return vfs.Readlink(w.inner, name)
}

type wrapLock struct {
	l    vfs.Locked
	w    *wrapFS
	name string
}

func (l *wrapLock) Unlock() error {
	if err := l.w.call(OpUnlock, l.name, ""); err != nil {
		return err
	}
	return l.l.Unlock()
}

// wrapFile forwards a file's calls. It always offers Datasync and Allocate
// and applies vfs's fallbacks when the inner file lacks them, so wrapping
// never removes an ability and never adds a call kind the inner file lacks.
type wrapFile struct {
	f afero.File
	w *wrapFS
}

var (
	_ vfs.DataSyncer = (*wrapFile)(nil)
	_ vfs.Allocator  = (*wrapFile)(nil)
)

func (f *wrapFile) Name() string { return f.f.Name() }

func (f *wrapFile) Close() error {
	if err := f.w.call(OpClose, f.f.Name(), ""); err != nil {
		return err
	}
	return f.f.Close()
}

func (f *wrapFile) Read(p []byte) (int, error) {
	if err := f.w.call(OpRead, f.f.Name(), ""); err != nil {
		return 0, err
	}
	n, err := f.f.Read(p)
	f.w.sawRead(f.f.Name(), n)
	return n, err
}

func (f *wrapFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.w.call(OpRead, f.f.Name(), ""); err != nil {
		return 0, err
	}
	n, err := f.f.ReadAt(p, off)
	f.w.sawRead(f.f.Name(), n)
	return n, err
}

func (w *wrapFS) sawRead(path string, n int) {
	if w.read != nil && n > 0 {
		w.read(path, n)
	}
}

func (f *wrapFile) Seek(offset int64, whence int) (int64, error) {
	if err := f.w.call(OpSeek, f.f.Name(), ""); err != nil {
		return 0, err
	}
	return f.f.Seek(offset, whence)
}

// write runs one write call, honouring a short-write fault by passing on
// the first half of p and then failing.
func (f *wrapFile) write(p []byte, do func([]byte) (int, error)) (int, error) {
	err := f.w.before(OpWrite, f.f.Name(), "")
	if sw, ok := err.(*shortWrite); ok {
		n, werr := do(p[:len(p)/2])
		if werr != nil {
			return n, werr
		}
		return n, sw.err
	}
	if err != nil {
		return 0, err
	}
	return do(p)
}

func (f *wrapFile) Write(p []byte) (int, error) {
	return f.write(p, f.f.Write)
}

func (f *wrapFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

func (f *wrapFile) WriteString(s string) (int, error) {
	return f.write([]byte(s), f.f.Write)
}

func (f *wrapFile) Readdir(count int) ([]os.FileInfo, error) {
	if err := f.w.call(OpReaddir, f.f.Name(), ""); err != nil {
		return nil, err
	}
	return f.f.Readdir(count)
}

func (f *wrapFile) Readdirnames(n int) ([]string, error) {
	if err := f.w.call(OpReaddir, f.f.Name(), ""); err != nil {
		return nil, err
	}
	return f.f.Readdirnames(n)
}

func (f *wrapFile) Stat() (fs.FileInfo, error) {
	if err := f.w.call(OpStat, f.f.Name(), ""); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *wrapFile) Sync() error {
	if err := f.w.call(OpSync, f.f.Name(), ""); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *wrapFile) Datasync() error {
	if err := f.w.call(OpDatasync, f.f.Name(), ""); err != nil {
		return err
	}
	return vfs.Datasync(f.f)
}

func (f *wrapFile) Allocate(off, n int64) error {
	if err := f.w.call(OpAllocate, f.f.Name(), ""); err != nil {
		return err
	}
	return vfs.Allocate(f.f, off, n)
}

func (f *wrapFile) Truncate(size int64) error {
	if err := f.w.call(OpTruncate, f.f.Name(), ""); err != nil {
		return err
	}
	return f.f.Truncate(size)
}
