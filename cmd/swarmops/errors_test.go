package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/swarmops/swarmops/core"
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
		{&core.CorruptError{File: "f", Offset: 7}, kindCorrupt},
		{core.ErrInvalid, kindUsage},
		{core.ErrNoSpace, kindNoSpace},
		{core.ErrIO, kindIO},
		{core.ErrClosed, kindIO},
		{core.ErrExist, kindExists},
		{core.ErrNotStore, kindNotStore},
		{core.ErrCrashed, kindCrashed},
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
