package worktree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// ErrLocalChanges is wrapped by *LocalChangesError: a switch would
// overwrite or remove local changes (or untracked files), and Force is off.
// Nothing was written.
var ErrLocalChanges = errors.New("worktree: local changes would be overwritten")

// LocalChangesError lists the paths a switch refused to touch.
type LocalChangesError struct {
	Paths []string
}

func (e *LocalChangesError) Error() string {
	return fmt.Sprintf("%v: %s", ErrLocalChanges, shortList(e.Paths))
}

// shortList joins the first ten of paths with commas and says how many
// more there are: an error naming thousands of paths buries its message.
func shortList(paths []string) string {
	const show = 10
	if len(paths) <= show {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:show], ", "), len(paths)-show)
}

// Unwrap returns ErrLocalChanges.
func (e *LocalChangesError) Unwrap() error { return ErrLocalChanges }

// Result reports a checkout or switch.
type Result struct {
	Changeset objects.ID
	Written   int   // files and links written
	Removed   int   // files and links removed
	Bytes     int64 // bytes of content written
}

// Checkout materializes changeset id in dir. A directory that is a work
// tree is switched (see Switch). Otherwise dir is made if missing, must be
// empty unless Options.Force is set, and becomes a work tree: every file
// and link of the tree is written, one at a time, then the index. A
// directory whose first checkout was interrupted (ErrInterrupted) is
// checked out again over what it holds; one whose index is corrupt is
// treated as no work tree under Force.
func Checkout(src Source, id objects.ID, dir string, o Options) (*Result, error) {
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if err := o.FS.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	t, err := Open(dir, o)
	switch {
	case err == nil:
		defer t.Close()
		return t.Switch(src, id)
	case errors.Is(err, ErrNotWorkTree), o.Force && errors.Is(err, ErrIndexCorrupt):
	default:
		return nil, err
	}
	// A first checkout that was interrupted left files only it wrote, or
	// that a forced one was told to overwrite: checking out again
	// finishes it, overwriting them.
	resume := errors.Is(err, ErrInterrupted)
	if t, err = newTree(dir, o); err != nil {
		return nil, err
	}
	defer t.Close()
	fis, err := t.root.ReadDir(".")
	if err != nil {
		return nil, err
	}
	empty := len(fis) == 0 || len(fis) == 1 && fis[0].Name() == MetaDir
	if !empty && !o.Force && !resume {
		return nil, fmt.Errorf("%w: %q (force writes into it)", ErrNotEmpty, dir)
	}
	if resume {
		t.opts.Force = true
	}
	return t.apply(src, id, empty)
}

// Switch moves the work tree to changeset id, touching only the paths that
// differ between its base and id, and records Options.Ref as the ref it
// follows. A tree with unresolved conflicts is refused (*UnresolvedError)
// unless Force, which drops them. Before writing anything it checks each
// of them: a path whose file differs from both the base and id, an
// untracked file or directory in the way, or a link or file where id needs
// a directory, is a local change, and the switch fails with a
// *LocalChangesError listing them all, unless Force is set (then they are
// replaced; never anything outside the tree). Then it removes what id
// deleted (and directories left empty), writes what id added or changed
// (each file to a temporary name, renamed into place), and writes the new
// index. See the package documentation for what a crash leaves.
func (t *Tree) Switch(src Source, id objects.ID) (*Result, error) {
	return t.apply(src, id, false)
}

func (t *Tree) apply(src Source, id objects.ID, empty bool) (*Result, error) {
	made, l, err := t.begin()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if !empty {
		// A switch that stopped left paths of its own among the base's:
		// finishing it first makes the tree its target, from which the
		// switch asked for is an ordinary one.
		onto, err := t.switching()
		if err != nil {
			return nil, err
		}
		if !onto.IsZero() && onto != id {
			// Forced, the switch asked for also rewrites every path the
			// stopped one may have touched, without finishing it: one that
			// cannot be finished (it failed on something of onto's, or on
			// a full disk) would otherwise hold the tree for ever.
			if t.opts.Force {
				res, err := t.switchLocked(src, id, false, onto)
				if err == nil && made {
					err = t.writeStorePath()
				}
				return res, err
			}
			if _, err := t.switchLocked(src, onto, false, objects.ZeroID); err != nil {
				return nil, &FinishError{Onto: onto, Err: err}
			}
		}
	}
	res, err := t.switchLocked(src, id, empty, objects.ZeroID)
	if err == nil && made {
		err = t.writeStorePath()
	}
	return res, err
}

// switchLocked is apply under the tree's lock. stopped, when not zero, is
// the target of a switch that stopped and could not be finished: each
// path it would have changed is written back to id's entry too.
func (t *Tree) switchLocked(src Source, id objects.ID, empty bool, stopped objects.ID) (*Result, error) {
	ci, err := t.caseInsensitive()
	if err != nil {
		return nil, err
	}
	chs, err := t.changesBetween(src, t.idx.Base, id, ci)
	if err != nil {
		return nil, err
	}
	in := make(map[string]bool, len(chs))
	for _, c := range chs {
		in[c.path] = true
	}
	if !stopped.IsZero() {
		half, err := t.changesBetween(src, t.idx.Base, stopped, ci)
		if err != nil {
			return nil, err
		}
		for _, c := range half {
			if !in[c.path] {
				// Not changed between the base and id: id holds the
				// base's entry there.
				in[c.path] = true
				chs = append(chs, change{path: c.path, old: c.new, new: c.old})
			}
		}
	}
	if t.opts.Force && !empty {
		// Forced, a switch leaves every tracked path as id has it, as
		// git's checkout -f does: also those it would not change, which
		// hold local edits, an update's half-written merge or its
		// markers. Untracked files stay.
		st, err := t.Status()
		if err != nil {
			return nil, err
		}
		for _, c := range st.Changes {
			if c.Kind != Added && !in[c.Path] {
				in[c.Path] = true
				chs = append(chs, change{path: c.Path, old: c.New, new: c.Old})
			}
		}
	}
	sort.Slice(chs, func(i, j int) bool { return chs[i].path < chs[j].path })
	p := &plan{}
	for _, c := range chs {
		if c.new.Mode == 0 {
			p.removes = append(p.removes, c)
		} else {
			p.writes = append(p.writes, c)
		}
	}
	if !empty && !t.opts.Force && len(t.idx.Conflicts) > 0 {
		return nil, t.unresolved()
	}
	if !empty {
		if err := t.check(p); err != nil {
			return nil, err
		}
		if len(p.conflicts) > 0 && !t.opts.Force {
			return nil, &LocalChangesError{Paths: p.conflicts}
		}
	}
	if !empty && len(p.removes)+len(p.writes)+len(p.obstacles) > 0 {
		if err := t.recordSwitch(id); err != nil {
			return nil, err
		}
	}
	return t.execute(src, id, p)
}

// execute carries out a checked plan and writes the new index.
func (t *Tree) execute(src Source, id objects.ID, p *plan) (*Result, error) {
	res := &Result{Changeset: id}
	touched := map[string]bool{}
	if t.opts.Force {
		for _, o := range p.obstacles {
			if err := t.removeAll(o); err != nil {
				return nil, err
			}
			touched[path.Dir(o)] = true
		}
	}
	for i := len(p.removes) - 1; i >= 0; i-- {
		c := p.removes[i]
		if p.dirs[c.path] {
			if fi, err := t.root.Lstat(c.path); err == nil && fi.IsDir() {
				continue // already the directory the writes need (check)
			}
		}
		err := t.root.Remove(c.path)
		if err != nil && t.opts.Force && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			err = t.removeAll(c.path)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			return nil, err
		}
		res.Removed++
		touched[path.Dir(c.path)] = true
	}
	if err := t.pruneDirs(p.removes, touched); err != nil {
		return nil, err
	}
	written := make([]IndexEntry, 0, len(p.writes))
	made := map[string]bool{}
	for i, c := range p.writes {
		e, n, err := t.writeOne(src, c, made, touched)
		if err != nil {
			return nil, err
		}
		written = append(written, e)
		res.Written++
		res.Bytes += n
		if t.opts.Progress != nil {
			t.opts.Progress(i+1, len(p.writes))
		}
	}
	if t.opts.Sync {
		if err := t.syncDirs(touched); err != nil {
			return nil, err
		}
	}
	// A switch starts from a tree without conflicts, or (Force) drops them.
	ix := &Index{Base: id, Ref: t.opts.Ref, Entries: t.merged(p.removes, written)}
	for i := range ix.Entries {
		ix.Entries[i].Conflict = false
	}
	if err := t.writeIndex(ix); err != nil {
		return nil, err
	}
	// The switch wrote every file it keeps: no marker an interrupted
	// update left is unaccounted for any more.
	if err := t.clearPending(); err != nil {
		return nil, err
	}
	return res, t.clearSwitch()
}

// pruneDirs removes the directories that removals left empty, deepest
// first, up to the first one that is not empty.
func (t *Tree) pruneDirs(removes []change, touched map[string]bool) error {
	var dirs []string
	seen := map[string]bool{}
	for _, c := range removes {
		for d := path.Dir(c.path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range dirs {
		fi, err := t.root.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		fis, err := t.root.ReadDir(d)
		if err != nil {
			return err
		}
		if len(fis) > 0 {
			continue
		}
		if err := t.root.Remove(d); err != nil {
			return err
		}
		touched[path.Dir(d)] = true
	}
	return nil
}

// ensureDirs makes every missing directory on the way to p.
func (t *Tree) ensureDirs(p string, made, touched map[string]bool) error {
	d := path.Dir(p)
	if d == "." || d == "/" || made[d] {
		return nil
	}
	if err := t.ensureDirs(d, made, touched); err != nil {
		return err
	}
	fi, err := t.root.Lstat(d)
	switch {
	case err == nil && fi.IsDir() && !t.isStore(fi):
	case err == nil && t.isStore(fi):
		return &UnsafeTreeError{Path: d, Reason: "the store's directory is there"}
	case err == nil && t.opts.Force:
		if err := t.root.Remove(d); err != nil {
			return err
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := t.root.Mkdir(d, 0o777); err != nil {
			return err
		}
		touched[path.Dir(d)] = true
	case err == nil:
		return &LocalChangesError{Paths: []string{d}}
	default:
		return err
	}
	made[d] = true
	return nil
}

// writeOne writes one file or link of the new tree: to a temporary name in
// the metadata directory, then renamed over p, so p holds the old entry or
// the new one and never a part of either.
func (t *Tree) writeOne(src Source, c change, made, touched map[string]bool) (IndexEntry, int64, error) {
	e := IndexEntry{Path: c.path, Mode: c.new.Mode, ID: c.new.ID}
	data, err := src.Blob(c.new.ID)
	if err != nil {
		return e, 0, fmt.Errorf("checkout %q: %w", c.path, err)
	}
	e.Stat, err = t.place(c.path, c.new.Mode, data, made, touched)
	return e, int64(len(data)), err
}

// place writes data as p's file (or link, for ModeSymlink) of the given
// mode: to a temporary name in the metadata directory, then renamed over
// p, so p holds what it held before or data, and never a part of either.
// It returns the stat data of the new file.
func (t *Tree) place(p string, mode objects.Mode, data []byte, made, touched map[string]bool) (Stat, error) {
	if err := t.ensureDirs(p, made, touched); err != nil {
		return Stat{}, err
	}
	tmp := t.tmpName()
	var err error
	if mode == objects.ModeSymlink {
		if err := checkLinkTarget(p, data); err != nil {
			return Stat{}, err
		}
		err = t.root.Symlink(string(data), tmp)
	} else {
		err = t.writeFile(tmp, data, mode == objects.ModeExec)
	}
	if err == nil {
		err = t.root.Rename(tmp, p)
		if err != nil && t.opts.Force {
			if err = t.removeAll(p); err == nil {
				err = t.root.Rename(tmp, p)
			}
		}
	}
	if err != nil {
		// A partial file left in tmp would hold the space a full disk
		// needs for the next attempt.
		t.root.Remove(tmp)
		return Stat{}, err
	}
	touched[path.Dir(p)] = true
	fi, err := t.root.Lstat(p)
	if err != nil {
		return Stat{}, err
	}
	return statOf(fi), nil
}

func (t *Tree) writeFile(name string, data []byte, exec bool) error {
	perm := os.FileMode(0o666)
	if exec {
		perm = 0o777
	}
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && t.opts.Sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDirs syncs every directory a switch changed, deepest first, then the
// tmp directory the files were renamed out of.
func (t *Tree) syncDirs(touched map[string]bool) error {
	dirs := make([]string, 0, len(touched)+1)
	for d := range touched {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, d := range append(dirs, tmpDir) {
		if err := t.root.SyncDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// merged is the new index: the old entries minus the removed and written
// paths (carried with their trust), plus the written ones.
func (t *Tree) merged(removes []change, written []IndexEntry) []IndexEntry {
	drop := make(map[string]bool, len(removes)+len(written))
	for _, c := range removes {
		drop[c.path] = true
	}
	for _, e := range written {
		drop[e.Path] = true
	}
	out := make([]IndexEntry, 0, len(t.idx.Entries)+len(written))
	for _, e := range t.idx.Entries {
		if !drop[e.Path] {
			out = append(out, t.carry(e))
		}
	}
	out = append(out, written...)
	sortEntries(out)
	return out
}
