package worktree

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// Kind is how a path of the work tree differs from the base.
type Kind uint8

// The kinds of change.
const (
	Added       Kind = iota + 1 // untracked and not ignored
	Modified                    // other content or executable bit
	Deleted                     // tracked, gone (or replaced by a directory)
	TypeChanged                 // a file became a link or the reverse, or a special file
	Conflicted                  // marked unresolved in the index
)

// String returns "added", "modified", "deleted", "typechange" or
// "conflicted".
func (k Kind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	case TypeChanged:
		return "typechange"
	case Conflicted:
		return "conflicted"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Change is one path of a status or work diff. Old is the base's entry
// (zero Mode for an added path); New is what the work tree holds when it
// is known (a status hashes only what it must: New is zero for an added
// path, and for a deleted one).
type Change struct {
	Path string
	Kind Kind
	Old  objects.Entry
	New  objects.Entry
}

// Skipped is a path left out of a status or snapshot, with the reason: a
// special file, or a name the store cannot hold.
type Skipped struct {
	Path   string
	Reason string
}

// Status is the difference between the work tree and its base.
type Status struct {
	Base    objects.ID
	Changes []Change // sorted by path
	Skipped []Skipped
	// Refreshed holds the entries seen clean whose stat data the index
	// does not have (re-hashed because their stat changed, they were racy,
	// or the boot changed): Refresh writes them, so the next status need
	// not hash them again.
	Refreshed []IndexEntry
	// Conflicts lists the paths an update left unresolved, with their
	// three sides; each is also a Conflicted change.
	Conflicts []ConflictRecord
	// Interrupted lists the paths an update stopped by a crash wrote
	// conflict markers into before it could record them (pending.go);
	// each is also a Conflicted change. Running the update again finishes
	// it.
	Interrupted []string
	// Switching is the revision a switch stopped by a crash was going to
	// (pending.go), or the zero id. A switch to any revision finishes it
	// first.
	Switching objects.ID
	Stats     Stats
	// dirs are the directory records the walk made or carried; dirsDue
	// says Refresh is to write them.
	dirs    []dirRecord
	dirsDue bool
}

// visitFn sees one file or link of the walk (e nil: untracked).
type visitFn func(p string, fi fs.FileInfo, e *IndexEntry) error

// walk visits every file and link of the work tree that is tracked, or
// untracked and not ignored, in path order, and returns which index
// entries it saw. It never enters .git, the metadata directory or the
// store's directory, nor an ignored directory holding no tracked path,
// nor another work tree inside this one (listed in skipped).
func (t *Tree) walk(fn visitFn, skipped *[]Skipped) ([]bool, error) {
	r, err := t.baseRules()
	if err != nil {
		return nil, err
	}
	t.loadDirs()
	t.recs, t.recsFresh = t.recs[:0], false
	t.walkStart = time.Now().UnixNano()
	seen := make([]bool, len(t.idx.Entries))
	pf := newPrefetcher(t.fs, t.dir, t.trackedSubdirs, t.dirJob)
	defer pf.stop()
	return seen, t.walkDir(pf, ".", nil, r, false, fn, seen, skipped)
}

// trackedSubdirs returns the subdirectories of dir, among its listing
// fis, below which the index has a path: the walk enters each of them.
// It only reads the index and the directory records, so the prefetcher's
// workers may call it.
func (t *Tree) trackedSubdirs(dir string, fis []fs.FileInfo) []dirJob {
	var subs []dirJob
	for _, fi := range fis {
		if !fi.IsDir() {
			continue
		}
		p := childPath(dir, fi.Name())
		if t.idx.hasUnder(p) {
			subs = append(subs, t.dirJob(p, fi))
		}
	}
	return subs
}

// record notes for the dirs file what the listing fis of j's directory
// (lstat self) tells: the directory's record carried over when the
// listing was by names, a new one when a read listing held exactly the
// tracked names and the directory last changed at least dirSettle before
// the walk began; lo and hi are the directory's span. The root is never
// recorded: it holds the metadata directory.
func (t *Tree) record(j dirJob, self fs.FileInfo, fis []fs.FileInfo, lo, hi int) {
	if self == nil || !t.onDisk || t.opts.NoDirCache || len(j.dir) > 0xffff {
		return
	}
	st, names := statOf(self), j.names
	if !j.byNames {
		if settled := t.walkStart - int64(dirSettle); st.Mtime >= settled || st.Ctime >= settled {
			return
		}
		names = t.idx.children(lo, hi, j.dir)
		if !sameNames(fis, names) && t.opts.weaken&testknobs.DirsRecordUntracked == 0 {
			return
		}
		t.recsFresh = true
	}
	t.recs = append(t.recs, dirRecord{Path: j.dir, Stat: st, Names: namesDigest(names)})
}

// dirJob says how to list the directory p, whose lstat is fi: by its
// tracked names alone when a directory record vouches for them, else by
// reading it. It only reads, so the prefetcher's workers may call it.
func (t *Tree) dirJob(p string, fi fs.FileInfo) dirJob {
	j := dirJob{dir: p}
	if t.dirs == nil {
		return j
	}
	lo, hi := t.idx.span(p)
	if names := t.idx.children(lo, hi, p); t.trustedDir(p, fi, names) {
		j.names, j.byNames = names, true
	}
	return j
}

// childPath is the tree path of name in the directory dir ("." the root).
func childPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// walkDir walks the directory dir, whose lstat is self (nil for the root).
// It is one piece because its passes share what the listing gave: the
// directory record is made from it before the ignore rules are read, the
// subdirectories to enter are handed to the prefetcher in order before
// any is walked, and the second pass visits each name with the index span
// found once; split, each part would take half a dozen of these as
// arguments.
func (t *Tree) walkDir(pf *prefetcher, dir string, self fs.FileInfo, r *rules, ignored bool, fn visitFn, seen []bool, skipped *[]Skipped) error {
	j, fis, err := pf.list(t.root, dir, func() dirJob {
		if self == nil {
			return dirJob{dir: dir}
		}
		return t.dirJob(dir, self)
	})
	if err != nil {
		return err
	}
	t.stats.Stated += int64(len(fis))
	if !j.byNames {
		t.stats.Listed++
	}
	if self != nil && holdsMetaDir(fis) {
		// Another work tree (an agent's, made inside this one): its files
		// are its own, as git leaves an embedded repository's. Paths this
		// tree tracks below it stay tracked (skipped, they would read as
		// deleted), but nothing untracked there is this tree's.
		*skipped = append(*skipped, Skipped{Path: dir, Reason: "a work tree of its own"})
		if !t.idx.hasUnder(dir) {
			return nil
		}
		ignored = true
	}
	// Each lookup searches only the entries below dir.
	lo, hi := t.idx.span(dir)
	t.record(j, self, fis, lo, hi)
	if !ignored {
		if r, err = t.childRules(r, dir, fis); err != nil {
			return err
		}
	}
	// The subdirectories the walk will enter are listed ahead, in order.
	enter := make(map[string]bool)
	for _, fi := range fis {
		if !fi.IsDir() {
			continue
		}
		p := childPath(dir, fi.Name())
		if reservedName(fi.Name()) != "" || under(p, t.storeRel) || t.isStore(fi) {
			continue
		}
		ign := ignored || r.match(p, true)
		if ign && !t.idx.hasUnder(p) {
			continue
		}
		enter[fi.Name()] = ign
		pf.ahead(p, fi)
	}
	for _, fi := range fis {
		if reservedName(fi.Name()) != "" || t.isStore(fi) {
			continue
		}
		// A tracked path is its entry's own string: most of a tree is
		// tracked, and building each path again would be most of what a
		// walk allocates.
		i, tracked := t.idx.findChild(lo, hi, dir, fi.Name())
		var p string
		if tracked {
			p = t.idx.Entries[i].Path
		} else {
			p = childPath(dir, fi.Name())
		}
		if under(p, t.storeRel) {
			continue
		}
		var e *IndexEntry
		if tracked {
			e, seen[i] = &t.idx.Entries[i], true
		}
		switch {
		case fi.IsDir():
			ign, ok := enter[fi.Name()]
			if !ok {
				continue
			}
			if err := t.walkDir(pf, p, fi, r, ign, fn, seen, skipped); err != nil {
				return err
			}
			if tracked {
				seen[i] = false // a tracked file replaced by a directory is deleted
			}
		case tracked:
			if err := fn(p, fi, e); err != nil {
				return err
			}
		case ignored || r.match(p, false):
		case modeOf(fi) == 0:
			if t.opts.RefuseSpecial {
				return fmt.Errorf("%w: %q (%v)", ErrSpecialFile, p, fi.Mode().Type())
			}
			*skipped = append(*skipped, Skipped{Path: p, Reason: fmt.Sprintf("special file (%v)", fi.Mode().Type())})
		case ValidatePath(p) != nil:
			*skipped = append(*skipped, Skipped{Path: p, Reason: skipReason(p)})
		default:
			if err := fn(p, fi, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// compare says how the tracked file p (lstat fi) differs from its entry:
// 0 when clean. It hashes only when the stat data cannot vouch for the
// content. fresh is e with current stat data when the file was hashed and
// found clean (nil otherwise).
func (t *Tree) compare(p string, fi fs.FileInfo, e *IndexEntry) (k Kind, now objects.Entry, fresh *IndexEntry, err error) {
	mode := modeOf(fi)
	now = objects.Entry{Name: fi.Name(), Mode: mode}
	switch {
	case mode == 0:
		return TypeChanged, now, nil, nil
	case (mode == objects.ModeSymlink) != (e.Mode == objects.ModeSymlink):
		now.ID, _, _, err = t.workEntry(p, mode)
		return TypeChanged, now, nil, err
	case mode == e.Mode && !e.Conflict && t.trusted(e) && statOf(fi) == e.Stat:
		now.ID = e.ID
		return 0, now, nil, nil
	}
	id, st, stable, err := t.workEntry(p, mode)
	if err != nil {
		return 0, now, nil, err
	}
	now.ID = id
	if id != e.ID || mode != e.Mode || !stable {
		return Modified, now, nil, nil
	}
	f := *e
	f.Stat, f.Smudged = st, false
	if e.Conflict {
		return Conflicted, now, nil, nil
	}
	return 0, now, &f, nil
}

// Status compares the work tree with its base. It stats every path, and
// reads only the files whose stat data changed, are racy (not older than
// the index) or are smudged, or all of them after a boot id change (a
// power loss may have torn files without changing their stat data).
func (t *Tree) Status() (*Status, error) {
	t.stats = Stats{}
	st := &Status{Base: t.idx.Base}
	seen, err := t.walk(func(p string, fi fs.FileInfo, e *IndexEntry) error {
		if e == nil {
			st.Changes = append(st.Changes, Change{Path: p, Kind: Added})
			return nil
		}
		k, now, fresh, err := t.compare(p, fi, e)
		if err != nil {
			return err
		}
		if fresh != nil {
			st.Refreshed = append(st.Refreshed, *fresh)
		}
		if k == 0 && e.Conflict {
			k = Conflicted
		}
		if k != 0 {
			st.Changes = append(st.Changes, Change{Path: p, Kind: k, Old: e.entry(), New: now})
		}
		return nil
	}, &st.Skipped)
	if err != nil {
		return nil, err
	}
	for i := range t.idx.Entries {
		if !seen[i] {
			e := &t.idx.Entries[i]
			st.Changes = append(st.Changes, Change{Path: e.Path, Kind: Deleted, Old: e.entry()})
		}
	}
	sort.Slice(st.Changes, func(i, j int) bool { return st.Changes[i].Path < st.Changes[j].Path })
	st.Changes = t.markConflicts(st.Changes)
	st.Conflicts = append([]ConflictRecord(nil), t.idx.Conflicts...)
	if st.Interrupted, err = t.interrupted(); err != nil {
		return nil, err
	}
	if st.Switching, err = t.switching(); err != nil {
		return nil, err
	}
	for _, p := range st.Interrupted {
		for i := range st.Changes {
			if st.Changes[i].Path == p {
				st.Changes[i].Kind = Conflicted
			}
		}
	}
	st.Stats = t.stats
	st.dirs, st.dirsDue = t.walkRecords()
	return st, nil
}

// walkRecords returns the directory records the last walk made or carried,
// and whether they are to be written: one is new (a directory read and
// found to hold only tracked names, or one whose record was racy), or one
// the file holds was dropped.
func (t *Tree) walkRecords() ([]dirRecord, bool) {
	recs := append([]dirRecord(nil), t.recs...)
	due := t.recsFresh || (t.dirs != nil && len(recs) != len(t.dirs.Dirs))
	return recs, due
}

// markConflicts makes every path with a conflict record a Conflicted
// change (whatever else it is), adding the ones the walk found unchanged.
func (t *Tree) markConflicts(chs []Change) []Change {
	if len(t.idx.Conflicts) == 0 {
		return chs
	}
	at := make(map[string]int, len(chs))
	for i, c := range chs {
		at[c.Path] = i
	}
	for _, r := range t.idx.Conflicts {
		if i, ok := at[r.Path]; ok {
			chs[i].Kind = Conflicted
			continue
		}
		c := Change{Path: r.Path, Kind: Conflicted}
		if i, ok := t.idx.find(r.Path); ok {
			c.Old, c.New = t.idx.Entries[i].entry(), t.idx.Entries[i].entry()
		}
		chs = append(chs, c)
	}
	sort.Slice(chs, func(i, j int) bool { return chs[i].Path < chs[j].Path })
	return chs
}

// entry returns e as a tree entry named by its last path component.
func (e *IndexEntry) entry() objects.Entry {
	name := e.Path
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			name = name[i+1:]
			break
		}
	}
	return objects.Entry{Name: name, Mode: e.Mode, ID: e.ID}
}

// Refresh rewrites the index with the stat data st found (st must come
// from this tree's Status, with no operation in between), so the files it
// re-hashed are trusted by stat again. Entries it could not vouch for stay
// untrusted. It writes nothing when nothing was re-hashed and no entry
// needs marking.
func (t *Tree) Refresh(st *Status) error {
	if !t.onDisk {
		return fmt.Errorf("%w: %q: refresh needs a checked-out tree", ErrNotWorkTree, t.dir)
	}
	ix := t.refreshed(st)
	if ix == nil && !st.dirsDue {
		return nil // the common case, an unchanged tree: nothing written
	}
	_, l, err := t.begin()
	if err != nil {
		return err
	}
	defer l.Unlock()
	if ix != nil {
		if err := t.writeIndex(ix); err != nil {
			return err
		}
	}
	if st.dirsDue {
		return t.writeDirs(st.dirs)
	}
	return nil
}

// refreshed returns the index Refresh is to write, nil when it need not
// write one.
func (t *Tree) refreshed(st *Status) *Index {
	changed := len(st.Refreshed) > 0 || t.idx.BootID != t.boot
	for i := 0; i < len(t.idx.Entries) && !changed; i++ {
		e := &t.idx.Entries[i]
		changed = t.carry(*e).Smudged != e.Smudged
	}
	if !changed {
		return nil // no copy of the index
	}
	fresh := make(map[string]IndexEntry, len(st.Refreshed))
	for _, e := range st.Refreshed {
		fresh[e.Path] = e
	}
	ix := &Index{Base: t.idx.Base, Ref: t.idx.Ref, Carried: t.idx.Carried, Conflicts: t.idx.Conflicts, Entries: make([]IndexEntry, len(t.idx.Entries))}
	for i, e := range t.idx.Entries {
		if f, ok := fresh[e.Path]; ok {
			ix.Entries[i] = f
			continue
		}
		ix.Entries[i] = t.carry(e)
		changed = changed || ix.Entries[i].Smudged != e.Smudged
	}
	if !changed {
		return nil
	}
	return ix
}

// skipReason says why an untracked path no changeset can hold is left
// out, in a user's words: a name that is not UTF-8 (git takes any bytes, a
// changeset's paths are text), or what ValidatePath found.
func skipReason(p string) string {
	if !utf8.ValidString(p) {
		return "its name is not valid UTF-8, which a changeset's paths must be"
	}
	return strings.TrimPrefix(ValidatePath(p).Error(), "objects: bad path: ")
}

// holdsMetaDir reports whether a directory listing holds the work-tree
// metadata directory.
func holdsMetaDir(fis []fs.FileInfo) bool {
	for _, fi := range fis {
		if fi.IsDir() && fi.Name() == MetaDir {
			return true
		}
	}
	return false
}
