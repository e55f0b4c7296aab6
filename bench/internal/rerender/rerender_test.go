package rerender

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileRendersTheReportItReads: the Markdown written is what md makes
// of the report as decoded, and a report that is not JSON is an error
// naming the file, with nothing written.
func TestFileRendersTheReportItReads(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	if err := os.WriteFile(in, []byte(`{"Name":"w1","Runs":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	type report struct {
		Name string
		Runs int
	}
	md := func(r *report) string { return strings.Repeat(r.Name+"\n", r.Runs) }
	if err := File(in, out, md); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != "w1\nw1\nw1\n" {
		t.Errorf("%s = %q, %v; want three lines w1", out, got, err)
	}
	bad, badOut := filepath.Join(dir, "bad.json"), filepath.Join(dir, "bad.md")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := File(bad, badOut, md); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad JSON: err = %v, want an error naming %s", err, bad)
	}
	if _, err := os.Stat(badOut); !os.IsNotExist(err) {
		t.Errorf("bad JSON: %s was written (stat: %v)", badOut, err)
	}
}
