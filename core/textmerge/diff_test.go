package textmerge

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestSlidableChangesSitWhereGitPutsThem pins the compaction rules: a
// change that could sit in several places sits where git's diff puts it,
// which decides whether a merge sees it touch the other side's change.
func TestSlidableChangesSitWhereGitPutsThem(t *testing.T) {
	var g *gitRunner
	if _, err := exec.LookPath("git"); err == nil {
		g = newGit(t)
	}
	for _, c := range readCases(t, "diff.txt", "old", "new", "script") {
		old, new, want := c.fields["old"], c.fields["new"], c.fields["script"]
		got := scriptString(diffLines(splitLines([]byte(old)), splitLines([]byte(new))))
		if got != want {
			t.Errorf("%s (%s): diff %q to %q = %s, want %s", c.name, c.at, old, new, got, want)
		}
		if g != nil {
			if gs := scriptString(g.script(t, []byte(old), []byte(new))); gs != want {
				t.Errorf("%s (%s): git's diff is %s, the case wants %s", c.name, c.at, gs, want)
			}
		}
	}
}

// distinctLines is n lines that are all different.
func distinctLines(n int, prefix string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s %d\n", prefix, i))
	}
	return out
}

// TestManyDistinctLinesDiffExactly crosses the places where a one-rune-a-
// line coding breaks: past 55,296 distinct lines the next code would be a
// surrogate, and past 65,536 it no longer fits 16 bits. Edits at both ends
// keep the whole text in the middle that reaches the library. The script
// wanted is git's.
func TestManyDistinctLinesDiffExactly(t *testing.T) {
	a := distinctLines(70000, "line")
	b := append([][]byte{[]byte("new first\n")}, a[1:]...)
	b[30000] = []byte("edited 30000\n")
	b[60000] = []byte("edited 60000\n")
	b = append(b[:69999:69999], []byte("new last\n"))
	// Two swapped lines whose codes fall in the surrogate range: the
	// library compares the deleted and inserted runs as strings, where
	// every surrogate would read as U+FFFD and the two would look equal.
	b[56000], b[56001] = a[56001], a[56000]
	want := "[-0,1 +0,1][-30000,1 +30000,1][-56000,1 +56000,0][-56002,0 +56001,1][-60000,1 +60000,1][-69999,1 +69999,1]"
	if got := scriptString(diffLines(a, b)); got != want {
		t.Fatalf("diff = %.200s, want %s", got, want)
	}
	d, err := Unified(join(a), join(b), DefaultContext)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := applyHunks(join(a), d); err != nil || !bytes.Equal(got, join(b)) {
		t.Fatalf("the hunks do not rebuild the new text (err %v)", err)
	}
	theirs := append([][]byte(nil), a...)
	theirs[45000] = []byte("theirs 45000\n")
	res, err := Merge(join(a), join(b), join(theirs), gitLabels)
	if err != nil || !res.Clean {
		t.Fatalf("edits far apart should merge cleanly: err %v, %d conflicts", err, len(res.Conflicts))
	}
	merged := splitLines(res.Merged)
	if string(merged[45000]) != "theirs 45000\n" || string(merged[60000]) != "edited 60000\n" {
		t.Fatal("the merge lost an edit")
	}
}

// TestPastTheRuneAlphabetTheDiffIsCoarseButCorrect shrinks the alphabet to
// reach the fallback: the whole middle becomes one change, which is still a
// correct diff, and a merge can only be more cautious for it.
func TestPastTheRuneAlphabetTheDiffIsCoarseButCorrect(t *testing.T) {
	saved := maxRuneIDs
	maxRuneIDs = 8
	t.Cleanup(func() { maxRuneIDs = saved })

	a := distinctLines(20, "line")
	b := append([][]byte(nil), a...)
	b[0], b[19] = []byte("first\n"), []byte("last\n")
	b[10] = []byte("ten\n")
	if got, want := scriptString(diffLines(a, b)), "[-0,20 +0,20]"; got != want {
		t.Fatalf("diff = %s, want the coarse %s", got, want)
	}
	d, _ := Unified(join(a), join(b), DefaultContext)
	if got, err := applyHunks(join(a), d); err != nil || !bytes.Equal(got, join(b)) {
		t.Fatalf("the coarse hunks do not rebuild the new text (err %v)", err)
	}
	res, _ := Merge(join(a), join(b), join(a), gitLabels)
	if !res.Clean || !bytes.Equal(res.Merged, join(b)) {
		t.Fatal("a change of one side alone must still merge cleanly")
	}
	theirs := append([][]byte(nil), a...)
	theirs[5] = []byte("five\n")
	if res, _ := Merge(join(a), join(b), join(theirs), gitLabels); res.Clean {
		t.Fatal("with coarse diffs, edits of both sides inside the middle must conflict, not merge wrongly")
	}
}

// TestLinesWithoutAMatchNeverReachTheSearch covers texts with no line in
// common, such as a regenerated file: the cleanup sets every line aside, so
// the search, which on an all-different grid does quadratic work (seconds
// for these 100,000 lines), gets nothing to do.
func TestLinesWithoutAMatchNeverReachTheSearch(t *testing.T) {
	a, b := distinctLines(50000, "old"), distinctLines(50000, "new")
	sa, sb := newSide(a), newSide(b)
	if ka, kb := keepLines(sa, sb, classify(sa, sb), 0, 0); len(ka)+len(kb) != 0 {
		t.Fatalf("%d and %d lines left for the search, want none", len(ka), len(kb))
	}
	if got, want := scriptString(diffLines(a, b)), "[-0,50000 +0,50000]"; got != want {
		t.Fatalf("diff = %s, want %s", got, want)
	}
}

func TestUnifiedFormatsLikeGitDiff(t *testing.T) {
	old := "package p\n\nfunc f() {\n\ta()\n\tb()\n\tc()\n\td()\n}\n"
	new := "package p\n\nfunc f() {\n\ta()\n\tB()\n\tc()\n\td()\n}\nlast"
	d, err := Unified([]byte(old), []byte(new), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"--- a/f.go",
		"+++ b/f.go",
		"@@ -4,3 +4,3 @@ func f() {",
		" \ta()",
		"-\tb()",
		"+\tB()",
		" \tc()",
		"@@ -8 +8,2 @@ func f() {",
		" }",
		"+last",
		"\\ No newline at end of file",
		"",
	}, "\n")
	if got := string(d.Format("a/f.go", "b/f.go")); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if d.Hunks[1].Lines[1] != (Line{Op: OpInsert, Text: "last", NoNewline: true}) {
		t.Fatalf("structured line: %+v", d.Hunks[1].Lines[1])
	}
	if _, err := exec.LookPath("git"); err == nil {
		g := newGit(t)
		if git := g.diff(t, []byte(old), []byte(new), 1); !bytes.Equal(git[bytes.Index(git, []byte("\n@@"))+1:], []byte(want[bytes.Index([]byte(want), []byte("\n@@"))+1:])) {
			t.Fatalf("git diff -U1 prints:\n%s", git)
		}
	}
}

func TestUnifiedOfBinaryContentSaysSoAndHasNoHunks(t *testing.T) {
	d, err := Unified([]byte("a\x00"), []byte("b\x00"), DefaultContext)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Binary || len(d.Hunks) != 0 {
		t.Fatalf("got %+v", d)
	}
	if got, want := string(d.Format("a/x", "b/x")), "Binary files a/x and b/x differ\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if d, _ := Unified([]byte("a\x00"), []byte("a\x00"), DefaultContext); d.Binary || d.Format("a", "b") != nil {
		t.Fatalf("equal binary content: got %+v", d)
	}
}

func TestANegativeContextIsABadOption(t *testing.T) {
	if _, err := Unified(nil, nil, -1); err == nil || !strings.Contains(err.Error(), "negative diff context") {
		t.Fatalf("err %v, want a bad option naming the context", err)
	}
}

func TestALongHeadingIsCutLikeGits(t *testing.T) {
	long := "func " + strings.Repeat("x", 100) + "() {   "
	old := long + "\n1\n2\n3\n4\n"
	new := long + "\n1\n2\n3\nfour\n"
	d, _ := Unified([]byte(old), []byte(new), 1)
	if got := d.Hunks[0].Section; got != long[:80] {
		t.Fatalf("heading %q, want the first 80 bytes %q", got, long[:80])
	}
	if _, err := exec.LookPath("git"); err == nil {
		g := newGit(t)
		if want := g.diff(t, []byte(old), []byte(new), 1); !bytes.Equal(d.Format("a/old", "b/new"), want) {
			t.Fatalf("got:\n%s\ngit:\n%s", d.Format("a/old", "b/new"), want)
		}
	}
}
