package worktree

import (
	"errors"
	"io/fs"
	"path"
	"sort"
)

// plan is what a switch will do, decided before anything is written.
type plan struct {
	removes   []change // new side absent
	writes    []change // new side present
	obstacles []string // untracked things in the way (removed under Force)
	conflicts []string
	dirs      map[string]bool // the directories the writes need
	files     map[string]bool // the paths the writes make
}

// fileAbove reports whether a write makes a file or link at a directory
// above q.
func (p *plan) fileAbove(q string) bool {
	for d := path.Dir(q); d != "."; d = path.Dir(d) {
		if p.files[d] {
			return true
		}
	}
	return false
}

// check fills p's conflicts and obstacles by looking at every path the
// switch touches and every directory it needs.
func (t *Tree) check(p *plan) error {
	removing := make(map[string]bool, len(p.removes))
	for _, c := range p.removes {
		removing[c.path] = true
	}
	p.dirs, p.files = map[string]bool{}, map[string]bool{}
	for _, c := range p.writes {
		p.files[c.path] = true
		for d := path.Dir(c.path); d != "." && !p.dirs[d]; d = path.Dir(d) {
			p.dirs[d] = true
		}
	}
	for _, c := range p.removes {
		if err := t.checkPath(p, c, removing); err != nil {
			return err
		}
	}
	checked := map[string]bool{}
	for _, c := range p.writes {
		if err := t.checkPath(p, c, removing); err != nil {
			return err
		}
		for d := path.Dir(c.path); d != "." && !checked[d]; d = path.Dir(d) {
			checked[d] = true
			if err := t.checkDir(p, d, removing); err != nil {
				return err
			}
		}
	}
	sort.Strings(p.conflicts)
	return nil
}

// checkDir looks at a directory a write needs: absent or a real directory
// is fine; a tracked file the switch removes is fine; anything else (an
// untracked file, a link, the store) is in the way.
func (t *Tree) checkDir(p *plan, d string, removing map[string]bool) error {
	fi, err := t.root.Lstat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
		return nil // a parent is checked on its own
	case err != nil:
		return err
	case t.isStore(fi):
		return &UnsafeTreeError{Path: d, Reason: "the store's directory is there"}
	case fi.IsDir():
		return nil
	case removing[d]:
		return nil
	}
	p.conflicts = append(p.conflicts, d)
	p.obstacles = append(p.obstacles, d)
	return nil
}

// checkPath looks at one path the switch changes: it is fine when it holds
// the old entry (clean), already holds the new one, or is absent where the
// old tree had nothing or the new tree has nothing.
func (t *Tree) checkPath(p *plan, c change, removing map[string]bool) error {
	fi, err := t.root.Lstat(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if c.old.Mode != 0 && c.new.Mode != 0 {
			p.conflicts = append(p.conflicts, c.path) // deleted here, changed there
		}
		return nil
	case isNotDir(err):
		if c.new.Mode == 0 && p.fileAbove(c.path) {
			// A directory the new revision turns into a file, already
			// turned by a switch that stopped: the file is checked as a
			// write of its own.
			return nil
		}
		if c.old.Mode != 0 {
			p.conflicts = append(p.conflicts, c.path) // a tracked directory was replaced
		}
		return nil // the directory in the way is checked by checkDir
	case err != nil:
		return err
	case t.isStore(fi):
		return &UnsafeTreeError{Path: c.path, Reason: "the store's directory is there"}
	case fi.IsDir():
		if c.new.Mode == 0 && p.dirs[c.path] {
			// A file the new revision turns into a directory, already
			// turned by a switch that stopped: what the directory holds is
			// checked path by path.
			return nil
		}
		if !t.onlyRemoved(c.path, removing) {
			p.conflicts = append(p.conflicts, c.path)
			p.obstacles = append(p.obstacles, c.path)
		}
		return nil
	}
	mode := modeOf(fi)
	if c.old.Mode != 0 {
		if i, ok := t.idx.find(c.path); ok {
			e := &t.idx.Entries[i]
			k, _, _, err := t.compare(c.path, fi, e)
			if err != nil {
				return err
			}
			if k == 0 {
				return nil
			}
		}
	}
	if c.new.Mode != 0 && mode == c.new.Mode {
		id, _, _, err := t.workEntry(c.path, mode)
		if err != nil {
			return err
		}
		if id == c.new.ID {
			return nil
		}
	}
	p.conflicts = append(p.conflicts, c.path)
	return nil
}

// onlyRemoved reports whether the directory d holds nothing but tracked
// files this switch removes (a directory the new tree turns into a file).
func (t *Tree) onlyRemoved(d string, removing map[string]bool) bool {
	fis, err := t.root.ReadDir(d)
	if err != nil {
		return false
	}
	for _, fi := range fis {
		p := d + "/" + fi.Name()
		if fi.IsDir() {
			if !t.onlyRemoved(p, removing) {
				return false
			}
		} else if !removing[p] {
			return false
		}
	}
	return true
}
