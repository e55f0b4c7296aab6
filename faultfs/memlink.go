package faultfs

import (
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
)

// This file holds MemFS's symbolic links (name resolution, the symlink
// abilities), the lookup and entry of a name in its directory that the
// calls changing directories share, its clock, and the FileInfo (with its
// Stat_t) every call returns.

// SetClock makes clock the source of the modification and change times
// of m and of its later crash clones. The default is a logical clock that
// advances one microsecond per reading, so no two changes share a time; a
// test of a coarse clock (a filesystem whose timestamps move in ticks, so
// that a file can change without its mtime moving) sets one that does not.
func (m *MemFS) SetClock(clock func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock = clock
}

// now reads the clock; m.mu is held.
func (m *MemFS) now() time.Time {
	if m.clock != nil {
		return m.clock()
	}
	m.tick++
	return time.Unix(0, m.tick*int64(time.Microsecond))
}

// newLink makes a symbolic link. Its target is part of the inode, so a
// link is durable with its directory entry, target and all.
func (m *MemFS) newLink(target string) *inode {
	m.ino++
	t := m.now()
	return &inode{ino: m.ino, mode: fs.ModeSymlink | 0o777, target: target, mtime: t, ctime: t}
}

func (n *inode) isLink() bool { return n.mode&fs.ModeSymlink != 0 }

// touch records a change of n's data: its mtime and ctime move.
func (m *MemFS) touch(n *inode) {
	n.mtime = m.now()
	n.ctime = n.mtime
}

// shell copies n's metadata, for a clone.
func (n *inode) shell() *inode {
	return &inode{ino: n.ino, dir: n.dir, mode: n.mode, mtime: n.mtime, ctime: n.ctime, target: n.target}
}

// maxLinks bounds the symbolic links one resolution follows (Linux's
// MAXSYMLINKS); past it a name fails with ELOOP.
const maxLinks = 40

// walk resolves p (cleaned) in the live namespace as the kernel does:
// symbolic links are followed in every component but the last, and in the
// last when follow is set; a relative target resolves from the link's
// directory, an absolute one from the root. It returns the inode, and the
// directory and name it was found under. When only the last component is
// missing, it returns ENOENT with that directory and name (where a create
// would put it: through a dangling link, at the link's target).
func (m *MemFS) walk(p string, follow bool) (n, dir *inode, name string, err error) {
	stack := []*inode{m.root}
	names := []string{""}
	var comps []string
	if p != "/" {
		comps = strings.Split(p[1:], "/")
	}
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack, names = stack[:len(stack)-1], names[:len(names)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		if !cur.dir {
			return nil, nil, "", syscall.ENOTDIR
		}
		child, ok := cur.entries[c]
		if !ok {
			if len(comps) == 0 {
				return nil, cur, c, syscall.ENOENT
			}
			return nil, nil, "", syscall.ENOENT
		}
		if child.isLink() && (len(comps) > 0 || follow) {
			if links++; links > maxLinks {
				return nil, nil, "", syscall.ELOOP
			}
			t := child.target
			if strings.HasPrefix(t, "/") {
				stack, names = stack[:1], names[:1]
			}
			comps = append(strings.Split(t, "/"), comps...)
			continue
		}
		stack, names = append(stack, child), append(names, c)
	}
	if len(stack) == 1 {
		return m.root, nil, "", nil
	}
	return stack[len(stack)-1], stack[len(stack)-2], names[len(names)-1], nil
}

// lookup finds the inode at p (cleaned), following every link.
func (m *MemFS) lookup(p string) (*inode, error) {
	n, _, _, err := m.walk(p, true)
	return n, err
}

// lookupLink finds the inode at p (cleaned) without following a link in
// its last component, as lstat, unlink and rename do.
func (m *MemFS) lookupLink(p string) (*inode, error) {
	n, _, _, err := m.walk(p, false)
	return n, err
}

// LstatIfPossible describes name without following a final link.
func (m *MemFS) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	n, err := m.lookupLink(p)
	if err != nil {
		return nil, true, perr("lstat", name, err)
	}
	return n.info(path.Base(p)), true, nil
}

// entry returns the node the path p names, a final link not followed,
// with its directory and its name there. Its errors are op's on name (p
// as the caller gave it).
func (m *MemFS) entry(op, name, p string) (n, d *inode, base string, err error) {
	if n, err = m.lookupLink(p); err != nil {
		return nil, nil, "", perr(op, name, err)
	}
	if d, base, err = m.parent(p); err != nil {
		return nil, nil, "", perr(op, name, err)
	}
	return n, d, base, nil
}

// addEntry enters the node mk makes as the new name p (name as the caller
// gave it, for errors from op) in its directory, recorded as a pending
// directory operation: the entry is durable after SyncDir of the directory.
// mk is not called where the directory cannot be found.
func (m *MemFS) addEntry(op, name, p string, mk func() *inode) error {
	d, base, err := m.parent(p)
	if err != nil {
		return perr(op, name, err)
	}
	n := mk()
	d.entries[base] = n
	m.record(&dirOp{kind: opAdd, to: d, newName: base, node: n})
	return nil
}

// SymlinkIfPossible creates name as a link holding target. It never
// replaces name; the entry is durable after SyncDir of its directory.
func (m *MemFS) SymlinkIfPossible(target, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if _, err := m.lookupLink(p); err == nil {
		return perr("symlink", name, syscall.EEXIST)
	}
	if target == "" {
		return perr("symlink", name, syscall.ENOENT)
	}
	return m.addEntry("symlink", name, p, func() *inode { return m.newLink(target) })
}

// ReadlinkIfPossible returns the target of the link name (EINVAL if name
// is not a link).
func (m *MemFS) ReadlinkIfPossible(name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLink(clean(name))
	if err != nil {
		return "", perr("readlink", name, err)
	}
	if !n.isLink() {
		return "", perr("readlink", name, syscall.EINVAL)
	}
	return n.target, nil
}

// fileInfo is the os.FileInfo of a MemFS inode. Sys returns a
// *syscall.Stat_t, as the real OS's does, with the inode number, the
// device memDev and the times.
type fileInfo struct {
	name string
	st   syscall.Stat_t
	mode fs.FileMode
}

func (n *inode) info(name string) *fileInfo {
	fi := &fileInfo{name: name, mode: n.mode}
	fi.st.Dev, fi.st.Ino, fi.st.Nlink = memDev, n.ino, 1
	fi.st.Mode = uint32(n.mode.Perm())
	switch {
	case n.dir:
		fi.st.Mode |= syscall.S_IFDIR
	case n.isLink():
		fi.st.Mode |= syscall.S_IFLNK
		fi.st.Size = int64(len(n.target))
	default:
		fi.st.Mode |= syscall.S_IFREG
		fi.st.Size = n.live.size
	}
	fi.st.Mtim = syscall.NsecToTimespec(n.mtime.UnixNano())
	fi.st.Ctim = syscall.NsecToTimespec(n.ctime.UnixNano())
	return fi
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }
