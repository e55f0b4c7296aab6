package faultfs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// MemFS is an in-memory vfs.FS that models what a power loss keeps. See the
// package documentation for the persistence model. It is safe for concurrent
// use; every call takes one mutex, so it is a model, not a fast filesystem.
type MemFS struct {
	mu    sync.Mutex
	root  *inode
	boot  string
	ino   uint64 // last inode number handed out
	seq   uint64 // last directory-operation sequence number
	open  int64  // handles opened and not yet closed (OpenHandles)
	tick  int64  // the logical clock's last reading
	clock func() time.Time
}

// OpenHandles returns how many files opened on m are not closed yet, so a
// test can show that a long run does not leak handles.
func (m *MemFS) OpenHandles() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open
}

var (
	_ vfs.FS          = (*MemFS)(nil)
	_ afero.Symlinker = (*MemFS)(nil)
)

// memDev is the device number every MemFS file reports.
const memDev = 0x6d656d

// bootCounter makes every MemFS boot id distinct within a process.
var bootCounter atomic.Uint64

func newBootID() string {
	return fmt.Sprintf("memfs-boot-%d", bootCounter.Add(1))
}

// NewMem returns an empty memory filesystem whose root directory exists and
// is durable.
func NewMem() *MemFS {
	m := &MemFS{boot: newBootID()}
	m.root = m.newDir(0o755)
	return m
}

// inode is a file or a directory. A file keeps its live bytes (what reads
// see, the page cache), its durable image (what the disk holds) and the set
// of sectors written since the last sync. A directory keeps its live entries,
// its durable entries and the directory operations not yet made durable.
type inode struct {
	ino    uint64
	dir    bool
	mode   fs.FileMode
	mtime  time.Time
	ctime  time.Time
	target string // a symbolic link's target (mode has fs.ModeSymlink)

	live    content
	durable content
	dirty   bitset

	entries map[string]*inode
	synced  map[string]*inode
	pending []*dirOp

	lock chan struct{} // a one-slot semaphore, made on first Lock
}

func (m *MemFS) newDir(perm fs.FileMode) *inode {
	m.ino++
	t := m.now()
	return &inode{ino: m.ino, dir: true, mode: fs.ModeDir | perm&fs.ModePerm,
		mtime: t, ctime: t, entries: map[string]*inode{}, synced: map[string]*inode{}}
}

func (m *MemFS) newFile(perm fs.FileMode) *inode {
	m.ino++
	t := m.now()
	return &inode{ino: m.ino, mode: perm & fs.ModePerm, mtime: t, ctime: t}
}

// dirOp is one change of directory entries that is not durable yet. A rename
// between two directories is one dirOp listed in both; it becomes durable as
// a whole when either directory is synced (as one journal transaction does on
// ext4 and xfs), so the entry is never under both names nor under neither.
type dirOp struct {
	seq     uint64
	kind    dirOpKind
	from    *inode // directory losing the name (remove, rename)
	oldName string
	to      *inode // directory gaining the name (add, rename)
	newName string
	node    *inode
	applied bool
}

type dirOpKind uint8

const (
	opAdd    dirOpKind = iota + 1 // create, mkdir, link
	opDel                         // remove
	opRename                      // rename (same or different directories)
)

func (m *MemFS) record(op *dirOp) {
	m.seq++
	op.seq = m.seq
	if op.from != nil {
		op.from.pending = append(op.from.pending, op)
		m.touch(op.from)
	}
	if op.to != nil && op.to != op.from {
		op.to.pending = append(op.to.pending, op)
		m.touch(op.to)
	}
}

// applyTo applies op to the entry maps chosen by get (durable maps when
// syncing, the clone's maps when building a torn clone).
func (op *dirOp) applyTo(get func(*inode) map[string]*inode) {
	switch op.kind {
	case opAdd:
		if t := get(op.to); t != nil {
			t[op.newName] = op.node
		}
	case opDel:
		if f := get(op.from); f != nil && f[op.oldName] == op.node {
			delete(f, op.oldName)
		}
	case opRename:
		f, t := get(op.from), get(op.to)
		if f != nil && f[op.oldName] == op.node {
			delete(f, op.oldName)
		}
		if t != nil {
			t[op.newName] = op.node
		}
	}
}

func syncedMap(d *inode) map[string]*inode { return d.synced }

// flushBefore makes durable, in order, every pending op of d with a sequence
// number below limit. An op shared with another directory first flushes that
// directory's earlier ops, so durable state never reorders one directory's
// operations.
func flushBefore(d *inode, limit uint64) {
	kept := d.pending[:0]
	for _, op := range d.pending {
		if op.applied {
			continue
		}
		if op.seq >= limit {
			kept = append(kept, op)
			continue
		}
		if other := op.other(d); other != nil {
			flushBefore(other, op.seq)
		}
		op.applyTo(syncedMap)
		op.applied = true
	}
	clear(d.pending[len(kept):])
	d.pending = kept
}

func (op *dirOp) other(d *inode) *inode {
	if op.from != nil && op.from != d {
		return op.from
	}
	if op.to != nil && op.to != d {
		return op.to
	}
	return nil
}

// clean maps a name to an absolute slash path; relative names are taken
// from the root.
// clean makes name absolute and clean. Names are almost always absolute
// already; prefixing those with "/" would make path.Clean copy them to drop
// the doubled slash, an allocation on every call that the result does not
// need.
func clean(name string) string {
	if strings.HasPrefix(name, "/") {
		return path.Clean(name)
	}
	return path.Clean("/" + name)
}

func perr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// parent finds the directory holding p (cleaned), following links on the
// way to it, and p's base name.
func (m *MemFS) parent(p string) (*inode, string, error) {
	if p == "/" {
		return nil, "", syscall.EINVAL
	}
	dir, base := path.Split(p)
	d, err := m.lookup(path.Clean(dir))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, base, nil
}

// Name returns "MemFS".
func (m *MemFS) Name() string { return "MemFS" }

// Create creates or truncates name for reading and writing.
func (m *MemFS) Create(name string) (afero.File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens name for reading.
func (m *MemFS) Open(name string) (afero.File, error) {
	return m.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens name with os.OpenFile's flags: O_RDONLY, O_WRONLY, O_RDWR,
// O_CREATE, O_EXCL, O_TRUNC and O_APPEND. Creating a file adds an entry that
// is durable only after SyncDir of its directory.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if l, err := m.lookupLink(p); err == nil {
		switch {
		case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
			return nil, perr("open", name, syscall.EEXIST)
		case l.isLink() && flag&syscall.O_NOFOLLOW != 0:
			return nil, perr("open", name, syscall.ELOOP)
		}
	}
	n, d, base, err := m.walk(p, true)
	switch {
	case err == nil:
		if n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, perr("open", name, syscall.EISDIR)
		}
		if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			n.live.setSize(0, &n.dirty)
			m.touch(n)
		}
	case err == syscall.ENOENT && d != nil && flag&os.O_CREATE != 0:
		n = m.newFile(perm)
		d.entries[base] = n
		m.record(&dirOp{kind: opAdd, to: d, newName: base, node: n})
	default:
		return nil, perr("open", name, err)
	}
	if flag&syscall.O_DIRECTORY != 0 && !n.dir {
		return nil, perr("open", name, syscall.ENOTDIR)
	}
	m.open++
	return &memFile{fs: m, node: n, name: name, flag: flag}, nil
}

// Mkdir creates a directory; its entry is durable after SyncDir of the parent.
func (m *MemFS) Mkdir(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mkdir(name, clean(name), perm)
}

func (m *MemFS) mkdir(name, p string, perm os.FileMode) error {
	if _, err := m.lookupLink(p); err == nil {
		return perr("mkdir", name, syscall.EEXIST)
	}
	return m.addEntry("mkdir", name, p, func() *inode { return m.newDir(perm) })
}

// MkdirAll creates name and any missing parents. It succeeds if name is
// already a directory.
func (m *MemFS) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	cur := ""
	for _, part := range strings.Split(p, "/")[1:] {
		if part == "" {
			continue
		}
		cur += "/" + part
		n, err := m.lookup(cur)
		if err == nil {
			if !n.dir {
				return perr("mkdir", name, syscall.ENOTDIR)
			}
			continue
		}
		if err := m.mkdir(name, cur, perm); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes a file or an empty directory; the removal is durable after
// SyncDir of the parent.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.remove(name, clean(name))
}

func (m *MemFS) remove(name, p string) error {
	n, d, base, err := m.entry("remove", name, p)
	if err != nil {
		return err
	}
	if n.dir && len(n.entries) > 0 {
		return perr("remove", name, syscall.ENOTEMPTY)
	}
	delete(d.entries, base)
	m.record(&dirOp{kind: opDel, from: d, oldName: base, node: n})
	return nil
}

// RemoveAll removes name and everything below it; a missing name is not an
// error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	if p == "/" {
		return perr("removeall", name, syscall.EINVAL)
	}
	n, err := m.lookupLink(p)
	if err == syscall.ENOENT {
		return nil
	}
	if err != nil {
		return perr("removeall", name, err)
	}
	return m.removeAll(name, p, n)
}

func (m *MemFS) removeAll(name, p string, n *inode) error {
	if n.dir {
		for _, c := range sortedNames(n.entries) {
			if err := m.removeAll(name, p+"/"+c, n.entries[c]); err != nil {
				return err
			}
		}
	}
	return m.remove(name, p)
}

// Rename atomically moves oldname to newname, replacing a file (or empty
// directory) there. The change is durable after SyncDir of either directory.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, np := clean(oldname), clean(newname)
	n, fd, fbase, err := m.entry("rename", oldname, op)
	if err != nil {
		return err
	}
	td, tbase, err := m.parent(np)
	if err != nil {
		return perr("rename", newname, err)
	}
	if n.dir && (np == op || strings.HasPrefix(np, op+"/")) {
		if np == op {
			return nil
		}
		return perr("rename", newname, syscall.EINVAL)
	}
	if t, ok := td.entries[tbase]; ok {
		if t == n {
			return nil
		}
		switch {
		case t.dir && !n.dir:
			return perr("rename", newname, syscall.EISDIR)
		case !t.dir && n.dir:
			return perr("rename", newname, syscall.ENOTDIR)
		case t.dir && len(t.entries) > 0:
			return perr("rename", newname, syscall.ENOTEMPTY)
		}
	}
	delete(fd.entries, fbase)
	td.entries[tbase] = n
	m.record(&dirOp{kind: opRename, from: fd, oldName: fbase, to: td, newName: tbase, node: n})
	n.ctime = m.now()
	return nil
}

// Link adds newname as a second name of the file oldname. It never replaces
// an existing name (fs.ErrExist). The entry is durable after SyncDir.
func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLink(clean(oldname))
	if err != nil {
		return perr("link", oldname, err)
	}
	if n.dir {
		return perr("link", oldname, syscall.EPERM)
	}
	np := clean(newname)
	if _, err := m.lookupLink(np); err == nil {
		return perr("link", newname, syscall.EEXIST)
	}
	if err := m.addEntry("link", newname, np, func() *inode { return n }); err != nil {
		return err
	}
	n.ctime = m.now()
	return nil
}

// SyncDir makes every entry change made so far in directory name durable.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(clean(name))
	if err != nil {
		return perr("syncdir", name, err)
	}
	if !n.dir {
		return perr("syncdir", name, syscall.ENOTDIR)
	}
	flushBefore(n, ^uint64(0))
	return nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := clean(name)
	n, err := m.lookup(p)
	if err != nil {
		return nil, perr("stat", name, err)
	}
	return n.info(path.Base(p)), nil
}

// Chmod sets the permission bits of name.
func (m *MemFS) Chmod(name string, mode os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(clean(name))
	if err != nil {
		return perr("chmod", name, err)
	}
	n.mode = n.mode&^fs.ModePerm | mode&fs.ModePerm
	n.ctime = m.now()
	return nil
}

// Chown checks that name exists; ownership is not modelled.
func (m *MemFS) Chown(name string, uid, gid int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.lookup(clean(name)); err != nil {
		return perr("chown", name, err)
	}
	return nil
}

// Chtimes sets the modification time of name.
func (m *MemFS) Chtimes(name string, atime, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(clean(name))
	if err != nil {
		return perr("chtimes", name, err)
	}
	n.mtime = mtime
	n.ctime = m.now()
	return nil
}

// BootID returns this filesystem's boot id. A power-loss clone gets a new
// one; a process-crash clone keeps it.
func (m *MemFS) BootID() (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boot, nil
}

// Lock takes an exclusive lock on name (creating the file if needed). Locks
// belong to the file, not the name, as flock(2) locks do. Waiters queue in
// FIFO order (a Go channel's send queue). Locks are not carried into clones:
// a crash releases them.
func (m *MemFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, perr("lock", name, unwrapPath(err))
	}
	// The handle only finds the file (and creates it); the lock belongs to
	// the node, so the handle is closed at once rather than left open for
	// every lock taken in a long run.
	n := f.(*memFile).node
	if err := f.Close(); err != nil {
		return nil, perr("lock", name, unwrapPath(err))
	}
	m.mu.Lock()
	if n.dir {
		m.mu.Unlock()
		return nil, perr("lock", name, syscall.EISDIR)
	}
	if n.lock == nil {
		n.lock = make(chan struct{}, 1)
	}
	ch := n.lock
	m.mu.Unlock()
	if timeout <= 0 {
		select {
		case ch <- struct{}{}:
			return &memLock{ch: ch, name: name}, nil
		default:
			return nil, perr("lock", name, vfs.ErrBusy)
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ch <- struct{}{}:
		return &memLock{ch: ch, name: name}, nil
	case <-t.C:
		return nil, perr("lock", name, vfs.ErrBusy)
	}
}

type memLock struct {
	ch       chan struct{}
	name     string
	released atomic.Bool
}

// Unlock releases the lock; a second call fails with fs.ErrClosed.
func (l *memLock) Unlock() error {
	if !l.released.CompareAndSwap(false, true) {
		return perr("unlock", l.name, fs.ErrClosed)
	}
	<-l.ch
	return nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func sortedNames(m map[string]*inode) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
