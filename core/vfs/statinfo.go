package vfs

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// statInfo is an fs.FileInfo built from a stat result. It keeps only what
// a FileInfo and InodeOf give out, in 64 bytes against a stat structure's
// 144: a status lists every file of a tree, and the listings are most of
// what it allocates. Sys builds a *syscall.Stat_t, as os's FileInfo holds,
// for callers that read one.
type statInfo struct {
	name         string
	mode         uint32 // st_mode
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
}

// newStatInfo converts st.
func newStatInfo(name string, st *unix.Stat_t) *statInfo {
	s := &statInfo{}
	s.set(name, st)
	return s
}

func (s *statInfo) set(name string, st *unix.Stat_t) {
	s.name, s.mode, s.size = name, st.Mode, st.Size
	s.mtime = st.Mtim.Sec*1e9 + st.Mtim.Nsec
	s.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	s.ino, s.dev = st.Ino, st.Dev
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.size }
func (s *statInfo) ModTime() time.Time { return time.Unix(0, s.mtime) }
func (s *statInfo) IsDir() bool        { return s.mode&syscall.S_IFMT == syscall.S_IFDIR }

// inode is what InodeOf reads, without building a stat structure.
func (s *statInfo) inode() Inode {
	return Inode{Dev: s.dev, Ino: s.ino, Ctime: time.Unix(0, s.ctime)}
}

// Sys returns a *syscall.Stat_t holding the fields s keeps (the others
// zero).
func (s *statInfo) Sys() any {
	return &syscall.Stat_t{
		Dev: s.dev, Ino: s.ino, Mode: s.mode, Size: s.size,
		Mtim: syscall.NsecToTimespec(s.mtime),
		Ctim: syscall.NsecToTimespec(s.ctime),
	}
}

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.mode & 0o777)
	switch s.mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
