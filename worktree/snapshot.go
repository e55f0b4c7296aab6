package worktree

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// ErrBaseMismatch is returned by Record when the changeset is not the
// tree's base with the snapshot's changes applied (it was committed on
// another parent, or the snapshot is stale): the index is left as it was.
var ErrBaseMismatch = errors.New("worktree: changeset is not the base plus the snapshot")

// Snapshot is the change list that turns the base's tree into the work
// tree, for a commit whose first parent is Parent.
type Snapshot struct {
	Parent objects.ID // the base; zero for a tree adopted without one
	// Changes lists deletions first, then additions and modifications,
	// each sorted by path (a file replaced by a directory is deleted before
	// the directory's files are added).
	Changes []core.Change
	Skipped []Skipped
	Stats   Stats
	entries []IndexEntry // the stat data of each file read
	// fresh are the tracked files read and found unchanged, with their
	// stat data now: Record keeps it, so the next status or commit
	// trusts them, as git's commit -a refreshes its index.
	fresh   []IndexEntry
	dels    []string
	dirs    []dirRecord // as Status's
	dirsDue bool
}

// Snapshot reads the work tree for a commit. A tree with unresolved
// conflicts is refused with *UnresolvedError: nothing of it may be
// committed until each is resolved (Resolve). Every path is stat'ed, and
// only the files whose stat data cannot vouch for them (changed, racy,
// smudged, or all after a boot id change) are read. Symbolic links are
// recorded as links, never followed; special files are skipped (listed)
// or refused (Options.RefuseSpecial). The changes hold the content of the
// links that changed; a changed file's content is read when the commit
// asks for it (core.Change.Open), so that a commit of a big tree holds
// only the chunk it is writing (core.Options.CommitChunkBytes). The
// snapshot is good until the Tree is closed.
func (t *Tree) Snapshot() (*Snapshot, error) {
	if t.hasConflicts() {
		return nil, t.unresolved()
	}
	if ps, err := t.interrupted(); err != nil || len(ps) > 0 {
		if err != nil {
			return nil, err
		}
		return nil, &UnresolvedError{Paths: ps, Interrupted: true}
	}
	if onto, err := t.switching(); err != nil || !onto.IsZero() {
		if err != nil {
			return nil, err
		}
		return nil, &SwitchError{Onto: onto}
	}
	t.stats = Stats{}
	s := &Snapshot{Parent: t.idx.Base}
	var puts []core.Change
	seen, err := t.walk(func(p string, fi fs.FileInfo, e *IndexEntry) error {
		mode := modeOf(fi)
		if e != nil {
			if mode == e.Mode && !e.Conflict && t.trusted(e) && statOf(fi) == e.Stat {
				return nil // the stat data vouches for it: not read
			}
			if mode == 0 {
				s.Skipped = append(s.Skipped, Skipped{Path: p, Reason: fmt.Sprintf("special file (%v) where a tracked file was", fi.Mode().Type())})
				s.dels = append(s.dels, p)
				return nil
			}
		}
		if err := ValidatePath(p, t.storeRel); err != nil {
			return err
		}
		if mode != objects.ModeSymlink {
			return t.putFile(s, &puts, p, mode, fi, e)
		}
		data, st, stable, err := t.readWork(p, mode)
		if err != nil {
			return err
		}
		id := objects.BlobID(data)
		if e != nil && e.ID == id && e.Mode == mode {
			// Racy or smudged, and unchanged after all.
			if stable {
				s.fresh = append(s.fresh, IndexEntry{Path: p, Mode: mode, ID: id, Stat: st})
			}
			return nil
		}
		puts = append(puts, core.Change{Path: p, Data: data, Mode: mode})
		s.entries = append(s.entries, IndexEntry{Path: p, Mode: mode, ID: id, Stat: st, Smudged: !stable})
		return nil
	}, &s.Skipped)
	if err != nil {
		return nil, err
	}
	for i := range t.idx.Entries {
		if !seen[i] {
			s.dels = append(s.dels, t.idx.Entries[i].Path)
		}
	}
	sort.Strings(s.dels)
	for _, p := range s.dels {
		s.Changes = append(s.Changes, core.Change{Path: p, Delete: true})
	}
	s.Changes = append(s.Changes, puts...)
	s.Stats = t.stats
	s.dirs, s.dirsDue = t.walkRecords()
	return s, nil
}

// putFile adds the file p (mode, lstat fi, index entry e or nil) to the
// snapshot's changes if it changed, its content to be read by the commit.
// A file the index knows is hashed first, streaming, to tell a change
// from racy or smudged stat data; a file it does not know is a change.
func (t *Tree) putFile(s *Snapshot, puts *[]core.Change, p string, mode objects.Mode, fi fs.FileInfo, e *IndexEntry) error {
	ent := IndexEntry{Path: p, Mode: mode}
	if e != nil {
		id, st, stable, err := t.hashFile(p)
		if err != nil {
			return err
		}
		if e.ID == id && e.Mode == mode {
			// Racy or smudged, and unchanged after all.
			if stable {
				s.fresh = append(s.fresh, IndexEntry{Path: p, Mode: mode, ID: id, Stat: st})
			}
			return nil
		}
		ent.ID, ent.Stat, ent.Smudged = id, st, !stable
	} else {
		t.stats.Hashed++
		t.stats.BytesRead += fi.Size()
	}
	i := len(s.entries)
	s.entries = append(s.entries, ent)
	*puts = append(*puts, core.Change{Path: p, Mode: mode, Open: func() ([]byte, error) {
		// The entry records what the commit got: the file may have
		// changed since it was hashed, and its stat data then vouches
		// for the bytes read here.
		data, st, stable, err := t.readWork(p, mode)
		if err != nil {
			return nil, err
		}
		e := &s.entries[i]
		e.ID, e.Stat, e.Smudged = objects.BlobID(data), st, !stable
		return data, nil
	}})
	return nil
}

// Load reads the content of every change that the commit would otherwise
// read itself (Change.Open) into its Data, for a caller that needs every
// byte at once (a merge of a second parent).
func (s *Snapshot) Load() error {
	for i := range s.Changes {
		c := &s.Changes[i]
		if c.Data == nil && c.Open != nil {
			data, err := c.Open()
			if err != nil {
				return err
			}
			c.Data, c.Open = data, nil
		}
	}
	return nil
}

// Record makes changeset id, committed from s, the tree's new base: the
// index gets the stat data s read, so the next status and snapshot trust
// them. It first checks that id's tree is the base's tree with exactly s's
// changes (ErrBaseMismatch otherwise), at a cost that follows the size of
// the change. A tree adopted from a plain directory becomes a work tree.
func (t *Tree) Record(src Source, id objects.ID, s *Snapshot) error {
	if s.Parent != t.idx.Base {
		return fmt.Errorf("%w: the snapshot was taken on %s, the tree is on %s", ErrBaseMismatch, s.Parent, t.idx.Base)
	}
	chs, err := t.changesBetween(src, t.idx.Base, id, false)
	if err != nil {
		return err
	}
	want := make(map[string]objects.Entry, len(s.entries)+len(s.dels))
	for _, p := range s.dels {
		want[p] = objects.Entry{}
	}
	for _, e := range s.entries {
		want[e.Path] = objects.Entry{Mode: e.Mode, ID: e.ID}
	}
	for _, c := range chs {
		w, ok := want[c.path]
		if !ok || w.Mode != c.new.Mode || w.ID != c.new.ID {
			return fmt.Errorf("%w: %q differs", ErrBaseMismatch, c.path)
		}
	}
	if len(chs) != len(want) {
		return fmt.Errorf("%w: %d paths changed, the snapshot has %d", ErrBaseMismatch, len(chs), len(want))
	}
	removes := make([]change, len(s.dels))
	for i, p := range s.dels {
		removes[i] = change{path: p}
	}
	made, l, err := t.begin()
	if err != nil {
		return err
	}
	defer l.Unlock()
	if err := t.refuseSwitching(); err != nil {
		return err
	}
	written := append(s.entries[:len(s.entries):len(s.entries)], s.fresh...)
	if err := t.writeIndex(&Index{Base: id, Ref: t.idx.Ref, Entries: t.merged(removes, written)}); err != nil {
		return err
	}
	if s.dirsDue {
		// The records stay true of the new index: a directory recorded
		// held only tracked names, which the commit keeps, and a record
		// whose names did change fails its digest. They are a cache, so a
		// failure to write them fails nothing.
		_ = t.writeDirs(s.dirs)
	}
	if made {
		return t.writeStorePath()
	}
	return nil
}

// Adopt returns a Tree for dir, a plain directory (not a work tree), whose
// base is changeset base (zero: none): its index lists base's files with no
// stat data, so a Snapshot reads every file and a Record then makes dir a
// work tree. Nothing is written until Record.
func Adopt(src Source, dir string, base objects.ID, o Options) (*Tree, error) {
	t, err := newTree(dir, o)
	if err != nil {
		return nil, err
	}
	chs, err := t.changesBetween(src, objects.ZeroID, base, false)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.idx = &Index{Base: base, Entries: make([]IndexEntry, len(chs))}
	for i, c := range chs {
		t.idx.Entries[i] = IndexEntry{Path: c.path, Mode: c.new.Mode, ID: c.new.ID, Smudged: true}
	}
	sortEntries(t.idx.Entries)
	return t, nil
}

// Diff is a status with the work tree's side of every change known: the
// mode and blob id of each added, modified or type-changed path (deleted
// paths have a zero New). The base's content of a change is src.Blob(Old.ID);
// the work tree's is ReadWork(Path).
func (t *Tree) Diff() ([]Change, error) {
	st, err := t.Status()
	if err != nil {
		return nil, err
	}
	for i := range st.Changes {
		c := &st.Changes[i]
		if c.Kind != Added || !c.New.ID.IsZero() {
			continue
		}
		fi, err := t.root.Lstat(c.Path)
		if err != nil {
			return nil, err
		}
		c.New.Mode = modeOf(fi)
		c.New.Name = fi.Name()
		if c.New.ID, _, _, err = t.workEntry(c.Path, c.New.Mode); err != nil {
			return nil, err
		}
	}
	return st.Changes, nil
}

// ReadWork returns what the work tree holds at p as a blob: a file's
// content or a link's target, with its mode. It never follows a link.
func (t *Tree) ReadWork(p string) ([]byte, objects.Mode, error) {
	if _, err := objects.CleanPath(p); err != nil {
		return nil, 0, err
	}
	fi, err := t.root.Lstat(p)
	if err != nil {
		return nil, 0, err
	}
	mode := modeOf(fi)
	if mode == 0 {
		return nil, 0, fmt.Errorf("%w: %q (%v)", ErrSpecialFile, p, fi.Mode().Type())
	}
	data, _, _, err := t.readWork(p, mode)
	return data, mode, err
}
