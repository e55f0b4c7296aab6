package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// This file is the real OS's Root (and its symlink calls): part of the
// real-OS implementation, like osfs.go.

var (
	_ Rooter          = (*osFS)(nil)
	_ afero.Symlinker = (*osFS)(nil)
	_ Root            = (*osRoot)(nil)
	_ Root            = (*walkRoot)(nil)
)

// SymlinkIfPossible is symlink(2). Unlike os.Symlink it reports a
// *fs.PathError, as every error of an FS does: Path is the new link, Err
// names the target and wraps the errno.
func (o *osFS) SymlinkIfPossible(target, name string) error {
	if err := ignoringEINTR(func() error { return unix.Symlink(target, name) }); err != nil {
		return &fs.PathError{Op: "symlink", Path: name, Err: fmt.Errorf("to %s: %w", target, err)}
	}
	return nil
}

// noOpenat2 is set once openat2(2) turned out to be missing: ENOSYS on a
// kernel before 5.6, or EPERM from a seccomp filter older than the call.
// From then on every Root resolves component by component.
var noOpenat2 atomic.Bool

// dirCacheMax bounds the directory descriptors a Root keeps open.
const dirCacheMax = 256

// osRoot resolves beneath a directory descriptor with openat2(2)
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or, where
// openat2 is missing, by opening one component at a time with O_NOFOLLOW
// and checking each is a directory. Either way the kernel resolves from a
// descriptor, so a link swapped into the path while the Root works is met,
// not followed. Operations then use the *at calls on the parent's
// descriptor. Parent descriptors are kept (at most dirCacheMax), because a
// checkout writes file after file into the same directory; Remove and
// Rename drop those at or below the names they change.
type osRoot struct {
	name string
	fd   int
	dirs map[string]int
}

// OpenRoot opens dir (following links in dir itself: the caller chose it).
func (o *osFS) OpenRoot(dir string) (Root, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "openroot", Path: dir, Err: err}
	}
	return &osRoot{name: dir, fd: fd, dirs: map[string]int{}}, nil
}

func (r *osRoot) Name() string { return r.name }

func (r *osRoot) perr(op, name string, err error) error {
	if err == unix.ELOOP || err == unix.EXDEV {
		err = ErrNotBeneath
	}
	return &fs.PathError{Op: op, Path: path.Join(r.name, name), Err: err}
}

// open opens rel beneath the root with flags, never through a link.
func (r *osRoot) open(rel string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		for {
			fd, err := unix.Openat2(r.fd, rel, &how)
			switch err {
			case nil:
				return fd, nil
			case unix.EINTR, unix.EAGAIN:
				continue
			case unix.ENOSYS, unix.EPERM:
				noOpenat2.Store(true)
			default:
				return -1, err
			}
			break
		}
	}
	return r.walk(rel, flags)
}

// walk is open without openat2: each leading component is opened with
// O_PATH|O_NOFOLLOW and must be a directory; the last gets flags and
// O_NOFOLLOW.
func (r *osRoot) walk(rel string, flags int) (int, error) {
	comps := strings.Split(rel, "/")
	cur := r.fd
	for i, c := range comps {
		fl := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(comps)-1 {
			fl = flags | unix.O_NOFOLLOW
		}
		var nfd int
		err := ignoringEINTR(func() (err error) {
			nfd, err = unix.Openat(cur, c, fl, 0)
			return err
		})
		if err == unix.ENOTDIR && isLink(cur, c) {
			// O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR.
			err = unix.ELOOP
		}
		if cur != r.fd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		if i < len(comps)-1 {
			var st unix.Stat_t
			if err := unix.Fstat(nfd, &st); err != nil {
				unix.Close(nfd)
				return -1, err
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
			case unix.S_IFLNK:
				unix.Close(nfd)
				return -1, unix.ELOOP
			default:
				unix.Close(nfd)
				return -1, unix.ENOTDIR
			}
		}
		cur = nfd
	}
	return cur, nil
}

// isLink reports whether name in the directory dfd is a symbolic link.
func isLink(dfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// parent returns a descriptor of name's directory (owned by the Root) and
// name's last component.
func (r *osRoot) parent(op, name string) (int, string, error) {
	if err := checkName(op, name, false); err != nil {
		return -1, "", err
	}
	dir, base := path.Split(name)
	if dir == "" {
		return r.fd, base, nil
	}
	dir = dir[:len(dir)-1]
	if fd, ok := r.dirs[dir]; ok {
		return fd, base, nil
	}
	fd, err := r.open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", r.perr(op, name, err)
	}
	if len(r.dirs) >= dirCacheMax {
		r.dropDirs("")
	}
	r.dirs[dir] = fd
	return fd, base, nil
}

// dropDirs closes the cached descriptors of name and everything below it
// ("" drops them all).
func (r *osRoot) dropDirs(name string) {
	for d, fd := range r.dirs {
		if name == "" || d == name || strings.HasPrefix(d, name+"/") {
			unix.Close(fd)
			delete(r.dirs, d)
		}
	}
}

func (r *osRoot) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if name == "." {
		var fd int
		err := ignoringEINTR(func() (err error) {
			fd, err = unix.Openat(r.fd, ".", flag|unix.O_CLOEXEC, 0)
			return err
		})
		if err != nil {
			return nil, r.perr("open", name, err)
		}
		return &osFile{File: os.NewFile(uintptr(fd), r.name)}, nil
	}
	dfd, base, err := r.parent("open", name)
	if err != nil {
		return nil, err
	}
	var fd int
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(dfd, base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		return err
	})
	if err != nil {
		return nil, r.perr("open", name, err)
	}
	return &osFile{File: os.NewFile(uintptr(fd), path.Join(r.name, name))}, nil
}

func (r *osRoot) Mkdir(name string, perm os.FileMode) error {
	dfd, base, err := r.parent("mkdir", name)
	if err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Mkdirat(dfd, base, uint32(perm.Perm())) }); err != nil {
		return r.perr("mkdir", name, err)
	}
	return nil
}

func (r *osRoot) Remove(name string) error {
	dfd, base, err := r.parent("remove", name)
	if err != nil {
		return err
	}
	r.dropDirs(name)
	err = ignoringEINTR(func() error { return unix.Unlinkat(dfd, base, 0) })
	if err == unix.EISDIR {
		err = ignoringEINTR(func() error { return unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR) })
	}
	if err != nil {
		return r.perr("remove", name, err)
	}
	return nil
}

func (r *osRoot) Rename(oldname, newname string) error {
	// Both parents' descriptors must stay open until renameat: make room
	// for two before looking either up, so that the second lookup never
	// evicts (closes) the first one's.
	if len(r.dirs) >= dirCacheMax-1 {
		r.dropDirs("")
	}
	ofd, obase, err := r.parent("rename", oldname)
	if err != nil {
		return err
	}
	nfd, nbase, err := r.parent("rename", newname)
	if err != nil {
		return err
	}
	err = ignoringEINTR(func() error { return unix.Renameat(ofd, obase, nfd, nbase) })
	// Descriptors cached at or below either name now name other
	// directories, or none: dropped after the call, which still needed
	// the parents' (and a parent may lie below newname).
	r.dropDirs(oldname)
	r.dropDirs(newname)
	if err != nil {
		return &fs.PathError{Op: "rename", Path: path.Join(r.name, oldname),
			Err: fmt.Errorf("to %s: %w", path.Join(r.name, newname), err)}
	}
	return nil
}

func (r *osRoot) Symlink(target, name string) error {
	dfd, base, err := r.parent("symlink", name)
	if err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Symlinkat(target, dfd, base) }); err != nil {
		return r.perr("symlink", name, err)
	}
	return nil
}

func (r *osRoot) Lstat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if name == "." {
		if err := unix.Fstat(r.fd, &st); err != nil {
			return nil, r.perr("lstat", name, err)
		}
		return newStatInfo(path.Base(r.name), &st), nil
	}
	dfd, base, err := r.parent("lstat", name)
	if err != nil {
		return nil, err
	}
	if err := ignoringEINTR(func() error { return unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		return nil, r.perr("lstat", name, err)
	}
	return newStatInfo(base, &st), nil
}

func (r *osRoot) Readlink(name string) (string, error) {
	dfd, base, err := r.parent("readlink", name)
	if err != nil {
		return "", err
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Readlinkat(dfd, base, buf)
			return err
		})
		if err != nil {
			return "", r.perr("readlink", name, err)
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// dirFD opens the directory name ("." is the root) for reading or syncing.
func (r *osRoot) dirFD(op, name string) (int, error) {
	if err := checkName(op, name, true); err != nil {
		return -1, err
	}
	var fd int
	var err error
	if name == "." {
		err = ignoringEINTR(func() (err error) {
			fd, err = unix.Openat(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			return err
		})
	} else {
		fd, err = r.open(name, unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		return -1, r.perr(op, name, err)
	}
	return fd, nil
}

// ReadDir reads the names with getdents on the directory's descriptor and
// describes each with fstatat relative to it, so no entry is reached by a
// path that could meet a link. An entry removed between the two is left
// out.
func (r *osRoot) ReadDir(name string) ([]fs.FileInfo, error) {
	fd, err := r.dirFD("readdir", name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	// getdents on the descriptor itself: an os.File around it would cost
	// an fcntl a directory, and a status lists every directory of a tree.
	var names []string
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	for {
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.ReadDirent(fd, buf)
			return err
		})
		if err != nil {
			return nil, r.perr("readdir", name, err)
		}
		if n <= 0 {
			break
		}
		names = appendDirents(names, buf[:n])
	}
	sort.Strings(names)
	return r.lstatAt(fd, "readdir", name, names)
}

// LstatNames describes each name with fstatat relative to the directory's
// descriptor, as ReadDir does, but without getdents.
func (r *osRoot) LstatNames(name string, names []string) ([]fs.FileInfo, error) {
	for _, n := range names {
		if err := checkComponent("lstatnames", n); err != nil {
			return nil, err
		}
	}
	fd, err := r.dirFD("lstatnames", name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return r.lstatAt(fd, "lstatnames", name, names)
}

// lstatAt describes the names of the directory open as fd, leaving out
// those gone.
func (r *osRoot) lstatAt(fd int, op, name string, names []string) ([]fs.FileInfo, error) {
	// One backing array for the directory's infos: a status lists every
	// directory of a tree, and an allocation an entry is most of its heap.
	infos := make([]statInfo, len(names))
	out := make([]fs.FileInfo, 0, len(names))
	var st unix.Stat_t
	for _, n := range names {
		err := ignoringEINTR(func() error { return unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) })
		if err == unix.ENOENT {
			continue
		}
		if err != nil {
			return nil, r.perr(op, path.Join(name, n), err)
		}
		s := &infos[len(out)]
		s.set(n, &st)
		out = append(out, s)
	}
	return out, nil
}

func (r *osRoot) SyncDir(name string) error {
	fd, err := r.dirFD("syncdir", name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := ignoringEINTR(func() error { return unix.Fsync(fd) }); err != nil {
		return r.perr("syncdir", name, err)
	}
	return nil
}

// Close releases the root's descriptors.
func (r *osRoot) Close() error {
	r.dropDirs("")
	if r.fd < 0 {
		return &fs.PathError{Op: "close", Path: r.name, Err: fs.ErrClosed}
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: r.name, Err: err}
	}
	return nil
}
