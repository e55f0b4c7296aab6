package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/mergequeue"
)

// TestClassifyPlacesEverySentinelInTheTable covers the rows a test cannot
// reach through the binary without a failing disk (E_IO, E_NO_SPACE) or a
// bug (E_INTERNAL), and checks that wrapping never changes the row.
func TestClassifyPlacesEverySentinelInTheTable(t *testing.T) {
	cases := []struct {
		err  error
		want errorKind
	}{
		{core.ErrBusy, kindBusy},
		{core.ErrNotFound, kindNotFound},
		{core.ErrAmbiguous, kindAmbiguous},
		{&core.AmbiguousError{Prefix: "abcd"}, kindAmbiguous},
		{core.ErrConflict, kindConflict},
		{&core.ConflictError{Ref: "main"}, kindConflict},
		{&core.MergeConflictError{Paths: []string{"a"}}, kindConflict},
		{core.ErrCorrupt, kindCorrupt},
		{core.ErrProtected, kindProtected},
		{&core.ProtectedError{Ref: "main", Pattern: "main"}, kindProtected},
		{&core.CorruptError{File: "f", Offset: 7}, kindCorrupt},
		{core.ErrInvalid, kindUsage},
		{core.ErrNoSpace, kindNoSpace},
		{core.ErrIO, kindIO},
		{core.ErrClosed, kindIO},
		{core.ErrExist, kindExists},
		{core.ErrNotStore, kindNotStore},
		{core.ErrReadOnly, kindReadOnly},
		{&core.NeedsRecoveryError{Dir: "s", Reason: "r", Err: core.ErrReadOnly}, kindReadOnly},
		{core.ErrCrashed, kindCrashed},
		{mergequeue.ErrCheckFailed, kindCheckFail},
		{&mergequeue.CheckFailedError{Outcome: &mergequeue.Outcome{Target: "main", Exit: 1}}, kindCheckFail},
		{fmt.Errorf("write: %w", fmt.Errorf("%w: busy too", core.ErrCrashed)), kindCrashed},
		{fmt.Errorf("plain"), kindInternal},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("context: %w", c.err)
		if got := classify(wrapped).kind; got != c.want {
			t.Errorf("classify(%v) = %s, want %s", wrapped, got.Code, c.want.Code)
		}
	}
}

// TestErrorEnvelopeShape checks the JSON envelope of a failure: one
// document, ok:false, the fixed fields, the extras, and the exit status
// from the table.
func TestErrorEnvelopeShape(t *testing.T) {
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, jsonOut: true}
	status := a.finish(classify(fmt.Errorf("commit: %w", core.ErrNoSpace)))
	if status != kindNoSpace.Exit {
		t.Fatalf("exit %d, want %d", status, kindNoSpace.Exit)
	}
	var env struct {
		OK    bool           `json:"ok"`
		Error map[string]any `json:"error"`
		Meta  map[string]any `json:"meta"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&env); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON document")
	}
	if env.OK || env.Error["code"] != "E_NO_SPACE" || env.Error["retryable"] != false || env.Meta["elapsed_ms"] == nil {
		t.Fatalf("envelope %+v", env)
	}
	if errb.Len() != 0 {
		t.Fatalf("stderr %q in JSON mode", errb.String())
	}
}

// TestDocsErrorTableMatchesTheCode keeps the copy in docs/cli.md honest: each
// row of the code's table appears there with the same status and
// retryability, and the doc lists no code the table lacks.
func TestDocsErrorTableMatchesTheCode(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `(E_[A-Z_]+)` \\| (\\d+) \\| (true|false) \\|").FindAllStringSubmatch(string(doc), -1)
	got := map[string]string{}
	for _, r := range rows {
		got[r[1]] = r[2] + " " + r[3]
	}
	for _, k := range errorTable() {
		want := fmt.Sprintf("%d %v", k.Exit, k.Retryable)
		if got[k.Code] != want {
			t.Errorf("docs/cli.md: %s is %q, the code says %q", k.Code, got[k.Code], want)
		}
		delete(got, k.Code)
	}
	for code := range got {
		t.Errorf("docs/cli.md lists %s, which the code's table lacks", code)
	}
}

// TestPlainTextDropsLayerNames checks that the sentinels' package names are
// taken out of a message, whether a detail follows them or not, and that
// nothing else is touched.
func TestPlainTextDropsLayerNames(t *testing.T) {
	cases := []struct{ err, want error }{
		{fmt.Errorf("ref %q: %w", "x", fmt.Errorf("%w: ref %q", core.ErrNotFound, "x")), fmt.Errorf(`ref "x": ref "x"`)},
		{fmt.Errorf("open: %w", core.ErrBusy), fmt.Errorf("open: lock busy")},
		{fmt.Errorf("checkout: %w", core.ErrIO), fmt.Errorf("checkout: I/O error")},
		{fmt.Errorf("plain: words: here"), fmt.Errorf("plain: words: here")},
	}
	for _, c := range cases {
		if got := plainText(c.err); got != c.want.Error() {
			t.Errorf("plainText(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestSimilarSuggestsCloseNamesClosestFirst covers the "did you mean"
// choice: swaps count as one edit, short names allow one edit only, and the
// list is bounded.
func TestSimilarSuggestsCloseNamesClosestFirst(t *testing.T) {
	refs := []string{"main", "mainline", "maint", "topic/a", "topic/b", "x"}
	cases := []struct {
		name string
		want []string
	}{
		{"mian", []string{"main", "maint"}}, // a swap is one edit
		{"main", []string{"maint"}},         // never the name itself
		{"topic/c", []string{"topic/a", "topic/b"}},
		{"y", []string{"x"}},
		{"zzz", nil},
		{"ab", nil}, // two edits from "x" is too far for a short name
	}
	for _, c := range cases {
		if got := similar(c.name, refs); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("similar(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	many := []string{"ab1", "ab2", "ab3", "ab4", "ab5"}
	if got := similar("ab", many); len(got) != maxSuggestions {
		t.Errorf("similar over %d close names gave %d, want the first %d", len(many), len(got), maxSuggestions)
	}
}

// TestEditDistance checks the optimal-string-alignment distance on the
// edits it counts.
func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"main", "main", 0},
		{"mian", "main", 1}, {"main", "mainx", 1}, {"main", "man", 1}, {"main", "maim", 1},
		{"ca", "abc", 3}, {"commit", "comit", 1}, {"kitten", "sitting", 3},
	}
	for _, c := range cases {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestCheckRefNameNamesTheCharacter checks that a refused ref name reports
// the character as the user typed it: the rune for UTF-8, the byte in hex
// otherwise, with the byte offset either way.
func TestCheckRefNameNamesTheCharacter(t *testing.T) {
	cases := []struct{ name, want string }{
		{"Ãx", `contains 'Ã' (U+00C3) at byte 0`},
		{"añb", `contains 'ñ' (U+00F1) at byte 1`},
		{"a😀", `contains '😀' (U+1F600) at byte 1`},
		{"a\xffb", `contains the byte 0xff (not UTF-8) at byte 1`},
		{"a b", `contains ' ' at byte 1`},
		{"a\x00", `contains '\x00' at byte 1`},
	}
	for _, c := range cases {
		err := checkRefName(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkRefName(%q) = %v, want it to say %s", c.name, err, c.want)
		}
	}
}

// TestQuotePathKeepsOneNameOnOneLine: text output prints a name as it is
// unless it holds what would split a line, drive a terminal or be
// misread (git quotes the same names).
func TestQuotePathKeepsOneNameOnOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain.txt":        "plain.txt",
		"with space/ü.txt": "with space/ü.txt",
		"a\nb":             `"a\nb"`,
		"\x1b[31mred":      `"\x1b[31mred"`,
		`q"uote`:           `"q\"uote"`,
		"bad\xffbyte":      `"bad\xffbyte"`,
		`back\slash`:       `"back\\slash"`,
	} {
		if got := quotePath(in); got != want {
			t.Errorf("quotePath(%q) = %s, want %s", in, got, want)
		}
	}
}
