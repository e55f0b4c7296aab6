package textmerge

import (
	"bytes"
	"testing"
)

// hasMarkerLine reports whether text has a line that starts like a
// conflict marker.
func hasMarkerLine(text []byte) bool {
	for _, l := range splitLines(text) {
		for _, m := range []string{"<<<<<<<", "|||||||", "=======", ">>>>>>>"} {
			if bytes.HasPrefix(l, []byte(m)) {
				return true
			}
		}
	}
	return false
}

// FuzzMerge checks what must hold for any bytes: Merge never panics; a
// clean merge has no conflict markers unless an input had them; a side
// merged with itself, or against an unchanged side, is that side; every
// conflict's spans lie inside the texts; and the unified diff of base to
// ours rebuilds ours.
func FuzzMerge(f *testing.F) {
	for _, c := range mergeCases(f) {
		f.Add([]byte(c.base), []byte(c.ours), []byte(c.theirs))
	}
	f.Add([]byte("a\x00"), []byte("b\x00"), []byte("c"))
	f.Add([]byte("<<<<<<< x\n"), []byte("=======\n"), []byte(">>>>>>> y\n"))
	f.Fuzz(func(t *testing.T, base, ours, theirs []byte) {
		res, err := Merge(base, ours, theirs, gitLabels)
		if err != nil {
			t.Fatal(err)
		}
		if res.Clean != (len(res.Conflicts) == 0) && !res.Binary {
			t.Fatalf("Clean=%v with %d conflicts", res.Clean, len(res.Conflicts))
		}
		if res.Clean && hasMarkerLine(res.Merged) &&
			!hasMarkerLine(base) && !hasMarkerLine(ours) && !hasMarkerLine(theirs) {
			t.Fatalf("a clean merge has a marker line:\n%q", res.Merged)
		}
		if !res.Clean && !res.Binary && !hasMarkerLine(res.Merged) {
			t.Fatalf("a conflicted merge has no markers:\n%q", res.Merged)
		}
		checkSpans(t, res, base, ours, theirs)
		for _, c := range []struct {
			name            string
			b, o, th, wants []byte
		}{
			{"a side merged with itself", base, ours, ours, ours},
			{"ours against an unchanged theirs", base, ours, base, ours},
			{"theirs against an unchanged ours", base, base, theirs, theirs},
		} {
			r, _ := Merge(c.b, c.o, c.th, gitLabels)
			if !r.Clean || !bytes.Equal(r.Merged, c.wants) {
				t.Fatalf("%s: clean=%v merged %q, want %q", c.name, r.Clean, r.Merged, c.wants)
			}
		}
		d, err := Unified(base, ours, DefaultContext)
		if err != nil {
			t.Fatal(err)
		}
		if d.Binary {
			return
		}
		if got, err := applyHunks(base, d); err != nil || !bytes.Equal(got, ours) {
			t.Fatalf("the hunks of base to ours do not rebuild ours (err %v)", err)
		}
	})
}

// checkSpans checks that each conflict's spans lie inside their texts and
// that its lines are the lines there.
func checkSpans(t *testing.T, res Result, base, ours, theirs []byte) {
	t.Helper()
	merged := splitLines(res.Merged)
	inside := func(what string, s Span, lines [][]byte) {
		if s.Start < 1 || s.Count < 0 || s.Start-1+s.Count > len(lines) {
			t.Fatalf("%s span %+v outside %d lines", what, s, len(lines))
		}
	}
	for _, c := range res.Conflicts {
		inside("merged", c.Merged, merged)
		for _, r := range []struct {
			what string
			reg  Region
			text []byte
		}{{"base", c.Base, base}, {"ours", c.Ours, ours}, {"theirs", c.Theirs, theirs}} {
			lines := splitLines(r.text)
			inside(r.what, r.reg.Span, lines)
			want := lineTexts(lines[r.reg.Start-1 : r.reg.Start-1+r.reg.Count])
			if len(want) != len(r.reg.Lines) {
				t.Fatalf("%s lines %q, want %q", r.what, r.reg.Lines, want)
			}
			for i := range want {
				if want[i] != r.reg.Lines[i] {
					t.Fatalf("%s lines %q, want %q", r.what, r.reg.Lines, want)
				}
			}
		}
	}
}
