package vfs

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/spf13/afero"
)

// Symbolic links are optional abilities of an FS, afero's own interfaces
// found by type assertion: afero.Lstater (LstatIfPossible), afero.Linker
// (SymlinkIfPossible) and afero.LinkReader (ReadlinkIfPossible). The store
// never makes a link; work trees do. The functions below apply them and
// report vfs.ErrNotSupported, in a *fs.PathError, for an FS without the
// ability. None of them falls back to a call that follows a link: a caller
// that must not follow one learns that it cannot rather than following it.

// Lstat describes name without following it if it is a symbolic link. It
// fails with ErrNotSupported when fsys has no lstat (an FS whose
// LstatIfPossible fell back to Stat counts as having none).
func Lstat(fsys FS, name string) (fs.FileInfo, error) {
	l, ok := fsys.(afero.Lstater)
	if !ok {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: ErrNotSupported}
	}
	fi, lstatCalled, err := l.LstatIfPossible(name)
	if err != nil {
		return nil, err
	}
	if !lstatCalled {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: ErrNotSupported}
	}
	return fi, nil
}

// Symlink creates name as a symbolic link holding target. Like symlink(2)
// it never replaces name (fs.ErrExist) and never looks at target. The new
// entry is durable only after SyncDir of its directory.
func Symlink(fsys FS, target, name string) error {
	l, ok := fsys.(afero.Linker)
	if !ok {
		return &fs.PathError{Op: "symlink", Path: name, Err: ErrNotSupported}
	}
	return l.SymlinkIfPossible(target, name)
}

// Readlink returns the target of the symbolic link name, exactly as it was
// made. A name that is not a link fails with EINVAL, as readlink(2) does.
func Readlink(fsys FS, name string) (string, error) {
	l, ok := fsys.(afero.LinkReader)
	if !ok {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: ErrNotSupported}
	}
	return l.ReadlinkIfPossible(name)
}

// Inode is the part of a file's status that fs.FileInfo does not carry and
// that tells whether a file is still the one seen before: its identity
// (device and inode number) and its change time, which every write, chmod,
// link and rename of the file moves.
type Inode struct {
	Dev, Ino uint64
	Ctime    time.Time
}

// InodeOf returns the inode data of fi, and false when fi carries none. The
// real OS and faultfs.MemFS both describe files with a *syscall.Stat_t in
// Sys.
func InodeOf(fi fs.FileInfo) (Inode, bool) {
	if s, ok := fi.(*statInfo); ok {
		return s.inode(), true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st == nil {
		return Inode{}, false
	}
	return Inode{Dev: uint64(st.Dev), Ino: st.Ino, Ctime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec)}, true
}
