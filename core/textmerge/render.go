package textmerge

import "bytes"

// markerLen is the length of a conflict marker's run of characters, git's
// default.
const markerLen = 7

// writer builds merged text and counts its lines, so that conflicts can
// say where their blocks landed.
type writer struct {
	buf   bytes.Buffer
	lines int // "\n" written so far
}

func (w *writer) copy(lines [][]byte) {
	for _, l := range lines {
		w.buf.Write(l)
	}
	w.lines += len(lines)
	if n := len(lines); n > 0 && !hasNewline(lines[n-1]) {
		w.lines--
	}
}

// copyTerminated copies lines inside a conflict block, where every line
// must end so that the next marker starts a line of its own; a last line
// without "\n" gets one, "\r\n" when the block uses CRLF.
func (w *writer) copyTerminated(lines [][]byte, crlf bool) {
	w.copy(lines)
	if n := len(lines); n > 0 && !hasNewline(lines[n-1]) {
		w.eol(crlf)
	}
}

func (w *writer) eol(crlf bool) {
	if crlf {
		w.buf.WriteByte('\r')
	}
	w.buf.WriteByte('\n')
	w.lines++
}

func (w *writer) marker(c byte, label string, crlf bool) {
	for k := 0; k < markerLen; k++ {
		w.buf.WriteByte(c)
	}
	if label != "" {
		w.buf.WriteByte(' ')
		w.buf.WriteString(label)
	}
	w.eol(crlf)
}

// render writes ours with the regions applied: a side's change where one
// side changed, a diff3-style conflict block where both did.
func render(b, o, t [][]byte, rs []region, opts MergeOptions) Result {
	var w writer
	var conflicts []Conflict
	i := 0 // next line of ours not yet written
	for _, r := range rs {
		w.copy(o[i:r.i1])
		switch r.mode {
		case modeOurs:
			w.copy(o[r.i1 : r.i1+r.n1])
		case modeTheirs:
			w.copy(t[r.i2 : r.i2+r.n2])
		default:
			conflicts = append(conflicts, conflictBlock(&w, b, o, t, r, opts))
		}
		i = r.i1 + r.n1
	}
	w.copy(o[i:])
	return Result{Merged: w.buf.Bytes(), Clean: len(conflicts) == 0, Conflicts: conflicts}
}

// conflictBlock writes one conflict block:
//
//	<<<<<<< OursLabel
//	ours' lines
//	||||||| BaseLabel
//	base's lines
//	=======
//	theirs' lines
//	>>>>>>> TheirsLabel
func conflictBlock(w *writer, b, o, t [][]byte, r region, opts MergeOptions) Conflict {
	crlf := needsCRLF(b, o, t, r)
	first := w.lines
	ours, base, theirs := o[r.i1:r.i1+r.n1], b[r.i0:r.i0+r.n0], t[r.i2:r.i2+r.n2]
	w.marker('<', opts.OursLabel, crlf)
	w.copyTerminated(ours, crlf)
	w.marker('|', opts.BaseLabel, crlf)
	w.copyTerminated(base, crlf)
	w.marker('=', "", crlf)
	w.copyTerminated(theirs, crlf)
	w.marker('>', opts.TheirsLabel, crlf)
	return Conflict{
		Merged: Span{Start: first + 1, Count: w.lines - first},
		Base:   Region{Span{r.i0 + 1, r.n0}, lineTexts(base)},
		Ours:   Region{Span{r.i1 + 1, r.n1}, lineTexts(ours)},
		Theirs: Region{Span{r.i2 + 1, r.n2}, lineTexts(theirs)},
	}
}

// Line-ending styles seen by eolStyle.
const (
	eolUnknown = -1
	eolLF      = 0
	eolCRLF    = 1
)

// eolStyle tells how line i of lines ends. A last line without "\n" takes
// the style of the line before it; a lone such line, or no line at all,
// tells nothing.
func eolStyle(lines [][]byte, i int) int {
	crlf := func(l []byte) int {
		if len(l) > 1 && l[len(l)-2] == '\r' {
			return eolCRLF
		}
		return eolLF
	}
	switch {
	case i < len(lines)-1:
		return crlf(lines[i])
	case len(lines) == 0:
		return eolUnknown
	case hasNewline(lines[i]):
		return crlf(lines[i])
	case i == 0:
		return eolUnknown
	}
	return crlf(lines[i-1])
}

// needsCRLF decides, as git does, whether the markers of a conflict block
// (and a missing last "\n" inside it) are CRLF: only when base's first
// line ends in CRLF and neither ours nor theirs, at the line just before
// the block (or their first line), ends in a bare LF. A file that is CRLF
// throughout gets CRLF markers; an LF or mixed one gets LF markers.
func needsCRLF(b, o, t [][]byte, r region) bool {
	at := func(i int) int {
		if i > 0 {
			return i - 1
		}
		return 0
	}
	style := eolStyle(o, at(r.i1))
	if style != eolLF {
		style = eolStyle(t, at(r.i2))
	}
	if style != eolLF {
		style = eolStyle(b, 0)
	}
	return style == eolCRLF
}
