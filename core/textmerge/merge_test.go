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
// output. Where git is installed, each is also checked against
// `git merge-file -p --diff3`.
var mergeCases = []mergeCase{
	{
		name: "an append at the end and an insert at the top merge cleanly",
		base: "a\nb\nc\n", ours: "top\na\nb\nc\n", theirs: "a\nb\nc\nend\n",
		want: "top\na\nb\nc\nend\n", clean: true,
	},
	{
		name: "an append and an insert around a one-line file merge cleanly",
		base: "a\n", ours: "top\na\n", theirs: "a\nend\n",
		want: "top\na\nend\n", clean: true,
	},
	{
		name: "edits one line apart merge cleanly",
		base: "a\nb\nc\nd\ne\n", ours: "a\nB\nc\nd\ne\n", theirs: "a\nb\nc\nD\ne\n",
		want: "a\nB\nc\nD\ne\n", clean: true,
	},
	{
		name: "the identical change on both sides merges cleanly",
		base: "a\nb\nc\n", ours: "a\nB\nc\n", theirs: "a\nB\nc\n",
		want: "a\nB\nc\n", clean: true,
	},
	{
		name: "the identical change beside a change of one side merges cleanly",
		base: "a\nb\nc\nd\ne\n", ours: "a\nB\nc\nd\nE\n", theirs: "a\nB\nc\nd\ne\n",
		want: "a\nB\nc\nd\nE\n", clean: true,
	},
	{
		name: "a delete against an edit of the same line conflicts",
		base: "a\nb\nc\n", ours: "a\nc\n", theirs: "a\nB\nc\n",
		want:  "a\n<<<<<<< ours\n||||||| base\nb\n=======\nB\n>>>>>>> theirs\nc\n",
		clean: false,
	},
	{
		name: "edits of adjacent lines conflict, as in git",
		base: "a\nb\nc\nd\n", ours: "a\nB\nc\nd\n", theirs: "a\nb\nC\nd\n",
		want:  "a\n<<<<<<< ours\nB\nc\n||||||| base\nb\nc\n=======\nb\nC\n>>>>>>> theirs\nd\n",
		clean: false,
	},
	{
		name: "different inserts at one place conflict",
		base: "a\nb\n", ours: "a\nX\nb\n", theirs: "a\nY\nb\n",
		want:  "a\n<<<<<<< ours\nX\n||||||| base\n=======\nY\n>>>>>>> theirs\nb\n",
		clean: false,
	},
	{
		name: "an append after a last line without newline merges with an edit elsewhere",
		base: "x\ny\na\nb", ours: "x\ny\na\nb\nc", theirs: "X\ny\na\nb",
		want: "X\ny\na\nb\nc", clean: true,
	},
	{
		name: "a conflict on a last line without newline ends its sides with one",
		base: "a\nb", ours: "a\nB", theirs: "a\nC",
		want:  "a\n<<<<<<< ours\nB\n||||||| base\nb\n=======\nC\n>>>>>>> theirs\n",
		clean: false,
	},
	{
		name: "both sides adding the final newline merge cleanly",
		base: "a", ours: "a\n", theirs: "a\n",
		want: "a\n", clean: true,
	},
	{
		name: "dropping the final newline merges with an edit elsewhere",
		base: "a\nb\nc\nd\n", ours: "a\nb\nc\nd", theirs: "A\nb\nc\nd\n",
		want: "A\nb\nc\nd", clean: true,
	},
	{
		name: "CRLF lines merge cleanly and keep their endings",
		base: "a\r\nb\r\nc\r\nd\r\ne\r\n", ours: "a\r\nB\r\nc\r\nd\r\ne\r\n", theirs: "a\r\nb\r\nc\r\nD\r\ne\r\n",
		want: "a\r\nB\r\nc\r\nD\r\ne\r\n", clean: true,
	},
	{
		name: "a conflict in a CRLF file has CRLF markers",
		base: "a\r\nb\r\nc\r\n", ours: "a\r\nB\r\nc\r\n", theirs: "a\r\nX\r\nc\r\n",
		want:  "a\r\n<<<<<<< ours\r\nB\r\n||||||| base\r\nb\r\n=======\r\nX\r\n>>>>>>> theirs\r\nc\r\n",
		clean: false,
	},
	{
		name: "a conflict in an LF file with CRLF edits has LF markers",
		base: "a\nb\nc\n", ours: "a\nB\r\nc\n", theirs: "a\nX\r\nc\n",
		want:  "a\n<<<<<<< ours\nB\r\n||||||| base\nb\n=======\nX\r\n>>>>>>> theirs\nc\n",
		clean: false,
	},
	{
		name: "three empty files merge to an empty file",
		want: "", clean: true,
	},
	{
		name: "content added to an empty base by one side is kept",
		ours: "a\n",
		want: "a\n", clean: true,
	},
	{
		name: "different content added to an empty base conflicts",
		ours: "a\n", theirs: "b\n",
		want:  "<<<<<<< ours\na\n||||||| base\n=======\nb\n>>>>>>> theirs\n",
		clean: false,
	},
	{
		name: "emptying a file that the other side left alone empties it",
		base: "a\nb\n", ours: "", theirs: "a\nb\n",
		want: "", clean: true,
	},
	{
		name: "emptying a file that the other side edited conflicts",
		base: "a\nb\n", ours: "", theirs: "a\nB\n",
		want:  "<<<<<<< ours\n||||||| base\na\nb\n=======\na\nB\n>>>>>>> theirs\n",
		clean: false,
	},
}

func TestMergeCases(t *testing.T) {
	var g *gitRunner
	if _, err := exec.LookPath("git"); err == nil {
		g = newGit(t)
	} else {
		t.Log("git is not on PATH: the cases are checked against their expected outputs only")
	}
	for _, c := range mergeCases {
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
