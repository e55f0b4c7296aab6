package worktree

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// ErrUnresolved is wrapped by *UnresolvedError: the tree has conflicts an
// update left, and the operation (a snapshot for a commit, a switch, an
// update) needs them resolved first; or a path to be resolved still holds
// conflict markers.
var ErrUnresolved = errors.New("worktree: unresolved conflicts")

// UnresolvedError lists the unresolved paths. Markers is set when Resolve
// refused them because their files still hold conflict markers;
// Interrupted when an update that was writing markers into them stopped
// before it recorded them (run the update again to finish it).
type UnresolvedError struct {
	Paths       []string
	Markers     bool
	Interrupted bool
}

func (e *UnresolvedError) Error() string {
	what := "unresolved"
	switch {
	case e.Markers:
		what = "still holding conflict markers"
	case e.Interrupted:
		what = "left with conflict markers by an interrupted update"
	}
	return fmt.Sprintf("%v: %s: %s", ErrUnresolved, what, shortList(e.Paths))
}

// Unwrap returns ErrUnresolved.
func (e *UnresolvedError) Unwrap() error { return ErrUnresolved }

// ErrNotConflicted is returned by Resolve for a path without a conflict.
var ErrNotConflicted = errors.New("worktree: path is not conflicted")

// UpdateSource is a Source that also finds merge bases: a *core.Snapshot.
type UpdateSource interface {
	Source
	MergeBase(a, b objects.ID) (objects.ID, error)
}

// UpdateResult reports an update.
type UpdateResult struct {
	Changeset objects.ID // the tree's new base
	MergeBase objects.ID // the base of the three-way merge
	Written   int        // files and links written
	Removed   int        // files and links removed
	Merged    []string   // paths merged line by line without conflict
	Conflicts []ConflictRecord
}

// hasConflicts reports whether the index records an unresolved path.
func (t *Tree) hasConflicts() bool {
	if len(t.idx.Conflicts) > 0 {
		return true
	}
	for i := range t.idx.Entries {
		if t.idx.Entries[i].Conflict {
			return true
		}
	}
	return false
}

// unresolved is the error for a tree that has conflicts.
func (t *Tree) unresolved() error {
	seen := map[string]bool{}
	var ps []string
	for _, c := range t.idx.Conflicts {
		seen[c.Path] = true
		ps = append(ps, c.Path)
	}
	for _, e := range t.idx.Entries {
		if e.Conflict && !seen[e.Path] {
			ps = append(ps, e.Path)
		}
	}
	sort.Strings(ps)
	return &UnresolvedError{Paths: ps}
}

// slot is one path an update looks at: its entry in the merge base, the
// tree's base and the revision merged in (zero Mode: absent).
type slot struct {
	path    string
	m, b, r objects.Entry
}

// ours is what the work tree holds at a path.
type ours struct {
	e        objects.Entry // ModeDir for a directory; Mode 0 for absent or special
	special  bool          // a socket, fifo or device
	data     []byte        // read on demand
	haveData bool
}

// step is what an update does at one path.
type step struct {
	s        slot
	o        ours
	write    bool // write data with mode
	remove   bool
	mode     objects.Mode
	data     []byte
	conflict bool
	merged   bool // merged by lines without conflict
	entry    *IndexEntry
}

// Update brings the work tree to changeset onto, keeping its own changes:
// every path is merged three ways, base the merge base of the tree's base
// and onto (the tree's base when they share no ancestor), ours what the
// work tree holds, theirs onto's entry. Changes the tree's base has and
// onto lacks (committed, not yet landed) are carried like uncommitted ones.
// A path only one side changed takes that side. Text files both sides
// changed merge by lines (textmerge); what cannot merge is written with
// diff3-style conflict markers and recorded as a conflict with the three
// sides. A binary, mode or type conflict, a file one side deleted and the
// other changed, and a directory in the way keep ours on disk and are
// recorded. Labels name the sides in markers: "work tree", the merge base's
// short id, and label (onto's short id when empty).
//
// The tree's base becomes onto and, when Options.Ref is set, it follows
// that ref. A tree with unresolved conflicts is refused (*UnresolvedError).
// Only paths whose content changes are written, each to a temporary name
// renamed into place; removals come first and the index last, as in a
// switch, so a crash leaves each file old or new and the old or new index.
func (t *Tree) Update(src UpdateSource, onto objects.ID, label string) (*UpdateResult, error) {
	made, l, err := t.begin()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if err := t.refuseSwitching(); err != nil {
		return nil, err
	}
	if err := t.undoInterrupted(); err != nil {
		return nil, err
	}
	if t.hasConflicts() {
		return nil, t.unresolved()
	}
	res := &UpdateResult{Changeset: onto, MergeBase: t.idx.Base}
	if !t.idx.Base.IsZero() && !onto.IsZero() {
		mb, err := src.MergeBase(t.idx.Base, onto)
		if err != nil {
			return nil, err
		}
		if !mb.IsZero() {
			res.MergeBase = mb
		}
		if mb == onto {
			return res, t.upToDate(res, made)
		}
	}
	slots, err := t.updateSlots(src, res.MergeBase, onto)
	if err != nil {
		return nil, err
	}
	if label == "" && !onto.IsZero() {
		label = onto.String()[:12]
	}
	opts := textmerge.MergeOptions{OursLabel: "work tree", BaseLabel: "base", TheirsLabel: label}
	if !res.MergeBase.IsZero() {
		opts.BaseLabel = "base " + res.MergeBase.String()[:12]
	}
	steps, err := t.planUpdate(src, slots, opts)
	if err != nil {
		return nil, err
	}
	if err := t.recordPending(onto, steps); err != nil {
		return nil, err
	}
	if err := t.executeUpdate(steps, res); err != nil {
		return nil, err
	}
	carried, err := t.carriedAfter(src, res.MergeBase, onto)
	if err != nil {
		return nil, err
	}
	ix := &Index{Base: onto, Ref: t.idx.Ref, Entries: t.updatedEntries(steps), Conflicts: res.Conflicts, Carried: carried}
	if t.opts.Ref != "" {
		ix.Ref = t.opts.Ref
	}
	if err := t.writeIndex(ix); err != nil {
		return nil, err
	}
	if err := t.clearPending(); err != nil {
		return nil, err
	}
	if made {
		return res, t.writeStorePath()
	}
	return res, nil
}

// carriedAfter returns what the tree carries after an update onto onto
// with merge base mb: its base, when that is not an ancestor of onto (the
// update brings its commits along as local changes), or what it carried
// already; nothing once onto holds it.
func (t *Tree) carriedAfter(src UpdateSource, mb, onto objects.ID) (objects.ID, error) {
	carried := t.idx.Carried
	if carried.IsZero() && !t.idx.Base.IsZero() && mb != t.idx.Base {
		carried = t.idx.Base
	}
	if carried.IsZero() || onto.IsZero() {
		return carried, nil
	}
	if in, err := src.MergeBase(carried, onto); err != nil || in == carried {
		return objects.ZeroID, err
	}
	return carried, nil
}

// upToDate finishes an update onto the tree's base or an ancestor of it,
// as git's merge is "already up to date": there is nothing to bring in,
// and moving the base back would make the tree's committed work look
// uncommitted, so the tree keeps its base and files; only the ref it
// follows is recorded.
func (t *Tree) upToDate(res *UpdateResult, made bool) error {
	res.Changeset = t.idx.Base
	if t.opts.Ref != "" && t.opts.Ref != t.idx.Ref {
		ix := *t.idx
		ix.Ref = t.opts.Ref
		if err := t.writeIndex(&ix); err != nil {
			return err
		}
	}
	if made {
		return t.writeStorePath()
	}
	return nil
}

// updateSlots lists the paths an update looks at: those that differ
// between the merge base and onto, and between the merge base and the
// tree's base. Every other path is the same in all three, so the work
// tree's file and its index entry stay as they are. Both comparisons start
// from the merge base, whose root is read once here for both (two
// changesBetween calls would read it twice).
func (t *Tree) updateSlots(src Source, mb, onto objects.ID) ([]slot, error) {
	ci, err := t.caseInsensitive()
	if err != nil {
		return nil, err
	}
	mRoot, err := rootOf(src, mb)
	if err != nil {
		return nil, err
	}
	bRoot, err := rootOf(src, t.idx.Base)
	if err != nil {
		return nil, err
	}
	rRoot, err := rootOf(src, onto)
	if err != nil {
		return nil, err
	}
	var toR, toB []change
	if err := t.diffTrees(src, "", mRoot, rRoot, ci, &toR); err != nil {
		return nil, err
	}
	if err := t.diffTrees(src, "", mRoot, bRoot, false, &toB); err != nil {
		return nil, err
	}
	at := map[string]int{}
	var slots []slot
	for _, c := range toR {
		at[c.path] = len(slots)
		slots = append(slots, slot{path: c.path, m: c.old, b: c.old, r: c.new})
	}
	for _, c := range toB {
		if i, ok := at[c.path]; ok {
			slots[i].b = c.new
			continue
		}
		slots = append(slots, slot{path: c.path, m: c.old, b: c.new, r: c.old})
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].path < slots[j].path })
	return slots, nil
}

// same reports whether two entries hold the same thing (both absent, or
// the same mode and object).
func same(a, b objects.Entry) bool {
	return a.Mode == b.Mode && a.ID == b.ID
}

// oursAt looks at what the work tree holds at p, reading a file only when
// its index entry's stat data cannot vouch for it.
func (t *Tree) oursAt(p string) (ours, error) {
	fi, err := t.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
		return ours{}, nil
	case err != nil:
		return ours{}, err
	case t.isStore(fi):
		return ours{}, &UnsafeTreeError{Path: p, Reason: "the store's directory is there"}
	case fi.IsDir():
		return ours{e: objects.Entry{Mode: objects.ModeDir}}, nil
	case modeOf(fi) == 0:
		return ours{special: true}, nil
	}
	if i, ok := t.idx.find(p); ok {
		e := &t.idx.Entries[i]
		k, now, _, err := t.compare(p, fi, e)
		if err != nil {
			return ours{}, err
		}
		if k == 0 {
			return ours{e: objects.Entry{Mode: e.Mode, ID: e.ID}}, nil
		}
		if !now.ID.IsZero() {
			return ours{e: objects.Entry{Mode: now.Mode, ID: now.ID}}, nil
		}
	}
	mode := modeOf(fi)
	id, _, _, err := t.workEntry(p, mode)
	return ours{e: objects.Entry{Mode: mode, ID: id}}, err
}

// planUpdate decides every path's step before anything is written, so a
// failure to read leaves the tree untouched.
func (t *Tree) planUpdate(src Source, slots []slot, opts textmerge.MergeOptions) ([]*step, error) {
	steps := make([]*step, 0, len(slots))
	removing := map[string]bool{}
	var dirs []*step
	for _, s := range slots {
		o, err := t.oursAt(s.path)
		if err != nil {
			return nil, err
		}
		st := &step{s: s, o: o}
		steps = append(steps, st)
		if o.e.Mode == objects.ModeDir && s.r.Mode != 0 {
			dirs = append(dirs, st) // decided once the removals are known
			continue
		}
		if o.e.Mode == objects.ModeDir {
			st.o = ours{} // the file is gone; what the directory holds is untracked
		}
		if err := t.decide(src, st, opts); err != nil {
			return nil, err
		}
		if st.remove {
			removing[s.path] = true
		}
	}
	for _, st := range dirs {
		if t.onlyRemoved(st.s.path, removing) {
			st.o = ours{}
			if err := t.decide(src, st, opts); err != nil {
				return nil, err
			}
		} else {
			t.keepOurs(st)
		}
	}
	for _, st := range steps {
		if st.write {
			if err := t.checkParents(st, removing); err != nil {
				return nil, err
			}
		}
	}
	return steps, nil
}

// checkParents turns a write whose directory is held by something the
// update keeps (a file, a link, a special file) into a conflict that
// keeps ours.
func (t *Tree) checkParents(st *step, removing map[string]bool) error {
	for d := path.Dir(st.s.path); d != "."; d = path.Dir(d) {
		fi, err := t.root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
			continue
		case err != nil:
			return err
		case t.isStore(fi):
			return &UnsafeTreeError{Path: d, Reason: "the store's directory is there"}
		case fi.IsDir() || removing[d]:
			continue
		}
		*st = step{s: st.s, o: st.o}
		t.keepOurs(st)
		return nil
	}
	return nil
}

// decide fills in st's step from its three sides.
func (t *Tree) decide(src Source, st *step, opts textmerge.MergeOptions) error {
	s, o := st.s, st.o.e
	switch {
	case st.o.special:
		t.keepOurs(st)
	case same(o, s.r):
		if s.r.Mode != 0 {
			st.entry = &IndexEntry{Path: s.path, Mode: s.r.Mode, ID: s.r.ID, Smudged: true}
		}
	case same(o, s.m):
		if s.r.Mode == 0 {
			st.remove = true
			return nil
		}
		data, err := src.Blob(s.r.ID)
		if err != nil {
			return fmt.Errorf("update %q: %w", s.path, err)
		}
		st.write, st.mode, st.data = true, s.r.Mode, data
	case same(s.r, s.m):
		if s.r.Mode != 0 {
			st.entry = &IndexEntry{Path: s.path, Mode: s.r.Mode, ID: s.r.ID, Smudged: true}
		}
	case regular(o.Mode) && regular(s.r.Mode) && (s.m.Mode == 0 || regular(s.m.Mode)):
		return t.mergeText(src, st, opts)
	default:
		t.keepOurs(st)
	}
	return nil
}

// regular reports a file mode that merges by content (not a link).
func regular(m objects.Mode) bool { return m == objects.ModeFile || m == objects.ModeExec }

// keepOurs records st as a conflict that leaves the work tree's file as it
// is.
func (t *Tree) keepOurs(st *step) {
	st.conflict = true
	if st.s.r.Mode != 0 {
		st.entry = &IndexEntry{Path: st.s.path, Mode: st.s.r.Mode, ID: st.s.r.ID, Smudged: true, Conflict: true}
	}
}

// mergeText merges a file both sides changed, by lines. A clean merge is
// written; a conflict is written with markers and recorded; binary content
// keeps ours. The executable bit merges on its own: one side's change
// wins, and changes that disagree are a conflict keeping ours' bit.
func (t *Tree) mergeText(src Source, st *step, opts textmerge.MergeOptions) error {
	s := st.s
	var base []byte
	var err error
	if s.m.Mode != 0 {
		if base, err = src.Blob(s.m.ID); err != nil {
			return fmt.Errorf("update %q: %w", s.path, err)
		}
	}
	theirs, err := src.Blob(s.r.ID)
	if err != nil {
		return fmt.Errorf("update %q: %w", s.path, err)
	}
	mine, _, _, err := t.readWork(s.path, st.o.e.Mode)
	if err != nil {
		return err
	}
	if objects.BlobID(mine) != st.o.e.ID {
		return fmt.Errorf("update %q: the file changed while it was read", s.path)
	}
	res, err := textmerge.Merge(base, mine, theirs, opts)
	if err != nil {
		return err
	}
	if res.Binary && !res.Clean {
		t.keepOurs(st)
		return nil
	}
	mode, modeOK := mergeMode(s.m.Mode, st.o.e.Mode, s.r.Mode)
	if !modeOK {
		mode = st.o.e.Mode
	}
	if objects.BlobID(res.Merged) != st.o.e.ID || mode != st.o.e.Mode {
		st.write, st.mode, st.data = true, mode, res.Merged
	}
	if !res.Clean || !modeOK {
		t.keepOurs(st)
		return nil
	}
	st.merged = true
	if mode != s.r.Mode || objects.BlobID(res.Merged) != s.r.ID {
		st.entry = &IndexEntry{Path: s.path, Mode: s.r.Mode, ID: s.r.ID, Smudged: true}
	}
	return nil
}

// mergeMode merges the executable bit: the side that changed it wins
// (base absent: both must agree).
func mergeMode(m, o, r objects.Mode) (objects.Mode, bool) {
	switch {
	case o == r:
		return o, true
	case m == o:
		return r, true
	case m == r:
		return o, true
	}
	return o, false
}

// executeUpdate carries out the planned steps: removals (deepest first),
// the directories they leave empty, then writes. It fills res.
func (t *Tree) executeUpdate(steps []*step, res *UpdateResult) error {
	touched := map[string]bool{}
	var removes []change
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		if !st.remove {
			continue
		}
		if err := t.root.Remove(st.s.path); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			return err
		}
		res.Removed++
		touched[path.Dir(st.s.path)] = true
		removes = append(removes, change{path: st.s.path})
	}
	if err := t.pruneDirs(removes, touched); err != nil {
		return err
	}
	made := map[string]bool{}
	for _, st := range steps {
		if st.write {
			stat, err := t.place(st.s.path, st.mode, st.data, made, touched)
			if err != nil {
				return err
			}
			res.Written++
			if st.entry == nil && !st.conflict && st.s.r.Mode != 0 {
				st.entry = &IndexEntry{Path: st.s.path, Mode: st.s.r.Mode, ID: st.s.r.ID, Stat: stat}
			}
			if st.merged && t.opts.weaken&testknobs.UpdateTrustsStat != 0 {
				// The canary: the merged file's stat data vouches for
				// theirs' object, which it does not hold.
				st.entry = &IndexEntry{Path: st.s.path, Mode: st.s.r.Mode, ID: st.s.r.ID, Stat: stat}
			}
		}
		if st.merged {
			res.Merged = append(res.Merged, st.s.path)
		}
		if st.conflict {
			res.Conflicts = append(res.Conflicts, ConflictRecord{Path: st.s.path, Base: bare(st.s.m), Ours: bare(st.o.e), Theirs: bare(st.s.r)})
		}
	}
	if t.opts.Sync {
		return t.syncDirs(touched)
	}
	return nil
}

// bare is e without its name, as a conflict record keeps it.
func bare(e objects.Entry) objects.Entry { return objects.Entry{Mode: e.Mode, ID: e.ID} }

// updatedEntries is the index after an update: every path it looked at
// gets its step's entry (or none), every other keeps its own.
func (t *Tree) updatedEntries(steps []*step) []IndexEntry {
	looked := make(map[string]bool, len(steps))
	var out []IndexEntry
	for _, st := range steps {
		looked[st.s.path] = true
		if st.entry != nil {
			out = append(out, *st.entry)
		}
	}
	for _, e := range t.idx.Entries {
		if !looked[e.Path] {
			out = append(out, t.carry(e))
		}
	}
	sortEntries(out)
	return out
}
