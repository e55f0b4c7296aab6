package textmerge

import (
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// change is one entry of a line edit script: old lines [a, a+del) are
// replaced by new lines [b, b+ins). Indexes are 0-based. Two changes of one
// script are always separated by at least one unchanged line.
type change struct {
	a, del int
	b, ins int
}

// side is one file of a two-way diff: its lines, an equivalence class per
// line (equal lines, equal class), and which lines the diff marks changed.
// chg has a false sentinel before the first and after the last line, so the
// sliding below never tests bounds by hand.
type side struct {
	lines [][]byte
	class []int32
	chg   []bool
}

func newSide(lines [][]byte) *side {
	return &side{lines: lines, class: make([]int32, len(lines)), chg: make([]bool, len(lines)+2)}
}

func (s *side) n() int             { return len(s.lines) }
func (s *side) changed(i int) bool { return s.chg[i+1] }
func (s *side) mark(i int, v bool) { s.chg[i+1] = v }
func (s *side) same(i, j int) bool { return s.class[i] == s.class[j] }

func (s *side) markRange(i, n int, v bool) {
	for k := i; k < i+n; k++ {
		s.mark(k, v)
	}
}

// maxRuneIDs is how many distinct values the library's rune alphabet can
// carry: every Unicode scalar value, which excludes the surrogate range. A
// variable so that tests can reach the fallback without a million lines.
var maxRuneIDs = int(utf8.MaxRune) + 1 - (0xE000 - 0xD800)

// idRune maps a dense id to a valid Unicode scalar value, skipping the
// surrogates, which would not survive the library's string round trips.
func idRune(id int) rune {
	if id < 0xD800 {
		return rune(id)
	}
	return rune(id + (0xE000 - 0xD800))
}

// diffLines computes the line edit script from a to b the way xdiff
// frames it: its cleanup of lines not worth matching, the library's Myers
// search on the rest, then its compaction, which slides every ambiguous
// group of changed lines to one canonical place.
func diffLines(a, b [][]byte) []change {
	sa, sb := newSide(a), newSide(b)
	markChanges(sa, sb, classify(sa, sb))
	compact(sa, sb)
	compact(sb, sa)
	return buildScript(sa, sb)
}

// classify gives equal lines of both sides the same class, numbered from
// 0 up, and returns the number of classes.
func classify(sa, sb *side) int {
	ids := make(map[string]int32, len(sa.lines)+len(sb.lines))
	for _, s := range []*side{sa, sb} {
		for i, l := range s.lines {
			id, ok := ids[string(l)]
			if !ok {
				id = int32(len(ids))
				ids[string(l)] = id
			}
			s.class[i] = id
		}
	}
	return len(ids)
}

// markChanges marks the lines of sa and sb that the diff does not keep.
// It prepares the problem as xdiff does: the common prefix and suffix are
// trimmed, and lines of the middle that cannot or should not match are
// marked changed up front (see keepLines). What is left goes to
// diffmatchpatch with each line coded as one rune.
//
// After the cleanup every line left has a match on the other side, so each
// rune stands for a line both sides share; the library's alphabet (about
// 1.1 million runes) then bounds only the number of distinct shared lines.
// A middle beyond it is marked changed whole: a correct but coarse diff,
// never a wrong one.
func markChanges(sa, sb *side, classes int) {
	pre := 0
	for pre < sa.n() && pre < sb.n() && sa.class[pre] == sb.class[pre] {
		pre++
	}
	suf := 0
	for suf < sa.n()-pre && suf < sb.n()-pre && sa.class[sa.n()-1-suf] == sb.class[sb.n()-1-suf] {
		suf++
	}
	ka, kb := keepLines(sa, sb, classes, pre, suf)
	ra, rb, ok := runeCode(sa, sb, classes, ka, kb)
	if ok {
		ok = markFromLibrary(sa, sb, ka, kb, ra, rb)
	}
	if !ok {
		sa.markRange(pre, sa.n()-pre-suf, true)
		sb.markRange(pre, sb.n()-pre-suf, true)
	}
}

// runeCode codes the kept lines ka of sa and kb of sb as runes, one per
// class. It fails when the classes outnumber the rune alphabet.
func runeCode(sa, sb *side, classes int, ka, kb []int) (ra, rb []rune, ok bool) {
	code := make([]rune, classes)
	for i := range code {
		code[i] = -1
	}
	next := 0
	coded := func(s *side, keep []int) ([]rune, bool) {
		out := make([]rune, len(keep))
		for k, i := range keep {
			c := s.class[i]
			if code[c] < 0 {
				if next >= maxRuneIDs {
					return nil, false
				}
				code[c] = idRune(next)
				next++
			}
			out[k] = code[c]
		}
		return out, true
	}
	if ra, ok = coded(sa, ka); !ok {
		return nil, nil, false
	}
	rb, ok = coded(sb, kb)
	return ra, rb, ok
}

// markFromLibrary runs diffmatchpatch on the coded lines, ra for the lines
// ka of sa and rb for kb of sb, and marks what it deletes and inserts. It
// checks the library's answer as it walks it: every kept run must pair
// equal lines and the runs must cover both sequences exactly. On any
// mismatch it reports false and the caller falls back to the coarse diff,
// so a library defect can cost diff quality but never correctness.
//
// DiffTimeout 0 makes the library deterministic and minimal: with a
// deadline it may cut the search short or take its non-minimal
// "half-match" shortcut, and a merge must not depend on the clock.
func markFromLibrary(sa, sb *side, ka, kb []int, ra, rb []rune) bool {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	i, j := 0, 0
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		n := utf8.RuneCountInString(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			if i+n > len(ra) || j+n > len(rb) {
				return false
			}
			for k := 0; k < n; k++ {
				if ra[i+k] != rb[j+k] {
					return false
				}
			}
			i, j = i+n, j+n
		case diffmatchpatch.DiffDelete:
			if i+n > len(ra) {
				return false
			}
			for ; n > 0; n, i = n-1, i+1 {
				sa.mark(ka[i], true)
			}
		case diffmatchpatch.DiffInsert:
			if j+n > len(rb) {
				return false
			}
			for ; n > 0; n, j = n-1, j+1 {
				sb.mark(kb[j], true)
			}
		}
	}
	return i == len(ra) && j == len(rb)
}

// buildScript turns the change marks of both sides into a script, in order.
func buildScript(sa, sb *side) []change {
	var out []change
	i, j := 0, 0
	for i < sa.n() || j < sb.n() {
		if !sa.changed(i) && !sb.changed(j) {
			i, j = i+1, j+1
			continue
		}
		c := change{a: i, b: j}
		for sa.changed(i) {
			i++
		}
		for sb.changed(j) {
			j++
		}
		c.del, c.ins = i-c.a, j-c.b
		out = append(out, c)
	}
	return out
}
