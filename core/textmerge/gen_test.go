package textmerge

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// scaleEnv multiplies every property's default number of rapid checks, as
// in the props package (nightly runs set it to 10 or more).
const scaleEnv = "SWARMOPS_PROPS_SCALE"

// explicitChecks records whether -rapid.checks was given; it then wins.
var explicitChecks bool

func TestMain(m *testing.M) {
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			explicitChecks = true
		}
	})
	os.Exit(m.Run())
}

// check runs prop with defChecks times the scale knob rapid checks, unless
// -rapid.checks was given. A malformed knob fails the test: a run that fell
// back to 1 would believe it had tested more than it did.
func check(t *testing.T, defChecks int, prop func(*rapid.T)) {
	t.Helper()
	scale := 1
	if v := os.Getenv(scaleEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			t.Fatalf("%s=%q: want a positive integer (a multiplier of each property's default rapid checks)", scaleEnv, v)
		}
		scale = n
	}
	if !explicitChecks {
		if err := flag.Set("rapid.checks", strconv.Itoa(defChecks*scale)); err != nil {
			t.Fatalf("setting -rapid.checks: %v", err)
		}
	}
	rapid.Check(t, prop)
}

// lineWords is the small line alphabet of the generated texts. Few distinct
// lines make equal lines, ambiguous alignments and overlapping edits
// common, which is where merges go wrong. The brace and the "func" line
// give hunk headings something to find.
var lineWords = []string{"a", "b", "c", "d", "e", "", "}", "func f() {"}

// textShape says how a generated text ends its lines.
type textShape struct {
	crlf      int // 0: LF only, 1: CRLF only, 2: each line drawn
	lastNoEOL bool
}

func drawShape(t *rapid.T, label string) textShape {
	return textShape{crlf: rapid.IntRange(0, 2).Draw(t, label+" crlf"), lastNoEOL: drawNoEOL(t, label)}
}

func drawNoEOL(t *rapid.T, label string) bool {
	return rapid.IntRange(0, 5).Draw(t, label+" no final newline") == 0
}

// drawLine draws one line, terminated as the shape says. Now and then it is
// a line of its own ("x" and a number), which the other texts are unlikely
// to share: such lines steer xdiff's cleanup of unmatched lines.
func drawLine(t *rapid.T, label string, shape textShape) []byte {
	w := rapid.SampledFrom(lineWords).Draw(t, label)
	if rapid.IntRange(0, 5).Draw(t, label+" own") == 0 {
		w = fmt.Sprintf("x%d", rapid.IntRange(0, 99).Draw(t, label+" number"))
	}
	eol := "\n"
	if shape.crlf == 1 || shape.crlf == 2 && rapid.Bool().Draw(t, label+" crlf") {
		eol = "\r\n"
	}
	return []byte(w + eol)
}

func drawText(t *rapid.T, label string, shape textShape, maxLines int) [][]byte {
	n := rapid.IntRange(0, maxLines).Draw(t, label+" lines")
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = drawLine(t, fmt.Sprintf("%s line %d", label, i), shape)
	}
	return lines
}

// lineEdit is one edit of a line list: insert a line before at, delete the
// line at, or replace it.
type lineEdit struct {
	kind int // 0 insert, 1 delete, 2 replace
	at   int
	line []byte
}

// drawEdits draws up to max edits to apply, in order, to a text of n lines.
func drawEdits(t *rapid.T, label string, n int, shape textShape, max int) []lineEdit {
	k := rapid.IntRange(0, max).Draw(t, label+" edits")
	edits := make([]lineEdit, k)
	for i := range edits {
		l := fmt.Sprintf("%s edit %d", label, i)
		e := lineEdit{kind: rapid.IntRange(0, 2).Draw(t, l+" kind")}
		if n == 0 {
			e.kind = 0
		}
		if e.kind == 0 {
			e.at = rapid.IntRange(0, n).Draw(t, l+" at")
		} else {
			e.at = rapid.IntRange(0, n-1).Draw(t, l+" at")
		}
		if e.kind != 1 {
			e.line = drawLine(t, l+" line", shape)
		}
		switch e.kind {
		case 0:
			n++
		case 1:
			n--
		}
		edits[i] = e
	}
	return edits
}

func applyEdits(lines [][]byte, edits []lineEdit) [][]byte {
	out := append([][]byte(nil), lines...)
	for _, e := range edits {
		switch e.kind {
		case 0:
			out = append(out[:e.at], append([][]byte{e.line}, out[e.at:]...)...)
		case 1:
			out = append(out[:e.at], out[e.at+1:]...)
		default:
			out[e.at] = e.line
		}
	}
	return out
}

// finish joins lines into a text, dropping the final line break if noEOL.
func finish(lines [][]byte, noEOL bool) []byte {
	text := join(lines)
	if noEOL && len(text) > 0 && text[len(text)-1] == '\n' {
		text = text[:len(text)-1]
		if len(text) > 0 && text[len(text)-1] == '\r' {
			text = text[:len(text)-1]
		}
	}
	return text
}

// drawTriple draws a base and two derived versions. Some edits are drawn
// once and applied to both sides, so identical changes are common; each
// side then gets edits of its own.
func drawTriple(t *rapid.T) (base, ours, theirs []byte) {
	shape := drawShape(t, "base")
	b := drawText(t, "base", shape, 12)
	shared := drawEdits(t, "shared", len(b), shape, 2)
	common := applyEdits(b, shared)
	o := applyEdits(common, drawEdits(t, "ours", len(common), shape, 3))
	th := applyEdits(common, drawEdits(t, "theirs", len(common), shape, 3))
	return finish(b, shape.lastNoEOL), finish(o, drawNoEOL(t, "ours")), finish(th, drawNoEOL(t, "theirs"))
}

// drawPair draws a text and an edited version of it.
func drawPair(t *rapid.T) (old, new []byte) {
	shape := drawShape(t, "old")
	a := drawText(t, "old", shape, 30)
	b := applyEdits(a, drawEdits(t, "new", len(a), shape, 6))
	return finish(a, shape.lastNoEOL), finish(b, drawNoEOL(t, "new"))
}
