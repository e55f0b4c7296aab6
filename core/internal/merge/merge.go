// Package merge is the pure half of core's Land: a three-way merge over
// flattened trees (path → entry maps), with no store access, so it can be
// tested exhaustively without a store.
//
// The merge applies "theirs" (the change being landed) onto "head" (the
// target ref's head) relative to "base" (their nearest common ancestor).
// Only the paths theirs changed since base are decided; every other path
// keeps head's value. For each such path p:
//
//	head[p] == theirs[p]          keep  (already there, or both deleted it)
//	head[p] == base[p]            put theirs[p], or delete it
//	otherwise                     conflict
//
// The merge keeps its decisions so that, after a lost compare-and-swap, only
// the paths the target gained in the meantime are decided again
// (AdvanceHead); that is what makes a retry cost proportional to the race,
// not to the change.
package merge

import (
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core/objects"
)

// mergeOp is the decision for one path.
type mergeOp uint8

const (
	opKeep     mergeOp = iota // head already holds theirs' value
	opPut                     // write theirs' entry
	opDelete                  // delete the path
	opConflict                // head and theirs both changed it, differently
)

// Merge is a three-way merge in progress. The maps are owned by it.
type Merge struct {
	base, head, theirs map[string]objects.Entry
	paths              []string // sorted: the paths theirs changed since base
	inTheirs           map[string]bool
	decision           map[string]mergeOp
	dirs               map[string]int // for each directory read, the number of head files below it
}

// sameEntry reports whether two optional entries are the same file.
func sameEntry(a objects.Entry, aok bool, b objects.Entry, bok bool) bool {
	if aok != bok {
		return false
	}
	return !aok || (a.Mode == b.Mode && a.ID == b.ID)
}

// ChangedPaths lists, sorted, the paths whose entries differ between a and b.
func ChangedPaths(a, b map[string]objects.Entry) []string {
	var out []string
	for p, ea := range a {
		eb, ok := b[p]
		if !sameEntry(ea, true, eb, ok) {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// New decides every path theirs changed since base against head,
// given whole trees.
func New(base, head, theirs map[string]objects.Entry) *Merge {
	dirs := make(map[string]int)
	for p := range head {
		forEachDir(p, func(d string) { dirs[d]++ })
	}
	return NewAt(base, head, theirs, dirs)
}

// NewAt decides every path theirs changed since base against head,
// given only what the decisions read:
//
//   - base and theirs: at least every path where they differ (a path absent
//     from both counts as unchanged);
//   - head: its file at each of those paths and at each of their ancestor
//     directories, where it has one;
//   - dirs: for each of those paths, the number of head's files below it.
//
// Land builds these from the trees without flattening them, so
// a merge costs what the change touches, not what the tree holds.
func NewAt(base, head, theirs map[string]objects.Entry, dirs map[string]int) *Merge {
	m := &Merge{
		base:     base,
		head:     head,
		theirs:   theirs,
		paths:    ChangedPaths(base, theirs),
		decision: make(map[string]mergeOp),
		dirs:     dirs,
	}
	m.inTheirs = make(map[string]bool, len(m.paths))
	for _, p := range m.paths {
		m.inTheirs[p] = true
		m.decide(p)
	}
	return m
}

// decide (re)computes the decision for p, one of the paths theirs changed.
func (m *Merge) decide(p string) {
	b, bok := m.base[p]
	t, tok := m.theirs[p]
	h, hok := m.head[p]
	switch {
	case sameEntry(h, hok, t, tok):
		m.decision[p] = opKeep
	case sameEntry(h, hok, b, bok) && tok:
		m.decision[p] = opPut
	case sameEntry(h, hok, b, bok):
		m.decision[p] = opDelete
	default:
		m.decision[p] = opConflict
	}
}

// HeadEdit is one change of the target's head between two attempts.
type HeadEdit struct {
	Path   string
	Delete bool
	Entry  objects.Entry
	Had    bool // the old head had a file at Path (read by AdvanceHead only)
}

// Len returns how many paths theirs changed since base: the paths the
// merge decides.
func (m *Merge) Len() int { return len(m.paths) }

// AdvanceHead moves the merge onto a newer head that differs from the old
// one by edits, re-deciding only the edited paths that theirs also changed.
// It returns the number of paths re-merged (every edited path: each one is
// either re-decided or checked against theirs' directory layout).
func (m *Merge) AdvanceHead(edits []HeadEdit) int {
	for _, e := range edits {
		// had comes with the edit: m.head may hold only the paths the
		// merge reads (NewAt).
		had := e.Had
		if e.Delete {
			if had {
				delete(m.head, e.Path)
				forEachDir(e.Path, func(d string) { m.dirs[d]-- })
			}
		} else {
			m.head[e.Path] = e.Entry
			if !had {
				forEachDir(e.Path, func(d string) { m.dirs[d]++ })
			}
		}
		if m.inTheirs[e.Path] {
			m.decide(e.Path)
		}
	}
	return len(edits)
}

// Sides is what base, head and theirs hold at one path; a Has flag is
// false where that side has no file there.
type Sides struct {
	Base, Head, Theirs          objects.Entry
	HasBase, HasHead, HasTheirs bool
}

// Contested returns the three sides of p when head and theirs both changed
// p since base, differently: the conflicts a finer merge, of a file's
// mode (Mode) and content apart, may still resolve. It is false for every
// other path, and for a put that Result reports as a conflict only because
// it clashes with the tree's layout (a file where a directory is needed,
// or the reverse), which no merge of contents can resolve.
func (m *Merge) Contested(p string) (Sides, bool) {
	if m.decision[p] != opConflict || !m.inTheirs[p] {
		return Sides{}, false
	}
	var s Sides
	s.Base, s.HasBase = m.base[p]
	s.Head, s.HasHead = m.head[p]
	s.Theirs, s.HasTheirs = m.theirs[p]
	return s, true
}

// Mode merges the mode of a regular or executable file three ways, apart
// from its content, as git does: a side that left the base's mode takes
// the other side's, and sides that agree keep theirs. base is 0 where the
// base lacks the file, so two sides that add it with different modes
// conflict: ok is false, and mode is head's.
func Mode(base, head, theirs objects.Mode) (mode objects.Mode, ok bool) {
	switch {
	case head == theirs, theirs == base:
		return head, true
	case head == base:
		return theirs, true
	}
	return head, false
}

// resultEntry returns the merged value of path p.
func (m *Merge) resultEntry(p string) (objects.Entry, bool) {
	switch m.decision[p] {
	case opPut:
		e := m.theirs[p]
		return e, true
	case opDelete:
		return objects.Entry{}, false
	}
	e, ok := m.head[p]
	return e, ok
}

// Result lists the edits to apply to head, sorted by path, or the
// conflicting paths. A put is also a conflict when the merged tree would
// hold a file where it needs a directory (or the reverse), which neither
// side alone could have produced.
func (m *Merge) Result() (edits []HeadEdit, conflicts []string) {
	// adj[d] corrects dirs[d] for the files the decisions add or remove.
	adj := make(map[string]int)
	for _, p := range m.paths {
		_, had := m.head[p]
		switch m.decision[p] {
		case opPut:
			if !had {
				forEachDir(p, func(d string) { adj[d]++ })
			}
		case opDelete:
			if had {
				forEachDir(p, func(d string) { adj[d]-- })
			}
		}
	}
	for _, p := range m.paths {
		switch m.decision[p] {
		case opConflict:
			conflicts = append(conflicts, p)
		case opPut:
			clash := m.dirs[p]+adj[p] > 0
			forEachDir(p, func(d string) {
				if _, isFile := m.resultEntry(d); isFile {
					clash = true
				}
			})
			if clash {
				conflicts = append(conflicts, p)
				continue
			}
			edits = append(edits, HeadEdit{Path: p, Entry: m.theirs[p]})
		case opDelete:
			edits = append(edits, HeadEdit{Path: p, Delete: true})
		}
	}
	return edits, conflicts
}

// forEachDir calls f for every proper ancestor directory of the slash path p
// ("a" and "a/b" for "a/b/c").
func forEachDir(p string, f func(dir string)) {
	for i := strings.IndexByte(p, '/'); i >= 0; {
		f(p[:i])
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			return
		}
		i += 1 + j
	}
}
