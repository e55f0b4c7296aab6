package textmerge

// Compaction makes a minimal diff canonical. A group of changed lines can
// often slide: deleting the second of two equal lines is the same edit as
// deleting the first. Which place a diff picks decides where a three-way
// merge sees the change, so it decides whether two edits overlap. The rules
// below are xdiff's (git's diff engine) without its optional indent
// heuristic, which git merge-file does not use either:
//
//   - every group slides up as far as it can, then down as far as it can,
//     absorbing any group it touches on the way, until it stops growing;
//   - a group that can move and that, somewhere in its range, sits level
//     with a changed group of the other file, is put at the last such place;
//   - any other movable group stays at its lowest place.

// group is a run of changed lines [start, end) of one side, or, when start
// equals end, the empty run just above line start.
type group struct{ start, end int }

// firstGroup is the (possibly empty) group at the top of s.
func (s *side) firstGroup() group {
	g := group{}
	for s.changed(g.end) {
		g.end++
	}
	return g
}

// nextGroup moves g to the following group. It reports false at the end of
// the file.
func (s *side) nextGroup(g *group) bool {
	if g.end == s.n() {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for s.changed(g.end) {
		g.end++
	}
	return true
}

// prevGroup moves g to the preceding group. It reports false at the top.
func (s *side) prevGroup(g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for s.changed(g.start - 1) {
		g.start--
	}
	return true
}

// slideDown moves g one line down when the line after it equals its first
// line, and absorbs a group it then touches. It reports whether it moved.
func (s *side) slideDown(g *group) bool {
	if g.end >= s.n() || !s.same(g.start, g.end) {
		return false
	}
	s.mark(g.start, false)
	s.mark(g.end, true)
	g.start++
	g.end++
	for s.changed(g.end) {
		g.end++
	}
	return true
}

// slideUp moves g one line up when the line before it equals its last
// line, and absorbs a group it then touches. It reports whether it moved.
func (s *side) slideUp(g *group) bool {
	if g.start == 0 || !s.same(g.start-1, g.end-1) {
		return false
	}
	g.start--
	g.end--
	s.mark(g.start, true)
	s.mark(g.end, false)
	for s.changed(g.start - 1) {
		g.start--
	}
	return true
}

// mustStep guards the lockstep walk of both sides' groups. Each side has
// exactly one group (maybe empty) per unchanged-line gap, so a step of one
// side always has a matching step on the other; a failure is a bug here,
// not a property of any input.
func mustStep(ok bool) {
	if !ok {
		panic("textmerge: group walk out of step")
	}
}

// compact applies the rules above to the changed groups of s, walking the
// groups of the other side o in step so that "level with a changed group of
// o" can be seen.
func compact(s, o *side) {
	g, og := s.firstGroup(), o.firstGroup()
	for {
		if g.end != g.start {
			compactGroup(s, o, &g, &og)
		}
		if !s.nextGroup(&g) {
			break
		}
		mustStep(o.nextGroup(&og))
	}
}

// compactGroup places one non-empty group of s; og is the group of o level
// with it and moves with it.
func compactGroup(s, o *side, g, og *group) {
	earliestEnd, endMatchingOther := 0, -1
	for {
		size := g.end - g.start
		endMatchingOther = -1
		for s.slideUp(g) {
			mustStep(o.prevGroup(og))
		}
		earliestEnd = g.end
		if og.end > og.start {
			endMatchingOther = g.end
		}
		for s.slideDown(g) {
			mustStep(o.nextGroup(og))
			if og.end > og.start {
				endMatchingOther = g.end
			}
		}
		if size == g.end-g.start {
			break
		}
	}
	if g.end == earliestEnd || endMatchingOther == -1 {
		return
	}
	for og.end == og.start {
		mustStep(s.slideUp(g))
		mustStep(o.prevGroup(og))
	}
}
