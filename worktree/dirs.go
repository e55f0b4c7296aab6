package worktree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"sort"
	"strings"
	"time"

	"lukechampine.com/blake3"
)

// The directory records spare a walk the reading of directories that hold
// only tracked names, git's untracked cache being the anchor. Listing a
// directory (open, getdents, sort) is a fifth of a status's CPU, and it is
// needed only to find names the index lacks. A directory's name set
// changes only through a create, unlink or rename in it, and each of those
// moves the directory's mtime and ctime. So a record of a directory's stat,
// taken before a listing that showed exactly its tracked names, vouches
// that the names are still exactly those while the stat is unchanged: the
// walk then lstats the tracked names without listing the directory.
//
// A record is trusted only when it was written in this boot (a power loss
// may lose a directory's update and keep its old times), when the stat is
// older than the file that holds it (a change within the same clock tick
// as the listing would not move the times), and when the index still
// tracks the names it was made for (a digest of them). Anything else, and
// a dirs file that is missing, torn or foreign, means the directory is
// listed, as if there were no records. The file is a cache: it is written
// without a sync, and never read as an error.

// dirsFile holds the directory records.
const dirsFile = MetaDir + "/dirs"

// dirSettle is how long before a walk began a directory must have last
// changed for the walk to record it. A name created in the same clock tick
// as the directory's last change, after the walk read the directory, would
// leave its times as recorded; a change a whole tick older than the
// reading cannot share a tick with anything after it. Filesystem times
// move in ticks of the kernel's coarse clock (at most 10 ms); 20 ms keeps
// a margin, and a filesystem with coarser times (or another clock, over a
// network) needs the records off (Options.NoDirCache).
const dirSettle = 20 * time.Millisecond

const (
	dirsMagic   = "SWTD"
	dirsVersion = 1
	// dirFixed is a record's size without its path: path length, stat
	// (size, mtime, ctime, inode, device) and the names' digest.
	dirFixed   = 2 + 5*8 + 8
	dirsHeader = 4 + 1 + 8 + 1
)

// dirRecord is one directory seen to hold exactly its tracked names.
type dirRecord struct {
	Path  string
	Stat  Stat   // the directory's own lstat, taken before the listing
	Names uint64 // namesDigest of the names it held
}

// dirCache is the content of the dirs file.
type dirCache struct {
	BootID  string
	Written int64 // the file's mtime: the filesystem's clock after every listing recorded
	Dirs    []dirRecord
}

// encode returns the file's encoding: header, records sorted by path, and
// a BLAKE3 sum of the rest.
func (c *dirCache) encode() []byte {
	b := make([]byte, 0, dirsHeader+len(c.BootID)+4+len(c.Dirs)*(dirFixed+16)+sumLen)
	b = append(b, dirsMagic...)
	b = append(b, dirsVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Written))
	b = appendStr8(b, c.BootID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Dirs)))
	for _, d := range c.Dirs {
		b = appendStr16(b, d.Path)
		for _, v := range []uint64{uint64(d.Stat.Size), uint64(d.Stat.Mtime), uint64(d.Stat.Ctime), d.Stat.Ino, d.Stat.Dev, d.Names} {
			b = binary.BigEndian.AppendUint64(b, v)
		}
	}
	sum := blake3.Sum256(b)
	return append(b, sum[:]...)
}

var errDirsCorrupt = errors.New("worktree: corrupt dirs file")

// decodeDirs decodes a dirs file. Any flaw is an error, which the caller
// treats as no records. It never panics and allocates at most in
// proportion to len(b).
func decodeDirs(b []byte) (*dirCache, error) {
	if len(b) < dirsHeader+4+sumLen {
		return nil, errDirsCorrupt
	}
	body := b[:len(b)-sumLen]
	if sum := blake3.Sum256(body); !bytes.Equal(sum[:], b[len(body):]) {
		return nil, errDirsCorrupt
	}
	if string(body[:4]) != dirsMagic || body[4] != dirsVersion {
		return nil, errDirsCorrupt
	}
	c := &dirCache{Written: int64(binary.BigEndian.Uint64(body[5:]))}
	off := 13
	blen := int(body[off])
	off++
	if len(body)-off < blen+4 {
		return nil, errDirsCorrupt
	}
	c.BootID = string(body[off : off+blen])
	off += blen
	n := binary.BigEndian.Uint32(body[off:])
	off += 4
	if uint64(n) > uint64(len(body)-off)/dirFixed {
		return nil, errDirsCorrupt
	}
	text := string(body)
	c.Dirs = make([]dirRecord, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(body)-off < dirFixed {
			return nil, errDirsCorrupt
		}
		plen := int(binary.BigEndian.Uint16(body[off:]))
		off += 2
		if len(body)-off < plen+dirFixed-2 {
			return nil, errDirsCorrupt
		}
		d := dirRecord{Path: text[off : off+plen]}
		off += plen
		u := func(k int) uint64 { return binary.BigEndian.Uint64(body[off+8*k:]) }
		d.Stat = Stat{Size: int64(u(0)), Mtime: int64(u(1)), Ctime: int64(u(2)), Ino: u(3), Dev: u(4)}
		d.Names = u(5)
		off += 5*8 + 8
		if d.Path == "" || (i > 0 && c.Dirs[i-1].Path >= d.Path) {
			return nil, errDirsCorrupt
		}
		c.Dirs = append(c.Dirs, d)
	}
	if off != len(body) {
		return nil, errDirsCorrupt
	}
	return c, nil
}

// namesDigest is a 64-bit FNV-1a digest of sorted names, each ended by a
// NUL (which no name holds).
func namesDigest(names []string) uint64 {
	h := uint64(14695981039346656037)
	for _, n := range names {
		for i := 0; i < len(n); i++ {
			h = (h ^ uint64(n[i])) * 1099511628211
		}
		h *= 1099511628211 // the NUL
	}
	return h
}

// children returns the names directly in the directory dir that the index
// tracks, sorted: its tracked files and links, and the first component of
// each deeper path. lo and hi are dir's span.
func (ix *Index) children(lo, hi int, dir string) []string {
	skip := 0
	if dir != "." {
		skip = len(dir) + 1
	}
	var names []string
	for i := lo; i < hi; {
		rest := ix.Entries[i].Path[skip:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			names = append(names, rest)
			i++
			continue
		}
		sub := rest[:j+1]
		names = append(names, rest[:j])
		// Step over the subdirectory's entries.
		i += sort.Search(hi-i, func(k int) bool { return !strings.HasPrefix(ix.Entries[i+k].Path[skip:], sub) })
	}
	// The index sorts "a/b" after "a-b", whose name sorts after "a".
	if !sort.StringsAreSorted(names) {
		sort.Strings(names)
	}
	return names
}

// loadDirs reads the dirs file into t.dirs, keeping records only when the
// file is sound and of this boot.
func (t *Tree) loadDirs() {
	t.dirs = nil
	if !t.onDisk || t.opts.NoDirCache {
		return
	}
	data, err := t.readMeta(dirsFile)
	if err != nil {
		return
	}
	c, err := decodeDirs(data)
	if err != nil || c.BootID != t.boot {
		return
	}
	t.dirs = c
}

// trustedDir reports whether dir's record vouches that dir holds exactly
// the tracked names names, its lstat now being fi.
func (t *Tree) trustedDir(dir string, fi fs.FileInfo, names []string) bool {
	if t.dirs == nil || fi == nil || !fi.IsDir() {
		return false
	}
	ds := t.dirs.Dirs
	i := sort.Search(len(ds), func(i int) bool { return ds[i].Path >= dir })
	if i == len(ds) || ds[i].Path != dir {
		return false
	}
	d := &ds[i]
	return d.Stat == statOf(fi) && d.Stat.Mtime < t.dirs.Written && d.Stat.Ctime < t.dirs.Written &&
		d.Names == namesDigest(names)
}

// sameNames reports whether the listing fis holds exactly names (both
// sorted).
func sameNames(fis []fs.FileInfo, names []string) bool {
	if len(fis) != len(names) {
		return false
	}
	for i, fi := range fis {
		if fi.Name() != names[i] {
			return false
		}
	}
	return true
}

// writeDirs writes recs as the dirs file, without a sync (a power loss
// changes the boot id, under which no record is trusted); the caller
// holds the tree's lock. The new file's mtime, taken after every listing
// recorded, is the records' racy threshold, as an index's is for its
// entries.
func (t *Tree) writeDirs(recs []dirRecord) error {
	if len(t.boot) > 0xff {
		return nil
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Path < recs[j].Path })
	var c *dirCache
	err := t.writeMeta(dirsFile, false, func(written time.Time) ([]byte, error) {
		c = &dirCache{BootID: t.boot, Written: written.UnixNano(), Dirs: recs}
		return c.encode(), nil
	})
	if err != nil {
		return err
	}
	t.dirs = c
	return nil
}
