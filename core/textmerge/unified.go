package textmerge

import (
	"bytes"
	"fmt"
	"strconv"
)

// DefaultContext is the number of unchanged lines shown around a change,
// git's default.
const DefaultContext = 3

// Op says what a line of a hunk does. Its values are the line prefixes of a
// unified diff.
type Op string

// Ops of a hunk's lines.
const (
	OpContext Op = " "
	OpDelete  Op = "-"
	OpInsert  Op = "+"
)

// Line is one line of a hunk.
type Line struct {
	Op Op `json:"op"`
	// Text is the line without its "\n".
	Text string `json:"text"`
	// NoNewline marks the last line of a file that has no "\n"; the text
	// form follows it with "\ No newline at end of file".
	NoNewline bool `json:"no_newline,omitempty"`
}

// Hunk is one hunk of a unified diff. The starts are what the header
// prints: the 1-based first line of the range, or, for an empty range, the
// line just before it (0 at the top of the file).
type Hunk struct {
	OldStart int `json:"old_start"`
	OldCount int `json:"old_count"`
	NewStart int `json:"new_start"`
	NewCount int `json:"new_count"`
	// Section is git's hunk heading: the nearest line above the hunk, in
	// the old text, that starts with a letter, "_" or "$", cut to 80 bytes
	// and with trailing white space removed.
	Section string `json:"section,omitempty"`
	Lines   []Line `json:"lines"`
}

// FileDiff is the difference between two versions of one file.
type FileDiff struct {
	// Binary reports that the versions differ and one of them is binary
	// (see IsBinary); there are then no hunks.
	Binary bool   `json:"binary,omitempty"`
	Hunks  []Hunk `json:"hunks"`
}

// Unified diffs oldText against newText by lines, with context unchanged
// lines around each change; changes closer than twice that share a hunk.
// The hunks are those `git diff --no-index -U<context>
// --no-indent-heuristic` prints, wherever the two diff engines pick the
// same alignment (see the package doc). A negative context is
// ErrBadOption.
func Unified(oldText, newText []byte, context int) (FileDiff, error) {
	if context < 0 {
		return FileDiff{}, fmt.Errorf("%w: negative diff context %d", ErrBadOption, context)
	}
	if IsBinary(oldText) || IsBinary(newText) {
		return FileDiff{Binary: !bytes.Equal(oldText, newText), Hunks: []Hunk{}}, nil
	}
	a, b := splitLines(oldText), splitLines(newText)
	return FileDiff{Hunks: buildHunks(a, b, diffLines(a, b), context)}, nil
}

// buildHunks groups the script into hunks with their context.
func buildHunks(a, b [][]byte, script []change, ctx int) []Hunk {
	hunks := []Hunk{}
	sec := sectionFinder{searched: -1}
	for k := 0; k < len(script); {
		last := k
		for last+1 < len(script) && script[last+1].a-(script[last].a+script[last].del) <= 2*ctx {
			last++
		}
		fc, lc := script[k], script[last]
		s1, s2 := max(fc.a-ctx, 0), max(fc.b-ctx, 0)
		tail := min(ctx, len(a)-(lc.a+lc.del), len(b)-(lc.b+lc.ins))
		e1, e2 := lc.a+lc.del+tail, lc.b+lc.ins+tail
		h := Hunk{
			OldStart: headerStart(s1, e1-s1), OldCount: e1 - s1,
			NewStart: headerStart(s2, e2-s2), NewCount: e2 - s2,
			Section: sec.find(a, s1-1),
		}
		h.Lines = appendLines(h.Lines, OpContext, b[s2:fc.b])
		at := fc.b
		for _, c := range script[k : last+1] {
			h.Lines = appendLines(h.Lines, OpContext, b[at:c.b])
			h.Lines = appendLines(h.Lines, OpDelete, a[c.a:c.a+c.del])
			h.Lines = appendLines(h.Lines, OpInsert, b[c.b:c.b+c.ins])
			at = c.b + c.ins
		}
		h.Lines = appendLines(h.Lines, OpContext, b[at:e2])
		hunks = append(hunks, h)
		k = last + 1
	}
	return hunks
}

func headerStart(s, count int) int {
	if count == 0 {
		return s
	}
	return s + 1
}

func appendLines(out []Line, op Op, lines [][]byte) []Line {
	for _, l := range lines {
		out = append(out, Line{Op: op, Text: lineText(l), NoNewline: !hasNewline(l)})
	}
	return out
}

// sectionLen is the longest heading git keeps.
const sectionLen = 80

// sectionFinder finds hunk headings the way git does: it searches upward
// from the line above the hunk, but only as far as the line above the
// previous hunk, and keeps the previous heading when it finds none.
type sectionFinder struct {
	searched int // the line above the previous hunk; -1 before the first
	heading  string
}

func (f *sectionFinder) find(a [][]byte, from int) string {
	for l := from; l > f.searched && l >= 0; l-- {
		if h, ok := heading(a[l]); ok {
			f.heading = h
			break
		}
	}
	f.searched = from
	return f.heading
}

// heading is git's default test for a function line: it starts with an
// ASCII letter, "_" or "$".
func heading(line []byte) (string, bool) {
	if len(line) == 0 {
		return "", false
	}
	c := line[0]
	if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$') {
		return "", false
	}
	if len(line) > sectionLen {
		line = line[:sectionLen]
	}
	for len(line) > 0 && isCSpace(line[len(line)-1]) {
		line = line[:len(line)-1]
	}
	return string(line), true
}

// isCSpace is C's isspace in the C locale.
func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// headerMax is the size of git's hunk header buffer, newline included; a
// heading is cut to fit it.
const headerMax = 128

// Header is the hunk's "@@ -a,b +c,d @@ heading" line, without its "\n".
// A count of 1 is left out, as git does.
func (h Hunk) Header() string {
	s := "@@ -" + headerRange(h.OldStart, h.OldCount) + " +" + headerRange(h.NewStart, h.NewCount) + " @@"
	if h.Section != "" {
		sec := h.Section
		if room := headerMax - len(s) - 2; len(sec) > room {
			sec = sec[:room]
		}
		s += " " + sec
	}
	return s
}

func headerRange(start, count int) string {
	if count == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// Format renders d as the body of a git diff: the "---" and "+++" lines
// with the given names (such as "a/path", or "/dev/null"), then each hunk;
// for a binary difference, git's "Binary files ... differ" line. An empty
// diff renders as nothing.
func (d FileDiff) Format(oldName, newName string) []byte {
	var buf bytes.Buffer
	if d.Binary {
		fmt.Fprintf(&buf, "Binary files %s and %s differ\n", oldName, newName)
		return buf.Bytes()
	}
	if len(d.Hunks) == 0 {
		return nil
	}
	fmt.Fprintf(&buf, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range d.Hunks {
		buf.WriteString(h.Header())
		buf.WriteByte('\n')
		for _, l := range h.Lines {
			buf.WriteString(string(l.Op))
			buf.WriteString(l.Text)
			buf.WriteByte('\n')
			if l.NoNewline {
				buf.WriteString("\\ No newline at end of file\n")
			}
		}
	}
	return buf.Bytes()
}
