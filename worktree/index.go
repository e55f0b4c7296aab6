package worktree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unsafe"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/objects"
)

// ErrIndexCorrupt is returned for an index file that is not a canonical
// encoding: a bad checksum, magic or version, a truncation, unsorted or
// invalid paths, an unknown flag. It is wrapped with the byte offset where
// decoding stopped. A corrupt index is never repaired silently: the work
// tree is checked out again (with force) or its index rebuilt.
var ErrIndexCorrupt = errors.New("worktree: corrupt index")

// Index format constants. They are part of the format.
const (
	indexMagic = "SWTI"
	// indexVersion is the version Encode writes for a tree that carries
	// no commits; version 1 (no ref, no conflict records) is still read.
	indexVersion = 2
	// carriedVersion is version 2 with the carried changeset after the
	// ref, written only for a tree that carries one (Index.Carried), so
	// other trees' indexes stay readable by version 2 readers.
	carriedVersion = 3
	// entryFixed is an entry's size without its path.
	entryFixed = 2 + 4 + 8 + 8 + 8 + 8 + 8 + 32 + 1
	// sideFixed is one side of a conflict record: mode and id.
	sideFixed = 4 + 32
	// conflictFixed is a conflict record's size without its path.
	conflictFixed = 2 + 3*sideFixed
	headerFixed   = 4 + 1 + 1 + 32 + 8 + 1 + 4
	sumLen        = 32
)

// Entry flags.
const (
	flagConflict = 1 << 0
	flagSmudged  = 1 << 1
	flagsKnown   = flagConflict | flagSmudged
)

// Stat is the stat data an index entry keeps of its file: what tells,
// without reading the file, that it is still the file the entry was made
// from. Times are nanoseconds since the Unix epoch.
type Stat struct {
	Size  int64
	Mtime int64
	Ctime int64
	Ino   uint64
	Dev   uint64
}

// IndexEntry is one tracked path: its mode and object id in the base, the
// stat data of the file when it was last seen to hold exactly that object,
// and flags.
type IndexEntry struct {
	Path string
	Mode objects.Mode // ModeFile, ModeExec or ModeSymlink
	ID   objects.ID
	Stat Stat
	// Conflict marks a path a merge into the work tree left unresolved.
	Conflict bool
	// Smudged means Stat is not to be trusted: the file is re-hashed
	// whatever its stat says, until a status or commit sees it clean.
	Smudged bool
}

// ConflictRecord is a path a merge into the work tree (Update) left
// unresolved, with the three sides it could not merge: base, ours (what
// the work tree held) and theirs (the revision merged in). A side with a
// zero Mode was absent; ours may be a directory (ModeDir, zero id) that
// stood where theirs had a file. Ours' id is the hash of the work tree's
// content, which the store need not hold.
type ConflictRecord struct {
	Path   string
	Base   objects.Entry // Name unused
	Ours   objects.Entry
	Theirs objects.Entry
}

// Index is a work tree's record of its base changeset and of every tracked
// path, sorted by path (bytewise, no duplicates).
type Index struct {
	Base objects.ID
	// Ref is the ref the tree follows: the one it was checked out from or
	// last updated onto, if it was named by a ref ("" otherwise). Update
	// without a revision goes to its current value.
	Ref string
	// Written is a time of the filesystem's clock taken when the index was
	// written, after every stat it records: an entry whose mtime is not
	// older is racy (the file may have changed within the same clock tick
	// without its mtime moving) and is re-hashed.
	Written time.Time
	// BootID is the filesystem's boot id when the index was written. Under
	// another boot id (a power loss happened) no stat data is trusted.
	BootID  string
	Entries []IndexEntry
	// Conflicts lists the unresolved paths, sorted by path. A conflicted
	// path that the base tracks also has its entry's Conflict flag set.
	Conflicts []ConflictRecord
	// Carried is the changeset an update moved the tree off when it was
	// not an ancestor of where the update went: the tree then holds its
	// commits' changes (merged, conflicts as the agent resolved them)
	// as local ones, and the next commit records it as its second parent
	// (the zero id when there is none).
	Carried objects.ID
}

// Encode returns the canonical encoding of ix. It fails for entries that
// are unsorted, repeated or invalid, and for a boot id over 255 bytes.
func (ix *Index) Encode() ([]byte, error) {
	if len(ix.BootID) > 255 || len(ix.Ref) > 255 {
		return nil, fmt.Errorf("worktree: boot id of %d bytes or ref of %d bytes exceeds 255", len(ix.BootID), len(ix.Ref))
	}
	n := headerFixed + len(ix.BootID) + 1 + len(ix.Ref) + 32 + 4 + sumLen
	for i, e := range ix.Entries {
		if err := checkIndexEntry(&e); err != nil {
			return nil, fmt.Errorf("worktree: index entry %d: %w", i, err)
		}
		if i > 0 && ix.Entries[i-1].Path >= e.Path {
			return nil, fmt.Errorf("worktree: index entry %d (%q) not after %q", i, e.Path, ix.Entries[i-1].Path)
		}
		n += entryFixed + len(e.Path)
	}
	for i, c := range ix.Conflicts {
		if err := checkConflict(&c); err != nil {
			return nil, fmt.Errorf("worktree: conflict record %d: %w", i, err)
		}
		if i > 0 && ix.Conflicts[i-1].Path >= c.Path {
			return nil, fmt.Errorf("worktree: conflict record %d (%q) not after %q", i, c.Path, ix.Conflicts[i-1].Path)
		}
		n += conflictFixed + len(c.Path)
	}
	b := make([]byte, 0, n)
	b = append(b, indexMagic...)
	ver := byte(indexVersion)
	if !ix.Carried.IsZero() {
		ver = carriedVersion
	}
	b = append(b, ver, 0)
	b = append(b, ix.Base[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(ix.Written.UnixNano()))
	b = appendStr8(b, ix.BootID)
	b = appendStr8(b, ix.Ref)
	if ver == carriedVersion {
		b = append(b, ix.Carried[:]...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ix.Entries)))
	for _, e := range ix.Entries {
		b = appendStr16(b, e.Path)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Mode))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Stat.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Stat.Mtime))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Stat.Ctime))
		b = binary.BigEndian.AppendUint64(b, e.Stat.Ino)
		b = binary.BigEndian.AppendUint64(b, e.Stat.Dev)
		b = append(b, e.ID[:]...)
		var f byte
		if e.Conflict {
			f |= flagConflict
		}
		if e.Smudged {
			f |= flagSmudged
		}
		b = append(b, f)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ix.Conflicts)))
	for _, c := range ix.Conflicts {
		b = appendStr16(b, c.Path)
		for _, e := range []objects.Entry{c.Base, c.Ours, c.Theirs} {
			b = binary.BigEndian.AppendUint32(b, uint32(e.Mode))
			b = append(b, e.ID[:]...)
		}
	}
	sum := blake3.Sum256(b)
	return append(b, sum[:]...), nil
}

// appendStr8 appends s after its length in one byte, and appendStr16 after
// its length in two, big endian: the strings of the index and of the dirs
// file, boot ids and refs, and paths. Neither checks the length; a caller
// bounds it.
func appendStr8(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

func appendStr16(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...)
}

func checkIndexEntry(e *IndexEntry) error {
	if _, err := objects.CleanPath(e.Path); err != nil {
		return err
	}
	if e.Mode != objects.ModeFile && e.Mode != objects.ModeExec && e.Mode != objects.ModeSymlink {
		return fmt.Errorf("path %q: mode %o is not a file mode", e.Path, e.Mode)
	}
	if e.ID.IsZero() {
		return fmt.Errorf("path %q: zero id", e.Path)
	}
	return nil
}

func checkConflict(c *ConflictRecord) error {
	if _, err := objects.CleanPath(c.Path); err != nil {
		return err
	}
	for _, e := range []objects.Entry{c.Base, c.Ours, c.Theirs} {
		switch {
		case e.Mode == 0 || e.Mode == objects.ModeDir:
			if !e.ID.IsZero() {
				return fmt.Errorf("path %q: an absent side or a directory with an id", c.Path)
			}
		case !e.Mode.Valid():
			return fmt.Errorf("path %q: mode %o", c.Path, e.Mode)
		case e.ID.IsZero():
			return fmt.Errorf("path %q: zero id", c.Path)
		}
	}
	return nil
}

// DecodeIndex decodes a canonical index encoding; anything else is an error
// wrapping ErrIndexCorrupt with the offset. It never panics and allocates
// at most in proportion to len(b).
func DecodeIndex(b []byte) (*Index, error) {
	return decodeIndex(b, false)
}

// decodeIndex is DecodeIndex; owned says the caller hands b over and never
// writes it again, so the paths may be substrings of b itself rather than
// of a copy.
func decodeIndex(b []byte, owned bool) (*Index, error) {
	if len(b) < headerFixed+sumLen {
		return nil, indexCorrupt(len(b), "%d bytes, shorter than an empty index", len(b))
	}
	body := b[:len(b)-sumLen]
	if sum := blake3.Sum256(body); !bytes.Equal(sum[:], b[len(body):]) {
		return nil, indexCorrupt(len(body), "checksum mismatch")
	}
	if string(body[:4]) != indexMagic {
		return nil, indexCorrupt(0, "magic %q, want %q", body[:4], indexMagic)
	}
	ver := body[4]
	if ver < 1 || ver > carriedVersion {
		return nil, indexCorrupt(4, "version %d, want 1 to %d", ver, carriedVersion)
	}
	if body[5] != 0 {
		return nil, indexCorrupt(5, "header flags %#x, want 0", body[5])
	}
	ix := &Index{}
	copy(ix.Base[:], body[6:38])
	ix.Written = time.Unix(0, int64(binary.BigEndian.Uint64(body[38:46])))
	off := 46
	blen := int(body[off])
	off++
	if len(body)-off < blen+4 {
		return nil, indexCorrupt(off, "boot id of %d bytes does not fit", blen)
	}
	ix.BootID = string(body[off : off+blen])
	off += blen
	if ver >= 2 {
		rlen := int(body[off])
		off++
		if len(body)-off < rlen+4 {
			return nil, indexCorrupt(off, "ref of %d bytes does not fit", rlen)
		}
		ix.Ref = string(body[off : off+rlen])
		off += rlen
	}
	if ver >= carriedVersion {
		if len(body)-off < 32+4 {
			return nil, indexCorrupt(off, "carried changeset does not fit")
		}
		copy(ix.Carried[:], body[off:off+32])
		off += 32
		if ix.Carried.IsZero() {
			return nil, indexCorrupt(off-32, "version %d with no carried changeset", ver)
		}
	}
	off, err := decodeEntries(body, off, ix, owned)
	if err != nil {
		return nil, err
	}
	if ver >= 2 {
		if off, err = decodeConflicts(body, off, ix); err != nil {
			return nil, err
		}
	}
	if off != len(body) {
		return nil, indexCorrupt(off, "%d trailing bytes", len(body)-off)
	}
	return ix, nil
}

// indexCorrupt is the error for a flaw at offset off of an index encoding.
func indexCorrupt(off int, format string, args ...any) error {
	return fmt.Errorf("%w: at offset %d: %s", ErrIndexCorrupt, off, fmt.Sprintf(format, args...))
}

// decodeEntries decodes the entry count and the entries from body[off:]
// into ix, returning the offset after them.
func decodeEntries(body []byte, off int, ix *Index, owned bool) (int, error) {
	count := binary.BigEndian.Uint32(body[off:])
	off += 4
	if uint64(count) > uint64(len(body)-off)/entryFixed {
		return 0, indexCorrupt(off-4, "%d entries do not fit in %d bytes", count, len(body)-off)
	}
	ix.Entries = make([]IndexEntry, 0, count)
	// The paths are substrings of one string holding the body: an
	// allocation a path is most of what decoding costs, and a status
	// decodes them all. A body the caller handed over is that string
	// itself, without a copy (nothing writes it again, so the strings
	// never change); the index file is the biggest buffer a status reads.
	var text string
	if owned && len(body) > 0 {
		text = unsafe.String(&body[0], len(body))
	} else {
		text = string(body)
	}
	for i := uint32(0); i < count; i++ {
		start := off
		if len(body)-off < entryFixed {
			return 0, indexCorrupt(off, "entry %d truncated", i)
		}
		plen := int(binary.BigEndian.Uint16(body[off:]))
		off += 2
		if len(body)-off < plen+entryFixed-2 {
			return 0, indexCorrupt(start, "entry %d: path of %d bytes does not fit", i, plen)
		}
		e := IndexEntry{Path: text[off : off+plen]}
		off += plen
		e.Mode = objects.Mode(binary.BigEndian.Uint32(body[off:]))
		e.Stat.Size = int64(binary.BigEndian.Uint64(body[off+4:]))
		e.Stat.Mtime = int64(binary.BigEndian.Uint64(body[off+12:]))
		e.Stat.Ctime = int64(binary.BigEndian.Uint64(body[off+20:]))
		e.Stat.Ino = binary.BigEndian.Uint64(body[off+28:])
		e.Stat.Dev = binary.BigEndian.Uint64(body[off+36:])
		copy(e.ID[:], body[off+44:off+76])
		f := body[off+76]
		off += 77
		if f&^flagsKnown != 0 {
			return 0, indexCorrupt(off-1, "entry %d: unknown flags %#x", i, f)
		}
		e.Conflict, e.Smudged = f&flagConflict != 0, f&flagSmudged != 0
		if err := checkIndexEntry(&e); err != nil {
			return 0, indexCorrupt(start, "entry %d: %v", i, err)
		}
		if i > 0 && ix.Entries[i-1].Path >= e.Path {
			return 0, indexCorrupt(start, "entry %d: path %q not after %q", i, e.Path, ix.Entries[i-1].Path)
		}
		ix.Entries = append(ix.Entries, e)
	}
	return off, nil
}

// decodeConflicts decodes a version 2 index's conflict records from
// body[off:] into ix, returning the offset after them.
func decodeConflicts(body []byte, off int, ix *Index) (int, error) {
	if len(body)-off < 4 {
		return 0, indexCorrupt(off, "conflict count truncated")
	}
	count := binary.BigEndian.Uint32(body[off:])
	off += 4
	if uint64(count) > uint64(len(body)-off)/conflictFixed {
		return 0, indexCorrupt(off-4, "%d conflict records do not fit in %d bytes", count, len(body)-off)
	}
	ix.Conflicts = make([]ConflictRecord, 0, count)
	for i := uint32(0); i < count; i++ {
		start := off
		if len(body)-off < conflictFixed {
			return 0, indexCorrupt(off, "conflict record %d truncated", i)
		}
		plen := int(binary.BigEndian.Uint16(body[off:]))
		off += 2
		if len(body)-off < plen+3*sideFixed {
			return 0, indexCorrupt(start, "conflict record %d: path of %d bytes does not fit", i, plen)
		}
		c := ConflictRecord{Path: string(body[off : off+plen])}
		off += plen
		for _, e := range []*objects.Entry{&c.Base, &c.Ours, &c.Theirs} {
			e.Mode = objects.Mode(binary.BigEndian.Uint32(body[off:]))
			copy(e.ID[:], body[off+4:off+sideFixed])
			off += sideFixed
		}
		if err := checkConflict(&c); err != nil {
			return 0, indexCorrupt(start, "conflict record %d: %v", i, err)
		}
		if i > 0 && ix.Conflicts[i-1].Path >= c.Path {
			return 0, indexCorrupt(start, "conflict record %d: path %q not after %q", i, c.Path, ix.Conflicts[i-1].Path)
		}
		ix.Conflicts = append(ix.Conflicts, c)
	}
	return off, nil
}

// conflict returns the conflict record of path, if there is one.
func (ix *Index) conflict(path string) (*ConflictRecord, bool) {
	i := sort.Search(len(ix.Conflicts), func(i int) bool { return ix.Conflicts[i].Path >= path })
	if i < len(ix.Conflicts) && ix.Conflicts[i].Path == path {
		return &ix.Conflicts[i], true
	}
	return nil, false
}

// find returns the position of path in ix.Entries and whether it is there.
func (ix *Index) find(path string) (int, bool) {
	i := sort.Search(len(ix.Entries), func(i int) bool { return ix.Entries[i].Path >= path })
	return i, i < len(ix.Entries) && ix.Entries[i].Path == path
}

// span returns the range of entries at or below the directory dir ("."
// for the root): they are contiguous, since the entries are sorted by path.
func (ix *Index) span(dir string) (lo, hi int) {
	if dir == "." {
		return 0, len(ix.Entries)
	}
	prefix := dir + "/"
	lo, _ = ix.find(prefix)
	hi = lo + sort.Search(len(ix.Entries)-lo, func(i int) bool {
		return !strings.HasPrefix(ix.Entries[lo+i].Path, prefix)
	})
	return lo, hi
}

// findChild is find for the path of name in the directory dir ("." the
// root) within entries[lo:hi], dir's span, without building that path:
// every entry of the span lies below dir, so their order is the order of
// what follows dir's prefix.
func (ix *Index) findChild(lo, hi int, dir, name string) (int, bool) {
	skip := 0
	if dir != "." {
		skip = len(dir) + 1
	}
	i := lo + sort.Search(hi-lo, func(i int) bool { return ix.Entries[lo+i].Path[skip:] >= name })
	return i, i < hi && ix.Entries[i].Path[skip:] == name
}

// hasUnder reports whether any entry lies below the directory dir.
func (ix *Index) hasUnder(dir string) bool {
	i, _ := ix.find(dir + "/")
	return i < len(ix.Entries) && len(ix.Entries[i].Path) > len(dir) &&
		ix.Entries[i].Path[:len(dir)+1] == dir+"/"
}
