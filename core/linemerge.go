package core

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/merge"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
)

// This file holds the file-level half of a three-way merge. Package merge
// decides per path; a path that both sides changed differently is then,
// when it is a regular or executable file on both sides, merged as git
// merges it: its mode three ways (merge.Mode), its content three ways,
// by lines with core/textmerge (git merge-file's rules) where both sides
// changed it, and only what does not merge there is a conflict.

// lineMerger turns a merge's per-path decisions into the changes to
// commit, merging contested text files by lines. It remembers each line
// merge by the three blob ids it read, so a land that re-merges after a
// lost race runs textmerge again exactly for the paths whose head value
// changed: their key is new.
type lineMerger struct {
	labels textmerge.MergeOptions
	blobs  map[ID][]byte
	done   map[[3]ID]textmerge.Result
	// modes holds, for each path of the last merge that conflicted on its
	// mode alone, ours' mode and theirs'.
	modes map[string][2]objects.Mode
}

func newLineMerger(labels textmerge.MergeOptions) *lineMerger {
	return &lineMerger{labels: labels, blobs: make(map[ID][]byte), done: make(map[[3]ID]textmerge.Result)}
}

// blob reads a blob once per merger.
func (lm *lineMerger) blob(sn *Snapshot, id ID) ([]byte, error) {
	if data, ok := lm.blobs[id]; ok {
		return data, nil
	}
	data, err := sn.Blob(id)
	if err != nil {
		return nil, err
	}
	lm.blobs[id] = data
	return data, nil
}

// isText reports whether mode is a regular file's, the only kind whose
// content merges by lines.
func isText(mode objects.Mode) bool { return mode == objects.ModeFile || mode == objects.ModeExec }

// lineMergeable reports whether a contested path is a file whose mode
// and content merge apart: a regular or executable file on both sides,
// over one or nothing in the base. Anything else (a delete, a type
// change, a link) stays a conflict of the whole file.
func lineMergeable(s merge.Sides) bool {
	return s.HasHead && s.HasTheirs && isText(s.Head.Mode) && isText(s.Theirs.Mode) &&
		(!s.HasBase || isText(s.Base.Mode))
}

// mergeContent merges a contested file's content three ways, apart from
// its mode, and reports whether the result is head's content. A side that
// left the content as the base had it takes the other side's as it is,
// binary too, as git does, with no diff: a one-sided rewrite of a large
// file would otherwise pay the line merge's worst case for nothing. Only
// content both sides changed merges by lines.
func (lm *lineMerger) mergeContent(sn *Snapshot, s merge.Sides) (textmerge.Result, bool, error) {
	keep := s.Head.ID
	switch {
	case s.Head.ID == s.Theirs.ID, s.HasBase && s.Base.ID == s.Theirs.ID:
	case s.HasBase && s.Base.ID == s.Head.ID:
		keep = s.Theirs.ID
	default:
		r, err := lm.mergeLines(sn, s)
		return r, err == nil && r.Clean && bytes.Equal(r.Merged, lm.blobs[s.Head.ID]), err
	}
	data, err := lm.blob(sn, keep)
	return textmerge.Result{Merged: data, Clean: true}, keep == s.Head.ID, err
}

// mergeLines merges one contested path's three blobs by lines. A binary
// blob makes a conflict with no hunks.
func (lm *lineMerger) mergeLines(sn *Snapshot, s merge.Sides) (textmerge.Result, error) {
	var key [3]ID
	if s.HasBase {
		key[0] = s.Base.ID
	}
	key[1], key[2] = s.Head.ID, s.Theirs.ID
	if r, ok := lm.done[key]; ok {
		return r, nil
	}
	var base []byte
	if s.HasBase {
		var err error
		if base, err = lm.blob(sn, s.Base.ID); err != nil {
			return textmerge.Result{}, err
		}
	}
	head, err := lm.blob(sn, s.Head.ID)
	if err != nil {
		return textmerge.Result{}, err
	}
	theirs, err := lm.blob(sn, s.Theirs.ID)
	if err != nil {
		return textmerge.Result{}, err
	}
	r, err := textmerge.Merge(base, head, theirs, lm.labels)
	if err != nil {
		return textmerge.Result{}, err
	}
	lm.done[key] = r
	return r, nil
}

// changes returns the changes that apply m's result to its head: m's
// edits, and a merged file for each contested path whose mode and content
// merge cleanly, sorted by path. If any path still conflicts it returns a
// *MergeConflictError naming every such path, with the hunks of those
// merged by lines (wrapped by conflictError).
func (lm *lineMerger) changes(sn *Snapshot, m *merge.Merge) ([]Change, error) {
	out, mce, err := lm.resolve(sn, m)
	if err != nil {
		return nil, err
	}
	if mce != nil {
		return nil, lm.conflictError(mce)
	}
	return out, nil
}

// conflictError returns mce, wrapped with the modes of each of its paths
// that conflicts on its mode alone: MergeConflictError holds only paths
// and hunks, and such a path has no hunks to tell why it conflicts.
func (lm *lineMerger) conflictError(mce *MergeConflictError) error {
	var why []string
	for _, p := range mce.Paths {
		if m, ok := lm.modes[p]; ok {
			why = append(why, fmt.Sprintf("%s: mode %o (ours) against %o (theirs)", p, m[0], m[1]))
		}
	}
	if len(why) == 0 {
		return mce
	}
	return fmt.Errorf("%w; %s", mce, strings.Join(why, "; "))
}

// modeConflict records that path p conflicts on its mode alone.
func (lm *lineMerger) modeConflict(mce *MergeConflictError, p string, ours, theirs objects.Mode) {
	mce.Paths = append(mce.Paths, p)
	if lm.modes == nil {
		lm.modes = make(map[string][2]objects.Mode)
	}
	lm.modes[p] = [2]objects.Mode{ours, theirs}
}

// resolve is changes, returning the conflicts (nil if none) beside the
// changes of every path that merged.
func (lm *lineMerger) resolve(sn *Snapshot, m *merge.Merge) ([]Change, *MergeConflictError, error) {
	edits, conflicts := m.Result()
	lm.modes = nil
	out := make([]Change, 0, len(edits)+len(conflicts))
	for _, e := range edits {
		c := Change{Path: e.Path, Delete: e.Delete, Mode: e.Entry.Mode}
		if !e.Delete {
			data, err := lm.blob(sn, e.Entry.ID)
			if err != nil {
				return nil, nil, fmt.Errorf("path %q: %w", e.Path, err)
			}
			c.Data = data
		}
		out = append(out, c)
	}
	mce := &MergeConflictError{}
	for _, p := range conflicts {
		s, ok := m.Contested(p)
		if !ok || !lineMergeable(s) {
			mce.Paths = append(mce.Paths, p)
			continue
		}
		var baseMode objects.Mode // 0: the base lacks the file
		if s.HasBase {
			baseMode = s.Base.Mode
		}
		mode, ok := merge.Mode(baseMode, s.Head.Mode, s.Theirs.Mode)
		if !ok {
			lm.modeConflict(mce, p, s.Head.Mode, s.Theirs.Mode)
			continue
		}
		r, same, err := lm.mergeContent(sn, s)
		if err != nil {
			return nil, nil, fmt.Errorf("path %q: %w", p, err)
		}
		if !r.Clean {
			addConflict(mce, p, r)
			continue
		}
		if !same || mode != s.Head.Mode {
			out = append(out, Change{Path: p, Data: r.Merged, Mode: mode})
		}
	}
	sortChanges(out)
	if len(mce.Paths) == 0 {
		return out, nil, nil
	}
	sort.Strings(mce.Paths)
	return out, mce, nil
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}

// addConflict records a conflicting path and, for a text merge, its hunks.
func addConflict(mce *MergeConflictError, p string, r textmerge.Result) {
	mce.Paths = append(mce.Paths, p)
	if len(r.Conflicts) > 0 {
		setHunks(mce, p, r.Conflicts)
	}
}

func setHunks(mce *MergeConflictError, p string, h []textmerge.Conflict) {
	if mce.Hunks == nil {
		mce.Hunks = make(map[string][]textmerge.Conflict)
	}
	mce.Hunks[p] = h
}

// MergeChanges returns the changes that, applied to ours' tree, record the
// three-way merge of ours and theirs (base: their nearest common ancestor,
// the empty tree if none) with local, changes made on ours' tree, on top.
// It is what a commit with a second parent records: a merge whose own
// edits (local) are its author's, and whose other paths are the merge's.
//
// Path by path:
//
//   - a path local leaves alone takes the merge's value, so a file of ours
//     that local did not touch never undoes a change of theirs;
//   - a path local changes where the merge keeps ours' value, or conflicts,
//     takes local's value: there local is the author's resolution;
//   - a path that local and the merge both change takes local's value if
//     the two agree, else, when all are regular or executable files (or
//     ours has none), the two are merged over ours' value, the mode three
//     ways and the content by lines; else it conflicts.
//
// Conflicts left are a *MergeConflictError listing every such path
// (wrapped, for a path conflicting on its mode alone, to name the modes).
func (sn *Snapshot) MergeChanges(ours, theirs ID, local []Change) ([]Change, error) {
	base, err := mergeBase(sn, ours, theirs)
	if err != nil {
		return nil, err
	}
	m, err := buildMerge(sn, base, ours, theirs)
	if err != nil {
		return nil, err
	}
	lm := newLineMerger(textmerge.MergeOptions{OursLabel: errs.Short(ours), BaseLabel: errs.Short(base), TheirsLabel: errs.Short(theirs)})
	merged, mce, err := lm.resolve(sn, m)
	if err != nil {
		return nil, err
	}
	left := &MergeConflictError{}
	resolved := make(map[string]bool)
	byPath := make(map[string]int, len(merged))
	for i, c := range merged {
		byPath[c.Path] = i
	}
	out := merged
	for _, c := range local {
		if c.Mode == 0 && !c.Delete {
			c.Mode = objects.ModeFile
		}
		i, both := byPath[c.Path]
		if !both {
			resolved[c.Path] = true
			out = append(out, c)
			continue
		}
		r, err := lm.combine(sn, ours, c, merged[i])
		if err != nil {
			return nil, err
		}
		switch {
		case r.modes != nil:
			lm.modeConflict(left, c.Path, r.modes[0], r.modes[1])
			continue
		case r.conflict:
			addConflict(left, c.Path, r.text)
			continue
		}
		out[i] = r.change
	}
	if mce != nil {
		for _, p := range mce.Paths {
			if resolved[p] {
				continue
			}
			left.Paths = append(left.Paths, p)
			if h, ok := mce.Hunks[p]; ok {
				setHunks(left, p, h)
			}
		}
	}
	if len(left.Paths) > 0 {
		sort.Strings(left.Paths)
		return nil, lm.conflictError(left)
	}
	sortChanges(out)
	return out, nil
}

// combined is the outcome of combine.
type combined struct {
	change   Change
	conflict bool
	text     textmerge.Result
	modes    *[2]objects.Mode // a conflict on the mode alone: local's, the merge's
}

// combine merges a local change and the merge's change of one path, both
// made on ours' value there.
func (lm *lineMerger) combine(sn *Snapshot, ours ID, local, merged Change) (combined, error) {
	switch {
	case local.Delete && merged.Delete:
		return combined{change: local}, nil
	case local.Delete || merged.Delete:
		return combined{conflict: true}, nil
	case local.Mode == merged.Mode && bytes.Equal(local.Data, merged.Data):
		return combined{change: local}, nil
	case !isText(local.Mode) || !isText(merged.Mode):
		return combined{conflict: true}, nil
	}
	base, e, err := sn.ReadPath(ours, local.Path)
	switch {
	case errors.Is(err, ErrNotFound):
		base, e = nil, objects.Entry{} // mode 0: ours lacks the file
	case err != nil && errors.Is(err, ErrInvalid):
		return combined{conflict: true}, nil
	case err != nil:
		return combined{}, err
	case !isText(e.Mode):
		return combined{conflict: true}, nil
	}
	mode, ok := merge.Mode(e.Mode, local.Mode, merged.Mode)
	if !ok {
		return combined{conflict: true, modes: &[2]objects.Mode{local.Mode, merged.Mode}}, nil
	}
	r, err := textmerge.Merge(base, local.Data, merged.Data, lm.labels)
	if err != nil {
		return combined{}, err
	}
	if !r.Clean {
		return combined{conflict: true, text: r}, nil
	}
	return combined{change: Change{Path: local.Path, Data: r.Merged, Mode: mode}}, nil
}
