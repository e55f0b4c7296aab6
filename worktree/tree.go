package worktree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// ErrNotWorkTree is returned by Open for a directory without a work-tree
// index (including one whose first checkout was interrupted before its
// index was written).
var ErrNotWorkTree = errors.New("worktree: not a work tree")

// ErrInterrupted is ErrNotWorkTree for a directory whose first checkout
// was interrupted: its metadata directory is there, its index is not.
// Checkout finishes such a checkout without Options.Force.
var ErrInterrupted = fmt.Errorf("%w: its first checkout was interrupted", ErrNotWorkTree)

// ErrNotEmpty is returned by Checkout for a non-empty directory that is not
// a work tree, unless Options.Force is set.
var ErrNotEmpty = errors.New("worktree: target directory is not empty")

// ErrSpecialFile is returned, with Options.RefuseSpecial, for a socket,
// fifo or device in a work tree; without it such files are skipped and
// listed.
var ErrSpecialFile = errors.New("worktree: special file")

// Files of the metadata directory.
const (
	indexFile = MetaDir + "/index"
	storeFile = MetaDir + "/store"
	tmpDir    = MetaDir + "/tmp"
	lockFile  = MetaDir + "/lock"
)

// lockTimeout bounds the wait for another process changing the same work
// tree.
const lockTimeout = 10 * time.Second

// Options configure the work-tree operations.
type Options struct {
	FS vfs.FS // nil: the real OS
	// StoreDir is the store's directory. Its exclude file is read, a tree
	// never writes into it, and a snapshot never records it, when it lies
	// inside the work tree. Checkout records it in the metadata directory
	// (StorePath reads it back).
	StoreDir string
	// NoIgnore turns off .gitignore files and the store's exclude file.
	// .git, the metadata directory and the store's directory stay out.
	NoIgnore bool
	// RefuseSpecial makes a socket, fifo or device in the tree an error
	// (ErrSpecialFile) instead of a skipped, listed path.
	RefuseSpecial bool
	// NoDirCache makes every walk read every directory, never trusting or
	// writing the directory records (dirs.go).
	NoDirCache bool
	// Sync makes a checkout durable: each file is fsynced before it is
	// renamed into place, and every directory changed is synced after
	// (git's core.fsync=all).
	Sync bool
	// Force lets a checkout write into a non-empty directory that is not
	// a work tree, and lets a switch overwrite local changes.
	Force bool
	// Progress, if set, is called after each file a checkout writes.
	Progress func(done, total int)
	// Ref is the ref a checkout or switch records as the one the tree
	// follows (empty: the revision was named by id, and the tree follows
	// none). Update records it when set and keeps the tree's otherwise.
	Ref string

	// weaken is the test-only canaries (internal/testknobs.Weaken).
	weaken testknobs.Weakening
}

func init() {
	testknobs.RegisterOptions(func(o *Options) *testknobs.Weakening { return &o.weaken })
}

// Tree is a work tree: a directory, its metadata and its index. A Tree is
// not safe for concurrent use; mutating operations take an inter-process
// lock in the metadata directory.
type Tree struct {
	fs       vfs.FS
	dir      string
	root     vfs.Root
	opts     Options
	idx      *Index
	boot     string
	storeRel string     // the store's directory relative to the tree, if inside it
	store    *vfs.Inode // the store directory's identity, if it exists
	onDisk   bool       // idx was read from the metadata directory
	tmpSeq   int
	stats    Stats
	// dirs holds the directory records a walk trusts (nil: none); recs
	// collects the ones it makes, recsFresh says one is new (dirs.go).
	dirs      *dirCache
	recs      []dirRecord
	recsFresh bool
	walkStart int64 // when the last walk began, nanoseconds since the epoch
}

// Stats counts the work of one operation: entries stat'ed (listed or
// lstat'ed), directories read (the others' names came from their records,
// dirs.go), files hashed or read, and their bytes.
type Stats struct {
	Stated    int64
	Listed    int64
	Hashed    int64
	BytesRead int64
}

func newTree(dir string, o Options) (*Tree, error) {
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	t := &Tree{fs: o.FS, dir: dir, opts: o, idx: &Index{}}
	var err error
	if t.boot, err = o.FS.BootID(); err != nil {
		return nil, err
	}
	if o.StoreDir != "" {
		if err := t.locateStore(); err != nil {
			return nil, err
		}
	}
	if t.root, err = vfs.OpenRoot(o.FS, dir); err != nil {
		return nil, err
	}
	return t, nil
}

// locateStore finds the store's directory relative to the tree (by name)
// and its identity (by inode), so that it is kept out under any spelling.
func (t *Tree) locateStore() error {
	sd, err1 := filepath.Abs(t.opts.StoreDir)
	td, err2 := filepath.Abs(t.dir)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if rel, err := filepath.Rel(td, sd); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		if rel == "." {
			return fmt.Errorf("%w: the work tree %q is the store directory", ErrReservedPath, t.dir)
		}
		t.storeRel = filepath.ToSlash(rel)
	}
	if fi, err := t.fs.Stat(t.opts.StoreDir); err == nil {
		if in, ok := vfs.InodeOf(fi); ok {
			t.store = &in
		}
	}
	return nil
}

// isStore reports whether fi describes the store's directory.
func (t *Tree) isStore(fi fs.FileInfo) bool {
	if t.store == nil || !fi.IsDir() {
		return false
	}
	in, ok := vfs.InodeOf(fi)
	return ok && in.Dev == t.store.Dev && in.Ino == t.store.Ino
}

// Open opens the work tree in dir. It fails with ErrNotWorkTree when dir
// has no index, and with ErrIndexCorrupt when the index does not decode.
func Open(dir string, o Options) (*Tree, error) {
	t, err := newTree(dir, o)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrNotWorkTree, err)
	}
	if err != nil {
		return nil, err
	}
	if err := t.readIndex(); err != nil {
		t.root.Close()
		return nil, err
	}
	return t, nil
}

// Close releases the tree's directory handles.
func (t *Tree) Close() error { return t.root.Close() }

// Dir returns the work tree's directory.
func (t *Tree) Dir() string { return t.dir }

// Base returns the changeset the tree was checked out from or last
// committed (the zero id for a tree adopted without a parent).
func (t *Tree) Base() objects.ID { return t.idx.Base }

// Carried returns the changeset the tree's last updates carried along as
// local changes, to be its next commit's second parent (Index.Carried),
// or the zero id.
func (t *Tree) Carried() objects.ID { return t.idx.Carried }

// Index returns the tree's index as last read or written. The caller must
// not change it.
func (t *Tree) Index() *Index { return t.idx }

func (t *Tree) readIndex() error {
	fi, err := t.root.Lstat(MetaDir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q has no %s", ErrNotWorkTree, t.dir, MetaDir)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %q: %s is not a directory", ErrNotWorkTree, t.dir, MetaDir)
	}
	data, err := t.readMeta(indexFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q has no index", ErrInterrupted, t.dir)
	}
	if err != nil {
		return err
	}
	ix, err := decodeIndex(data, true)
	if err != nil {
		return fmt.Errorf("%s: %w", path.Join(t.dir, indexFile), err)
	}
	t.idx, t.onDisk = ix, true
	return nil
}

// readMeta reads the metadata file name (or any file of the tree) whole,
// into a buffer of the size its stat gives: the index is the biggest
// buffer a status allocates, and every fresh heap page is a page fault.
func (t *Tree) readMeta(name string) ([]byte, error) {
	f, err := t.root.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return readAll(f, size)
}

// trusted reports whether e's stat data may stand for its content: not
// smudged, not racy (older than the index), written in this boot.
func (t *Tree) trusted(e *IndexEntry) bool {
	return !e.Smudged && t.idx.BootID == t.boot && e.Stat.Mtime < t.idx.Written.UnixNano()
}

// carry returns e for a new index without having looked at its file: an
// entry whose stat data could not be trusted under the current index stays
// untrusted under the new one (whose later write time would otherwise make
// a racy entry look settled).
func (t *Tree) carry(e IndexEntry) IndexEntry {
	if !t.trusted(&e) {
		e.Smudged = true
	}
	return e
}

// ensureMeta makes the metadata directory and its tmp directory real
// directories (removing, with Force, a link or file planted there), and
// clears temporary files a crash left behind. It reports whether it made
// the metadata directory.
func (t *Tree) ensureMeta() (bool, error) {
	made := false
	for _, d := range []string{MetaDir, tmpDir} {
		fi, err := t.root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return false, err
		case fi.IsDir():
			continue
		case t.opts.Force:
			if err := t.root.Remove(d); err != nil {
				return false, err
			}
		default:
			return false, &UnsafeTreeError{Path: d, Reason: "is not a directory (use force to replace it)"}
		}
		if err := t.root.Mkdir(d, 0o755); err != nil {
			return false, err
		}
		made = made || d == MetaDir
	}
	fis, err := t.root.ReadDir(tmpDir)
	if err != nil {
		return false, err
	}
	for _, fi := range fis {
		if err := t.removeAll(tmpDir + "/" + fi.Name()); err != nil {
			return false, err
		}
	}
	return made, nil
}

// lock takes the work tree's lock (the metadata directory must exist).
func (t *Tree) lock() (vfs.Locked, error) {
	return t.fs.Lock(path.Join(t.dir, lockFile), lockTimeout)
}

// begin is the prologue of every write to the tree: it makes the metadata
// directories when missing (made says it did) and takes the tree's lock,
// which the caller releases.
func (t *Tree) begin() (made bool, l vfs.Locked, err error) {
	if made, err = t.ensureMeta(); err != nil {
		return false, nil, err
	}
	if l, err = t.lock(); err != nil {
		return false, nil, err
	}
	return made, l, nil
}

// tmpName returns a fresh name in the metadata tmp directory.
func (t *Tree) tmpName() string {
	t.tmpSeq++
	return fmt.Sprintf("%s/%d", tmpDir, t.tmpSeq)
}

// writeIndex writes ix atomically (a temporary file renamed over the
// index), recording the filesystem's time and boot id. With Sync the file
// is fsynced before the rename and the directory after.
func (t *Tree) writeIndex(ix *Index) error {
	err := t.writeMeta(indexFile, t.opts.Sync, func(written time.Time) ([]byte, error) {
		// The racy-entry threshold.
		ix.Written, ix.BootID = written, t.boot
		return ix.Encode()
	})
	if err != nil {
		return err
	}
	t.idx, t.onDisk = ix, true
	return nil
}

// writeMeta writes the metadata file name atomically: encode's bytes go to
// a temporary file renamed over name. encode is given the new file's
// mtime, the filesystem's clock now, after every stat the content
// records. With sync the file is fsynced before the rename and the
// metadata directory after.
func (t *Tree) writeMeta(name string, sync bool, encode func(written time.Time) ([]byte, error)) error {
	tmp := t.tmpName()
	f, err := t.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	data, err := encode(fi.ModTime())
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := t.root.Rename(tmp, name); err != nil {
		return err
	}
	if sync {
		return t.root.SyncDir(MetaDir)
	}
	return nil
}

// writeStorePath records the store's directory for commands run in the
// tree (see StorePath).
func (t *Tree) writeStorePath() error {
	if t.opts.StoreDir == "" {
		return nil
	}
	abs, err := filepath.Abs(t.opts.StoreDir)
	if err != nil {
		return err
	}
	name := t.tmpName()
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(abs + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return t.root.Rename(name, storeFile)
}

// StorePath returns the store directory recorded in the work tree dir by
// the checkout that made it, or "" if none was recorded.
func StorePath(fsys vfs.FS, dir string) (string, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	root, err := vfs.OpenRoot(fsys, dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.OpenFile(storeFile, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := readSmall(f, storeFile)
	return strings.TrimSuffix(string(data), "\n"), err
}

// FindRoot returns the nearest directory at or above dir that holds a
// work-tree metadata directory, for commands run inside a work tree.
func FindRoot(fsys vfs.FS, dir string) (string, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if fi, err := vfs.Lstat(fsys, filepath.Join(d, MetaDir)); err == nil && fi.IsDir() {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("%w: no %s at or above %q", ErrNotWorkTree, MetaDir, dir)
		}
		d = up
	}
}

// removeAll removes p and, if it is a real directory, everything below it,
// never following a link.
func (t *Tree) removeAll(p string) error {
	fi, err := t.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		fis, err := t.root.ReadDir(p)
		if err != nil {
			return err
		}
		for _, c := range fis {
			if err := t.removeAll(p + "/" + c.Name()); err != nil {
				return err
			}
		}
	}
	return t.root.Remove(p)
}

// caseInsensitive probes whether the tree's filesystem takes two names
// differing in case for one: a probe file made in the tmp directory is
// looked up under another case.
func (t *Tree) caseInsensitive() (bool, error) {
	name := tmpDir + "/case-probe"
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	_, err = t.root.Lstat(tmpDir + "/CASE-PROBE")
	ci := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return ci, t.root.Remove(name)
}

// modeOf is the entry mode a file's lstat describes (0 for a directory or
// a special file). The executable bit is the owner's, as git reads it.
func modeOf(fi fs.FileInfo) objects.Mode {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return objects.ModeSymlink
	case !m.IsRegular():
		return 0
	case m&0o100 != 0:
		return objects.ModeExec
	}
	return objects.ModeFile
}

// statOf extracts the stat data an index keeps.
func statOf(fi fs.FileInfo) Stat {
	s := Stat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if in, ok := vfs.InodeOf(fi); ok {
		s.Ctime, s.Ino, s.Dev = in.Ctime.UnixNano(), in.Ino, in.Dev
	}
	return s
}

// sortEntries sorts index entries by path.
func sortEntries(es []IndexEntry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
}

// isNotDir reports an error meaning a leading component of a name is not a
// directory: a file, or a link the Root will not follow.
func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR) || errors.Is(err, vfs.ErrNotBeneath)
}
