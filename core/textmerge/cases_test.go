package textmerge

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// textCase is one case of a testdata file: its name, its first line (file
// and line number, for messages) and its fields.
type textCase struct {
	name   string
	at     string
	fields map[string]string
}

// readCases reads the cases of testdata/file. A case is a paragraph: its
// name, then one field a line, the field's name and its value as a Go
// string literal; a line starting with # is a comment. A field left out is
// "". A field not among known, a field given twice, a value that does not
// unquote and a file without cases fail the test.
func readCases(tb testing.TB, file string, known ...string) []textCase {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	var cases []textCase
	in := false // inside a case: the last line was not blank
	for i, line := range strings.Split(string(data), "\n") {
		at := fmt.Sprintf("%s:%d", file, i+1)
		switch {
		case strings.HasPrefix(line, "#"):
		case line == "":
			in = false
		case !in:
			cases = append(cases, textCase{name: line, at: at, fields: map[string]string{}})
			in = true
		default:
			c := &cases[len(cases)-1]
			key, lit, _ := strings.Cut(line, " ")
			v, err := strconv.Unquote(strings.TrimSpace(lit))
			if _, twice := c.fields[key]; err != nil || twice || !slices.Contains(known, key) {
				tb.Fatalf("%s: want a field of %v, once, and a Go string literal: %q", at, known, line)
			}
			c.fields[key] = v
		}
	}
	if len(cases) == 0 {
		tb.Fatalf("testdata/%s holds no cases", file)
	}
	return cases
}
