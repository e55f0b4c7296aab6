package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestChangeListParsesEveryStatementForm(t *testing.T) {
	src := `# a comment line
put a.txt < local/a.txt
put "dir/with space.txt" = "line one\nline\ttwo \"q\" \\ \x00\xff"
exec bin/run = "#!/bin/sh\n"   # trailing comment
delete old/file

   delete "quoted/del"
`
	got, err := parseChanges("list", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []changeLine{
		{Line: 2, Path: "a.txt", Source: "local/a.txt"},
		{Line: 3, Path: "dir/with space.txt", Inline: true, Text: []byte("line one\nline\ttwo \"q\" \\ \x00\xff")},
		{Line: 4, Path: "bin/run", Exec: true, Inline: true, Text: []byte("#!/bin/sh\n")},
		{Line: 5, Path: "old/file", Delete: true},
		{Line: 7, Path: "quoted/del", Delete: true},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestChangeListErrorsNameLineAndColumn(t *testing.T) {
	cases := []struct{ src, want string }{
		{"put a = \"x\"\nfrob b\n", "list:2:1: unknown statement \"frob\""},
		{"put\n", "list:1:4: put needs a path"},
		{"put ../x = \"y\"", "list:1:5: path \"../x\" has a \"..\" component"},
		{"put /abs = \"y\"", "list:1:5: path \"/abs\" is absolute"},
		{"put a//b = \"y\"", "list:1:5: path \"a//b\" has an empty component"},
		{"put \"a\\0b\" = \"y\"", "list:1:5: path \"a\\x00b\" contains a NUL byte"},
		{"put \"\" = \"y\"", "list:1:5: empty path"},
		{"put a \"x\"", "list:1:7: expected '<' or '=' after the path"},
		{"put a = x", "list:1:9: inline content must be a quoted string"},
		{"put a = \"x", "list:1:9: unterminated quoted string"},
		{"put a = \"\\q\"", "list:1:10: unknown escape \\q"},
		{"put a = \"\\x4\"", "list:1:10: \\x needs two hex digits"},
		{"put a = \"x\"y", "list:1:12: expected a space after the closing quote"},
		{"put a = \"x\" extra", "list:1:13: unexpected \"extra\" after the statement"},
		{"delete a b", "list:1:10: unexpected \"b\" after delete PATH"},
		{"put a <", "list:1:8: expected a source file after \"<\""},
		{"put a = \"1\"\n\ndelete a", "list:3:8: path \"a\" is already changed on line 1"},
		{"put a\xff = \"1\"", "list:1:6: invalid UTF-8"},
		{"put a\"b = \"1\"", "list:1:6: unexpected '\"' inside a bare word"},
	}
	for _, c := range cases {
		_, err := parseChanges("list", []byte(c.src))
		var le *listError
		if !errors.As(err, &le) {
			t.Errorf("%q: got %v, want a *listError", c.src, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got  %s\n want %s...", c.src, err, c.want)
		}
	}
}

func TestChangeListStdinIsNamedInErrors(t *testing.T) {
	_, err := parseChanges("-", []byte("bogus"))
	if err == nil || !strings.HasPrefix(err.Error(), "<stdin>:1:1:") {
		t.Fatalf("got %v, want an error at <stdin>:1:1", err)
	}
}

func TestLoadChangesReportsAnUnreadableSourceWithItsLine(t *testing.T) {
	lines, err := parseChanges("list", []byte("put a = \"x\"\nput b < somedir\n"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) ([]byte, error) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	_, err = loadChanges("list", lines, read)
	if err == nil || !strings.Contains(err.Error(), "list:2: put b: source \"somedir\": is a directory") {
		t.Fatalf("got %v", err)
	}
	if ce := classify(err); ce.kind != kindUsage {
		t.Fatalf("classified as %s, want E_USAGE", ce.kind.Code)
	}
}

func TestRevisionSyntax(t *testing.T) {
	good := []string{"main", "feature/x-1", "abcd", "ABCDEF01", "main~", "main~3", "a.b_c", strings.Repeat("a", 64)}
	for _, r := range good {
		if err := checkRev(r); err != nil {
			t.Errorf("checkRev(%q) = %v, want nil", r, err)
		}
	}
	bad := []string{"", "~1", "main~x", "main~-1", "main~+1", "ma in", "a:b", "-x", "a//b", "a/../b", "/a", "a/", "x\x00", "main~99999999999", "main~~2", "main~1~1", "é"}
	for _, r := range bad {
		if err := checkRev(r); err == nil {
			t.Errorf("checkRev(%q) = nil, want an error", r)
		}
	}
}

func TestRevPathSplitsAtTheFirstColon(t *testing.T) {
	rev, path, has := splitRevPath("main~1:dir/a:b")
	if rev != "main~1" || path != "dir/a:b" || !has {
		t.Fatalf("got %q %q %v", rev, path, has)
	}
	if _, _, err := revPath("main", true); err == nil {
		t.Fatal("cat without :PATH accepted")
	}
	if _, _, err := revPath("main:", false); err != nil {
		t.Fatalf("ls main: (the root) refused: %v", err)
	}
	if _, _, err := revPath("main:../x", false); err == nil {
		t.Fatal("ls main:../x accepted")
	}
}

func TestEveryErrorKindHasADistinctExitStatus(t *testing.T) {
	seen := map[int]string{0: "success"}
	codes := map[string]bool{}
	for _, k := range errorTable() {
		if prev, dup := seen[k.Exit]; dup {
			t.Errorf("%s and %s share exit status %d", k.Code, prev, k.Exit)
		}
		if codes[k.Code] {
			t.Errorf("code %s appears twice", k.Code)
		}
		seen[k.Exit], codes[k.Code] = k.Code, true
		if k.Exit <= 0 || k.Exit > 255 {
			t.Errorf("%s: exit status %d out of range", k.Code, k.Exit)
		}
	}
	if !kindBusy.Retryable {
		t.Error("E_BUSY must be retryable")
	}
}
