package worktree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/swarmops/swarmops/core/objects"
)

// Resolve marks conflicted paths resolved, after their files were edited
// to what they should hold (or removed, to delete them): their conflict
// records are dropped and their entries are no longer flagged, so the next
// commit records whatever the files hold. With all set every conflicted
// path is resolved and paths must be empty. A path without a conflict is
// ErrNotConflicted. Unless force is set, a file that still holds a
// conflict marker line ("<<<<<<<", "|||||||" or ">>>>>>>" at the start of
// a line, as update writes them) is refused with *UnresolvedError
// (Markers set), and nothing is written. It returns the resolved paths.
func (t *Tree) Resolve(paths []string, all, force bool) ([]string, error) {
	_, l, err := t.begin()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	want, err := t.resolving(paths, all)
	if err != nil {
		return nil, err
	}
	if !force {
		var marked []string
		for _, p := range want {
			has, err := t.holdsMarkers(p)
			if err != nil {
				return nil, err
			}
			if has {
				marked = append(marked, p)
			}
		}
		if len(marked) > 0 {
			return nil, &UnresolvedError{Paths: marked, Markers: true}
		}
	}
	drop := make(map[string]bool, len(want))
	for _, p := range want {
		drop[p] = true
	}
	ix := &Index{Base: t.idx.Base, Ref: t.idx.Ref, Carried: t.idx.Carried, Entries: make([]IndexEntry, len(t.idx.Entries))}
	for i, e := range t.idx.Entries {
		if drop[e.Path] {
			e.Conflict, e.Smudged = false, true
		}
		ix.Entries[i] = t.carry(e)
	}
	for _, c := range t.idx.Conflicts {
		if !drop[c.Path] {
			ix.Conflicts = append(ix.Conflicts, c)
		}
	}
	if err := t.writeIndex(ix); err != nil {
		return nil, err
	}
	return want, nil
}

// resolving returns the sorted, distinct conflicted paths a Resolve names.
func (t *Tree) resolving(paths []string, all bool) ([]string, error) {
	conflicted := map[string]bool{}
	for _, c := range t.idx.Conflicts {
		conflicted[c.Path] = true
	}
	for _, e := range t.idx.Entries {
		if e.Conflict {
			conflicted[e.Path] = true
		}
	}
	if all {
		if len(paths) > 0 {
			return nil, fmt.Errorf("worktree: resolve: paths given with all")
		}
		for p := range conflicted {
			paths = append(paths, p)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if _, err := objects.CleanPath(p); err != nil {
			return nil, err
		}
		if !conflicted[p] {
			return nil, fmt.Errorf("%w: %q", ErrNotConflicted, p)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// markerStarts are the conflict marker lines Resolve looks for. The
// "=======" separator alone is left out: it is common in text (a
// reStructuredText or Markdown heading underline) and never appears
// without the others in a block update writes.
var markerStarts = [][]byte{[]byte("<<<<<<<"), []byte("|||||||"), []byte(">>>>>>>")}

// holdsMarkers reports whether the regular file p has a line that starts
// with a conflict marker followed by a space or the line's end. A missing
// path, a link or a directory holds none.
func (t *Tree) holdsMarkers(p string) (bool, error) {
	fi, err := t.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, nil
	}
	data, _, _, err := t.readWork(p, modeOf(fi))
	if err != nil {
		return false, err
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		for _, m := range markerStarts {
			if bytes.HasPrefix(line, m) && (len(line) == len(m) || line[len(m)] == ' ') {
				return true, nil
			}
		}
	}
	return false, nil
}
