package textmerge

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

var gitLabels = MergeOptions{OursLabel: "ours", BaseLabel: "base", TheirsLabel: "theirs"}

type mergeCase struct {
	name               string
	base, ours, theirs string
	want               string
	clean              bool
}

// mergeCases are the behaviours the merge promises, each with its exact
// output: the cases of testdata/merge.txt.
func mergeCases(tb testing.TB) []mergeCase {
	tb.Helper()
	var out []mergeCase
	for _, c := range readCases(tb, "merge.txt", "base", "ours", "theirs", "clean", "conflict") {
		want, clean := c.fields["clean"]
		conflict, conflicted := c.fields["conflict"]
		if clean == conflicted {
			tb.Fatalf("%s: a case gives its merged text as clean or as conflict, once", c.at)
		}
		if conflicted {
			want = conflict
		}
		out = append(out, mergeCase{name: c.name, base: c.fields["base"], ours: c.fields["ours"],
			theirs: c.fields["theirs"], want: want, clean: clean})
	}
	return out
}

func TestMergeCases(t *testing.T) {
	var g *gitRunner
	if _, err := exec.LookPath("git"); err == nil {
		g = newGit(t)
	} else {
		t.Log("git is not on PATH: the cases are checked against their expected outputs only")
	}
	for _, c := range mergeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			base, ours, theirs := []byte(c.base), []byte(c.ours), []byte(c.theirs)
			res, err := Merge(base, ours, theirs, gitLabels)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Merged) != c.want || res.Clean != c.clean {
				t.Errorf("Merge(%q, %q, %q):\n got %q clean=%v\nwant %q clean=%v",
					c.base, c.ours, c.theirs, res.Merged, res.Clean, c.want, c.clean)
			}
			if res.Clean != (len(res.Conflicts) == 0) {
				t.Errorf("Clean=%v with %d conflicts", res.Clean, len(res.Conflicts))
			}
			if g == nil {
				return
			}
			want, conflicted := g.mergeFile(t, base, ours, theirs)
			if !bytes.Equal(res.Merged, want) || conflicted == res.Clean {
				t.Errorf("git merge-file disagrees:\n got %q clean=%v\n git %q clean=%v",
					res.Merged, res.Clean, want, !conflicted)
			}
		})
	}
}

func TestConflictsDescribeEachSideAndTheMarkerBlock(t *testing.T) {
	base := "a\nb\nc\nd\ne\nf\n"
	ours := "a\nc\nd\ne\nF1\nF2\n"
	theirs := "a\nB\nc\nd\ne\nG\n"
	res, err := Merge([]byte(base), []byte(ours), []byte(theirs), gitLabels)
	if err != nil {
		t.Fatal(err)
	}
	want := []Conflict{
		{
			Merged: Span{Start: 2, Count: 6},
			Base:   Region{Span{2, 1}, []string{"b"}},
			Ours:   Region{Span{2, 0}, []string{}},
			Theirs: Region{Span{2, 1}, []string{"B"}},
		},
		{
			Merged: Span{Start: 11, Count: 8},
			Base:   Region{Span{6, 1}, []string{"f"}},
			Ours:   Region{Span{5, 2}, []string{"F1", "F2"}},
			Theirs: Region{Span{6, 1}, []string{"G"}},
		},
	}
	got, _ := json.Marshal(res.Conflicts)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Fatalf("conflicts:\n got %s\nwant %s\nmerged:\n%s", got, exp, res.Merged)
	}
	lines := strings.Split(string(res.Merged), "\n")
	for _, c := range res.Conflicts {
		first, last := lines[c.Merged.Start-1], lines[c.Merged.Start+c.Merged.Count-2]
		if first != "<<<<<<< ours" || last != ">>>>>>> theirs" {
			t.Errorf("span %+v covers %q .. %q, want the marker lines", c.Merged, first, last)
		}
	}
	if !strings.Contains(string(mustJSON(t, res)), `"ours":{"start":2,"count":0,"lines":[]}`) {
		t.Errorf("JSON form: %s", mustJSON(t, res))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEmptyLabelsGiveBareMarkers(t *testing.T) {
	res, err := Merge([]byte("a\n"), []byte("b\n"), []byte("c\n"), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "<<<<<<<\nb\n|||||||\na\n=======\nc\n>>>>>>>\n"
	if string(res.Merged) != want {
		t.Fatalf("got %q, want %q", res.Merged, want)
	}
}

func TestALabelWithALineBreakIsABadOption(t *testing.T) {
	for _, opts := range []MergeOptions{{OursLabel: "a\nb"}, {BaseLabel: "x\r"}, {TheirsLabel: "\n"}} {
		_, err := Merge(nil, nil, nil, opts)
		if !errors.Is(err, ErrBadOption) {
			t.Errorf("Merge with %+v: err %v, want ErrBadOption", opts, err)
		}
	}
}

func TestMergedTextNeverAliasesTheInputs(t *testing.T) {
	ours, theirs := []byte("a\n"), []byte("a\n")
	for _, in := range [][3][]byte{{ours, ours, theirs}, {theirs, ours, theirs}, {ours, theirs, ours}} {
		res, _ := Merge(in[0], in[1], in[2], gitLabels)
		res.Merged[0] = 'X'
		if ours[0] != 'a' || theirs[0] != 'a' {
			t.Fatal("writing into Result.Merged changed an input")
		}
	}
}

func TestIsBinaryFollowsGitsRule(t *testing.T) {
	nulAt := func(i int) []byte {
		b := bytes.Repeat([]byte("x"), 9000)
		b[i] = 0
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		want bool
	}{
		{"empty content is text", nil, false},
		{"plain text is text", []byte("hello\nworld\n"), false},
		{"invalid UTF-8 without NUL is text", []byte{0xff, 0xfe, 'a', '\n'}, false},
		{"a NUL byte makes it binary", []byte("a\x00b"), true},
		{"a NUL at byte 8000 is seen", nulAt(7999), true},
		{"a NUL past the first 8000 bytes is not seen", nulAt(8000), false},
	} {
		if got := IsBinary(c.data); got != c.want {
			t.Errorf("%s: IsBinary = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBinaryContentMergesOnlyPerFile(t *testing.T) {
	bin := func(s string) []byte { return append([]byte{0}, s...) }
	base, ours, theirs := bin("base"), bin("ours"), bin("theirs")
	for _, c := range []struct {
		name               string
		base, ours, theirs []byte
		want               []byte
		clean              bool
	}{
		{"only ours changed: ours wins", base, ours, base, ours, true},
		{"only theirs changed: theirs wins", base, base, theirs, theirs, true},
		{"the same change on both sides is clean", base, ours, ours, ours, true},
		{"different changes conflict without markers", base, ours, theirs, nil, false},
		{"a text base with binary sides still merges per file", []byte("a\n"), ours, theirs, nil, false},
	} {
		res, err := Merge(c.base, c.ours, c.theirs, gitLabels)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Binary || res.Clean != c.clean || !bytes.Equal(res.Merged, c.want) || len(res.Conflicts) != 0 {
			t.Errorf("%s: got %+v", c.name, res)
		}
	}
}
