package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// osFS is the real filesystem. It is afero.OsFs plus the durability calls,
// made directly with golang.org/x/sys/unix. It is the only place in core that
// touches os for files.
type osFS struct {
	afero.OsFs
}

var _ FS = (*osFS)(nil)

var theOS = &osFS{}

// OS returns the real filesystem. It holds no state, so every caller may
// share it.
func OS() FS { return theOS }

// NewOS returns a new value of the real filesystem; it behaves exactly like
// OS() and exists for callers that want their own value to wrap.
func NewOS() FS { return &osFS{} }

// Name returns "OS".
func (o *osFS) Name() string { return "OS" }

func (o *osFS) Create(name string) (afero.File, error) {
	return o.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (o *osFS) Open(name string) (afero.File, error) {
	return o.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens name with open(2) and wraps the descriptor with
// os.NewFile; the file it returns also implements DataSyncer (fdatasync),
// Allocator (fallocate) and QuickReader.
//
// Why not os.OpenFile: it offers every descriptor to the runtime's network
// poller, which costs four fcntl calls and an epoll_ctl that fails
// (regular files and directories cannot be polled), and another epoll_ctl
// at close. Opening a store at 1M changesets opens a dozen files, and those
// calls were a third of its system calls. A descriptor handed to os.NewFile
// stays blocking and out of the poller, which is what os.OpenFile ends up
// with for a regular file anyway.
func (o *osFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &osFile{File: os.NewFile(uintptr(fd), name)}, nil
}

// Rename is rename(2). Unlike os.Rename it reports a *fs.PathError, as
// every error of an FS does: Path is the old name, Err names the new one and
// wraps the errno.
func (o *osFS) Rename(oldname, newname string) error {
	if err := ignoringEINTR(func() error { return unix.Rename(oldname, newname) }); err != nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fmt.Errorf("to %s: %w", newname, err)}
	}
	return nil
}

// SyncDir opens the directory O_RDONLY|O_DIRECTORY and fsyncs it, which is
// what makes entry changes in it durable on Linux filesystems.
func (o *osFS) SyncDir(name string) error {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := ignoringEINTR(func() error { return unix.Fsync(fd) }); err != nil {
		return &fs.PathError{Op: "syncdir", Path: name, Err: err}
	}
	return nil
}

// Link is link(2): it never replaces newname (EEXIST satisfies
// errors.Is(err, fs.ErrExist)). The error's Path is newname; its Err names
// oldname and wraps the errno.
func (o *osFS) Link(oldname, newname string) error {
	if err := ignoringEINTR(func() error { return unix.Link(oldname, newname) }); err != nil {
		return &fs.PathError{Op: "link", Path: newname, Err: fmt.Errorf("from %s: %w", oldname, err)}
	}
	return nil
}

// bootIDPath is where Linux publishes the random id of the current boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// bootID is the boot id, read once: a process never outlives its boot.
var bootID struct {
	once sync.Once
	id   string
	err  error
}

// BootID returns the kernel's boot id. It is read once per process (three
// system calls, not the six of os.ReadFile): every Open asks for it.
func (o *osFS) BootID() (string, error) {
	bootID.once.Do(func() { bootID.id, bootID.err = readBootID() })
	return bootID.id, bootID.err
}

func readBootID() (string, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(bootIDPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return "", &fs.PathError{Op: "bootid", Path: bootIDPath, Err: err}
	}
	defer unix.Close(fd)
	var b [64]byte
	n := 0
	for n < len(b) {
		var r int
		err := ignoringEINTR(func() (err error) {
			r, err = unix.Read(fd, b[n:])
			return err
		})
		if err != nil {
			return "", &fs.PathError{Op: "bootid", Path: bootIDPath, Err: err}
		}
		if r == 0 {
			break
		}
		n += r
	}
	id := strings.TrimSpace(string(b[:n]))
	if id == "" || n == len(b) {
		return "", &fs.PathError{Op: "bootid", Path: bootIDPath, Err: syscall.EINVAL}
	}
	return id, nil
}

// osFile is an *os.File with fdatasync and fallocate.
type osFile struct {
	*os.File
}

var (
	_ DataSyncer  = (*osFile)(nil)
	_ Allocator   = (*osFile)(nil)
	_ QuickReader = (*osFile)(nil)
)

// QuickReadAt is pread(2) made as a raw system call (see QuickReader). Like
// ReadAt, it returns io.EOF when the file ends before b is full.
func (f *osFile) QuickReadAt(b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	err := f.control("pread", func(fd int) error {
		for n < len(b) {
			r, _, errno := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd),
				uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
			switch {
			case errno == unix.EINTR:
				continue
			case errno != 0:
				return errno
			case r == 0:
				return io.EOF
			}
			n += int(r)
		}
		return nil
	})
	if errors.Is(err, io.EOF) {
		return n, io.EOF
	}
	return n, err
}

// control runs fn on the file's descriptor without taking it out of the Go
// runtime's hands (unlike Fd, which would make it blocking).
func (f *osFile) control(op string, fn func(fd int) error) error {
	rc, err := f.File.SyscallConn()
	if err != nil {
		return &fs.PathError{Op: op, Path: f.Name(), Err: err}
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return &fs.PathError{Op: op, Path: f.Name(), Err: err}
	}
	if ferr != nil {
		return &fs.PathError{Op: op, Path: f.Name(), Err: ferr}
	}
	return nil
}

// Datasync is fdatasync(2): the data and the metadata needed to read it
// back (the size) become durable; timestamps may not.
func (f *osFile) Datasync() error {
	return f.control("fdatasync", func(fd int) error {
		return ignoringEINTR(func() error { return unix.Fdatasync(fd) })
	})
}

// Allocate is fallocate(2) mode 0: blocks are reserved and the size grows
// to cover [off, off+n); existing bytes are untouched and new ones read as
// zeros. Where the filesystem does not support fallocate (EOPNOTSUPP), the
// part beyond the end of the file is filled with zeros instead.
func (f *osFile) Allocate(off, n int64) error {
	err := f.control("fallocate", func(fd int) error {
		return ignoringEINTR(func() error { return unix.Fallocate(fd, 0, off, n) })
	})
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return Allocate(f.File, off, n) // *os.File is no Allocator: the zero-fill fallback
	}
	return err
}

// ignoringEINTR retries fn while it is interrupted by a signal (the Go
// runtime's preemption signals interrupt slow syscalls).
func ignoringEINTR(fn func() error) error {
	for {
		err := fn()
		if err != unix.EINTR {
			return err
		}
	}
}

// Lock takes flock(2) LOCK_EX on a new open file description of name
// (created if needed). A flock lock belongs to the open file description,
// so two Lock calls in one process exclude each other exactly as two
// processes do, which the contention specs rely on.
//
// Why flock and not OFD locks (F_OFD_SETLKW): both belong to the open file
// description and both are released when it is closed, by Unlock or by the
// death of the process. flock is whole-file, which is all a lock file needs,
// and it exists on every Unix, while OFD locks are Linux-only and
// byte-range. Classic POSIX fcntl locks are unusable here: they belong to
// the process, so goroutines would not exclude each other, and closing any
// descriptor of the file drops them.
//
// A wait parks the goroutine until the file is closed by someone (the
// holder's Unlock, or its death), then tries LOCK_NB again, until timeout
// (ErrBusy); see waitClose for why it does not block in flock. Where
// inotify cannot be had, or does not see the closes, the wait tries LOCK_NB
// at growing intervals (pollFlock). It does not block in flock in a helper:
// a helper whose caller timed out cannot be interrupted, and taking the
// lock after that it would hold it until it noticed, a moment in which
// anyone's try fails. A timeout of zero tries once (LOCK_NB).
func (o *osFS) Lock(name string, timeout time.Duration) (Locked, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	err = ignoringEINTR(func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
	if err == nil {
		return &osLock{fd: fd, name: name}, nil
	}
	if err != unix.EWOULDBLOCK || timeout <= 0 {
		unix.Close(fd)
		if err == unix.EWOULDBLOCK {
			err = ErrBusy
		}
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	if handled, err := waitClose(fd, name, time.Now().Add(timeout)); handled {
		if err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
		}
		return &osLock{fd: fd, name: name}, nil
	}
	return pollFlock(fd, name, time.Now().Add(timeout))
}

// pollFlock waits for fd's lock by trying LOCK_NB every 50 µs at first,
// doubling to every 5 ms, until deadline: the wait where closes cannot be
// watched. It owns fd.
func pollFlock(fd int, name string, deadline time.Time) (Locked, error) {
	for d := 50 * time.Microsecond; ; d = min(2*d, 5*time.Millisecond) {
		left := time.Until(deadline)
		if left <= 0 {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrBusy}
		}
		time.Sleep(min(d, left))
		err := ignoringEINTR(func() error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
		if err == nil {
			return &osLock{fd: fd, name: name}, nil
		}
		if err != unix.EWOULDBLOCK {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
		}
	}
}

type osLock struct {
	mu   sync.Mutex
	fd   int // -1 once released
	name string
}

// Unlock releases the lock by closing its open file description; a second
// call fails with fs.ErrClosed.
func (l *osLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return &fs.PathError{Op: "unlock", Path: l.name, Err: fs.ErrClosed}
	}
	fd := l.fd
	l.fd = -1
	if err := unix.Close(fd); err != nil {
		return &fs.PathError{Op: "unlock", Path: l.name, Err: err}
	}
	return nil
}
