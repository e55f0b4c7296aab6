package faultfs

import (
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/swarmops/swarmops/core/vfs"
)

// memFile is an open MemFS file or directory. Its offset is its own, as an
// open file description's is.
type memFile struct {
	fs     *MemFS
	node   *inode
	name   string
	flag   int
	off    int64
	closed bool
	dirEnt []fs.FileInfo // Readdir listing, taken at the first Readdir
	dirPos int
}

var (
	_ vfs.DataSyncer = (*memFile)(nil)
	_ vfs.Allocator  = (*memFile)(nil)
)

// MaxFileSize bounds a MemFS file, as a real filesystem's limit does: a
// write, truncate or allocation beyond it fails with EFBIG instead of
// allocating a page table for an absurd offset.
const MaxFileSize = 1 << 40

func tooBig(end int64) bool { return end > MaxFileSize || end < 0 }

func (f *memFile) Name() string { return f.name }

// check reports a closed handle, a directory where data is needed, and a
// handle opened without the needed access.
func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return perr(op, f.name, fs.ErrClosed)
	}
	if f.node.dir && (op == "read" || op == "write" || op == "truncate" || op == "allocate") {
		return perr(op, f.name, syscall.EISDIR)
	}
	acc := f.flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if write && acc == os.O_RDONLY || !write && acc == os.O_WRONLY && op == "read" {
		return perr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	f.fs.open--
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := f.node.live.readAt(p, f.off)
	f.off += int64(n)
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, perr("readat", f.name, syscall.EINVAL)
	}
	n := f.node.live.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, perr("seek", f.name, fs.ErrClosed)
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		base = f.node.live.size
	default:
		return 0, perr("seek", f.name, syscall.EINVAL)
	}
	if base+offset < 0 {
		return 0, perr("seek", f.name, syscall.EINVAL)
	}
	f.off = base + offset
	return f.off, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		f.off = f.node.live.size
	}
	if tooBig(f.off + int64(len(p))) {
		return 0, perr("write", f.name, syscall.EFBIG)
	}
	f.node.live.writeAt(p, f.off, &f.node.dirty)
	f.fs.touch(f.node)
	f.off += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		// os.File refuses WriteAt on an O_APPEND file; so do we.
		return 0, perr("writeat", f.name, syscall.EINVAL)
	}
	if off < 0 {
		return 0, perr("writeat", f.name, syscall.EINVAL)
	}
	if tooBig(off + int64(len(p))) {
		return 0, perr("writeat", f.name, syscall.EFBIG)
	}
	f.node.live.writeAt(p, off, &f.node.dirty)
	f.fs.touch(f.node)
	return len(p), nil
}

func (f *memFile) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return perr("truncate", f.name, syscall.EINVAL)
	}
	if tooBig(size) {
		return perr("truncate", f.name, syscall.EFBIG)
	}
	f.node.live.setSize(size, &f.node.dirty)
	f.fs.touch(f.node)
	return nil
}

// Allocate extends the file with zeros to cover [off, off+n). Like
// fallocate(2) mode 0 it never changes existing bytes, and the new size is
// durable only after a sync.
func (f *memFile) Allocate(off, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("allocate", true); err != nil {
		return err
	}
	if off < 0 || n <= 0 {
		return perr("allocate", f.name, syscall.EINVAL)
	}
	if tooBig(off + n) {
		return perr("allocate", f.name, syscall.EFBIG)
	}
	if end := off + n; end > f.node.live.size {
		f.node.live.setSize(end, nil)
		f.fs.touch(f.node)
	}
	return nil
}

// Sync makes the file's data and size durable (its directory entry still
// needs SyncDir). On a directory handle it acts as SyncDir, as fsync on a
// directory descriptor does.
func (f *memFile) Sync() error { return f.sync("sync") }

// Datasync makes the file's data and the size needed to read it back
// durable: in this model it is the same as Sync, because the only metadata
// fsync adds (timestamps) is not modelled and not relied on.
func (f *memFile) Datasync() error { return f.sync("datasync") }

// sync is Sync and Datasync, op naming which in the error on a closed file.
func (f *memFile) sync(op string) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return perr(op, f.name, fs.ErrClosed)
	}
	f.syncLocked()
	return nil
}

func (f *memFile) syncLocked() {
	n := f.node
	if n.dir {
		flushBefore(n, ^uint64(0))
		return
	}
	if n.dirty.empty() && n.live.size == n.durable.size {
		return
	}
	n.durable = n.live.snapshot()
	n.dirty.clear()
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, perr("stat", f.name, fs.ErrClosed)
	}
	return f.node.info(path.Base(clean(f.name))), nil
}

// Readdir lists the directory sorted by name, with os.File's count rules.
func (f *memFile) Readdir(count int) ([]os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, perr("readdir", f.name, fs.ErrClosed)
	}
	if !f.node.dir {
		return nil, perr("readdir", f.name, syscall.ENOTDIR)
	}
	if f.dirEnt == nil {
		f.dirEnt = []fs.FileInfo{}
		for _, name := range sortedNames(f.node.entries) {
			f.dirEnt = append(f.dirEnt, f.node.entries[name].info(name))
		}
	}
	rest := f.dirEnt[f.dirPos:]
	if count <= 0 {
		f.dirPos = len(f.dirEnt)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if count > len(rest) {
		count = len(rest)
	}
	f.dirPos += count
	return rest[:count], nil
}

func (f *memFile) Readdirnames(n int) ([]string, error) {
	fis, err := f.Readdir(n)
	names := make([]string, len(fis))
	for i, fi := range fis {
		names[i] = fi.Name()
	}
	return names, err
}
