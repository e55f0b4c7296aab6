// Package vfs is the filesystem seam of SwarmOps: the store performs every
// read, write, sync, rename, link, lock and directory operation through an FS,
// so that faultfs can see, count, fail and crash each call.
//
// FS is afero.Fs extended with the durability operations afero lacks. The
// extension is deliberately small:
//
//   - SyncDir makes the directory entries of one directory durable
//     (open O_DIRECTORY + fsync on Linux).
//   - Link creates a hard link and never replaces an existing name.
//   - Lock takes an exclusive inter-process lock on a file, waiting for
//     its holder to let go for at most a timeout.
//   - BootID names the current boot of the machine the files live on. A
//     power loss (or a crash clone of a memory filesystem) changes it, a
//     process crash does not, which tells the store whether page-cache state
//     written by an earlier process can still be trusted.
//
// Files opened through an FS are afero.File values. The per-file durability
// abilities (Datasync, Allocate) are optional interfaces found by type
// assertion; the package functions Datasync and Allocate apply the documented
// fallbacks, so callers never assert themselves.
//
// Errors are *fs.PathError values (or wrap one) whose Err is a syscall.Errno
// or one of this package's sentinels, so errors.Is works for EIO, ENOSPC,
// ErrBusy and ErrCrashed alike.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/spf13/afero"
)

// FS is the filesystem interface the store is written against.
type FS interface {
	afero.Fs

	// SyncDir makes durable every directory entry change (create, rename,
	// link, unlink) made so far in the directory name.
	SyncDir(name string) error

	// Link creates newname as a hard link to oldname. It fails with an error
	// satisfying errors.Is(err, fs.ErrExist) if newname exists; it never
	// replaces it. The new entry is durable only after SyncDir of its
	// directory.
	Link(oldname, newname string) error

	// Lock takes an exclusive lock on the file name, creating it if needed.
	// Waiters queue in the kernel (or an equivalent FIFO); Lock gives up
	// after timeout with an error satisfying errors.Is(err, ErrBusy). A
	// timeout of zero tries once without waiting. Locks exclude each other
	// across processes and across goroutines of one process alike. A lock is
	// never broken by another holder; it is released by Unlock on the
	// returned Locked, or by the death of the process that holds it.
	Lock(name string, timeout time.Duration) (Locked, error)

	// BootID returns an identifier of the current boot. It changes across a
	// power loss and stays the same across a process crash.
	BootID() (string, error)
}

// Locked is a held lock.
type Locked interface {
	// Unlock releases the lock. Calling it twice is an error.
	Unlock() error
}

// DataSyncer is implemented by files that can make their data durable
// without forcing metadata that is not needed to read the data back
// (fdatasync(2)).
type DataSyncer interface {
	Datasync() error
}

// QuickReader is implemented by files that can serve a small read of a page
// the system keeps cached as a raw system call: the calling goroutine keeps
// its processor. An ordinary read parks and resumes it through the
// scheduler, and beside a goroutine that is in fdatasync that hand-off alone
// cost a reader of the state file tens of microseconds at p99 (P7). A raw
// read that does go to disk holds its thread and processor until it
// returns, so it is meant for a few bytes read again and again.
type QuickReader interface {
	QuickReadAt(b []byte, off int64) (int, error)
}

// QuickReadAt reads len(b) bytes at off with QuickReader when f implements
// it, and with f.ReadAt otherwise; it returns what ReadAt would.
func QuickReadAt(f afero.File, b []byte, off int64) (int, error) {
	if q, ok := f.(QuickReader); ok {
		return q.QuickReadAt(b, off)
	}
	return f.ReadAt(b, off)
}

// Allocator is implemented by files that can reserve space.
type Allocator interface {
	// Allocate makes [off, off+n) part of the file, extending its size if
	// needed, and fills any newly added bytes with zeros. It does not make
	// them durable.
	Allocate(off, n int64) error
}

// ErrBusy is returned by Lock when the lock could not be taken within its
// timeout. It is the only way contention is reported; a lock is never broken.
var ErrBusy = errors.New("vfs: lock busy")

// ErrCrashed is returned by every call of a filesystem that has simulated a
// crash (faultfs's crash-at-Nth-call wrapper). It exists so that a simulated
// crash can never be mistaken for an ordinary I/O error by a test.
var ErrCrashed = errors.New("vfs: simulated crash")

// ErrNotSupported is returned when an FS cannot perform an operation at all
// (for example Link on a filesystem without hard links).
var ErrNotSupported = errors.New("vfs: operation not supported")

// Datasync makes f's data durable. It uses DataSyncer when f implements it
// and falls back to f.Sync (a full fsync, which is stronger) otherwise.
func Datasync(f afero.File) error {
	if d, ok := f.(DataSyncer); ok {
		return d.Datasync()
	}
	return f.Sync()
}

// zeroChunk bounds the buffer, and so each write, of WriteZeros.
const zeroChunk = 64 << 10

var zeros [zeroChunk]byte

// Allocate reserves [off, off+n) in f. It uses Allocator when f implements
// it; otherwise it writes zeros over the part of the range that lies beyond
// the current end of the file (never over existing data).
func Allocate(f afero.File, off, n int64) error {
	if n < 0 || off < 0 {
		return &fs.PathError{Op: "allocate", Path: f.Name(), Err: fs.ErrInvalid}
	}
	if a, ok := f.(Allocator); ok {
		return a.Allocate(off, n)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	start, end := off, off+n
	if size := st.Size(); start < size {
		start = size
	}
	return WriteZeros(f, start, end)
}

// WriteZeros writes zeros over every byte of [from, to) in f, existing data
// included, in writes of at most 64 KiB; an empty range writes nothing.
// Allocate's fallback uses it for the part of its range past the end of
// the file.
func WriteZeros(f afero.File, from, to int64) error {
	for from < to {
		k := min(to-from, zeroChunk)
		if _, err := f.WriteAt(zeros[:k], from); err != nil {
			return err
		}
		from += k
	}
	return nil
}

// ReadFull reads exactly len(p) bytes at off, reporting io.ErrUnexpectedEOF
// for a short file.
func ReadFull(f io.ReaderAt, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
