package textmerge

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// ErrBadOption is returned for a malformed option, such as a conflict
// label that would break its marker line. Input texts are never an error:
// any bytes are valid input.
var ErrBadOption = errors.New("textmerge: bad option")

// MergeOptions are the labels written after the conflict markers, as
// `git merge-file -L ours -L base -L theirs` takes them. An empty label
// gives a bare marker.
type MergeOptions struct {
	OursLabel   string
	BaseLabel   string
	TheirsLabel string
}

func (o MergeOptions) validate() error {
	for _, l := range []string{o.OursLabel, o.BaseLabel, o.TheirsLabel} {
		if strings.ContainsAny(l, "\r\n") {
			return fmt.Errorf("%w: conflict label %q holds a line break", ErrBadOption, l)
		}
	}
	return nil
}

// Result is the outcome of Merge.
type Result struct {
	// Merged is the merged text: clean, or with conflict markers when
	// Conflicts is not empty. It never aliases the inputs. It is nil for a
	// binary conflict, where there is no sensible merged content.
	Merged []byte `json:"-"`
	// Clean reports a merge without conflicts. For text it is exactly
	// len(Conflicts) == 0; a binary conflict has no Conflicts entries.
	Clean bool `json:"clean"`
	// Binary reports that an input was binary (see IsBinary), so the merge
	// was taken per file: clean only when at most one side changed, or both
	// made the same change.
	Binary bool `json:"binary,omitempty"`
	// Conflicts lists the conflict blocks of Merged, in order.
	Conflicts []Conflict `json:"conflicts,omitempty"`
}

// Conflict is one conflict block: where it sits in the merged text and what
// each of base, ours and theirs has there.
type Conflict struct {
	// Merged spans the block in Result.Merged, from its "<<<<<<<" line to
	// its ">>>>>>>" line.
	Merged Span   `json:"merged"`
	Base   Region `json:"base"`
	Ours   Region `json:"ours"`
	Theirs Region `json:"theirs"`
}

// Span is a run of lines. Start is 1-based; an empty span (Count 0) sits
// just before line Start, so Start runs up to the line count plus one.
type Span struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// Region is a span of one input and its lines, each without its "\n".
type Region struct {
	Span
	Lines []string `json:"lines"`
}

// Merge merges the changes from base to ours and from base to theirs, with
// the semantics of `git merge-file --diff3` (see the package doc). Its only
// error is ErrBadOption.
func Merge(base, ours, theirs []byte, opts MergeOptions) (Result, error) {
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	if IsBinary(base) || IsBinary(ours) || IsBinary(theirs) {
		return mergeBinary(base, ours, theirs), nil
	}
	b, o, t := splitLines(base), splitLines(ours), splitLines(theirs)
	return mergeScripts(b, o, t, diffLines(b, o), diffLines(b, t), opts), nil
}

// mergeBinary resolves a merge per file, the only way binary content
// merges.
func mergeBinary(base, ours, theirs []byte) Result {
	switch {
	case bytes.Equal(ours, theirs), bytes.Equal(base, theirs):
		return Result{Merged: bytes.Clone(ours), Clean: true, Binary: true}
	case bytes.Equal(base, ours):
		return Result{Merged: bytes.Clone(theirs), Clean: true, Binary: true}
	}
	return Result{Binary: true}
}

// Merge modes of a region, xdiff's numbering.
const (
	modeConflict = 0
	modeOurs     = 1
	modeTheirs   = 2
)

// region is one stretch of the result that differs from ours-as-is or
// conflicts: base lines [i0, i0+n0), ours [i1, i1+n1), theirs [i2, i2+n2).
type region struct {
	mode       int
	i0, i1, i2 int
	n0, n1, n2 int
}

// mergeScripts merges with the two edit scripts already computed, x1 from
// base b to ours o, x2 from b to theirs t. Tests also feed it git's own
// scripts, so that the merge rules are checked apart from the diff.
func mergeScripts(b, o, t [][]byte, x1, x2 []change, opts MergeOptions) Result {
	switch {
	case len(x1) == 0:
		return Result{Merged: join(t), Clean: true}
	case len(x2) == 0:
		return Result{Merged: join(o), Clean: true}
	}
	return render(b, o, t, regions(o, t, len(b), x1, x2), opts)
}

// regions walks both scripts in base order. A change of one side that ends
// strictly before the other side's next change begins is taken alone.
// Changes that overlap or touch (one ends where the other begins, even as
// an insertion at that point) conflict, unless they are the same change.
// Regions that touch in ours or theirs are fused, and a fusion of
// different modes is a conflict. This is xdiff's "eager" level, the one
// git uses for diff3-style output.
func regions(o, t [][]byte, nb int, x1, x2 []change) []region {
	var out []region
	add := func(r region) {
		if k := len(out) - 1; k >= 0 {
			m := &out[k]
			if r.i1 <= m.i1+m.n1 || r.i2 <= m.i2+m.n2 {
				if r.mode != m.mode {
					m.mode = modeConflict
				}
				m.n0 = r.i0 + r.n0 - m.i0
				m.n1 = r.i1 + r.n1 - m.i1
				m.n2 = r.i2 + r.n2 - m.i2
				return
			}
		}
		out = append(out, r)
	}
	p, q := 0, 0
	for p < len(x1) && q < len(x2) {
		c1, c2 := x1[p], x2[q]
		if c1.a+c1.del < c2.a {
			add(region{mode: modeOurs, i0: c1.a, n0: c1.del, i1: c1.b, n1: c1.ins, i2: c2.b - c2.a + c1.a, n2: c1.del})
			p++
			continue
		}
		if c2.a+c2.del < c1.a {
			add(region{mode: modeTheirs, i0: c2.a, n0: c2.del, i1: c1.b - c1.a + c2.a, n1: c2.del, i2: c2.b, n2: c2.ins})
			q++
			continue
		}
		if !sameChange(o, t, c1, c2) {
			add(overlap(c1, c2))
		}
		e1, e2 := c1.a+c1.del, c2.a+c2.del
		if e1 >= e2 {
			q++
		}
		if e2 >= e1 {
			p++
		}
	}
	for ; p < len(x1); p++ {
		c := x1[p]
		add(region{mode: modeOurs, i0: c.a, n0: c.del, i1: c.b, n1: c.ins, i2: c.a + len(t) - nb, n2: c.del})
	}
	for ; q < len(x2); q++ {
		c := x2[q]
		add(region{mode: modeTheirs, i0: c.a, n0: c.del, i1: c.a + len(o) - nb, n1: c.del, i2: c.b, n2: c.ins})
	}
	return out
}

// sameChange reports whether both sides replaced the same base lines with
// the same lines.
func sameChange(o, t [][]byte, c1, c2 change) bool {
	if c1.a != c2.a || c1.del != c2.del || c1.ins != c2.ins {
		return false
	}
	for k := 0; k < c1.ins; k++ {
		if !bytes.Equal(o[c1.b+k], t[c2.b+k]) {
			return false
		}
	}
	return true
}

// overlap is the conflict region covering two overlapping changes: the
// union of their base ranges, and in each side that range's image.
func overlap(c1, c2 change) region {
	off := c1.a - c2.a
	ffo := off + c1.del - c2.del
	r := region{mode: modeConflict, i0: c1.a, i1: c1.b, i2: c2.b}
	if off > 0 {
		r.i0 -= off
		r.i1 -= off
	} else {
		r.i2 += off
	}
	r.n0 = c1.a + c1.del - r.i0
	r.n1 = c1.b + c1.ins - r.i1
	r.n2 = c2.b + c2.ins - r.i2
	if ffo < 0 {
		r.n0 -= ffo
		r.n1 -= ffo
	} else {
		r.n2 += ffo
	}
	return r
}

func join(lines [][]byte) []byte {
	out := []byte{}
	for _, l := range lines {
		out = append(out, l...)
	}
	return out
}
