package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// quote renders s as a change-list quoted string.
func quote(s []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// format renders parsed lines back to a change list.
func format(lines []changeLine) string {
	var b strings.Builder
	for _, l := range lines {
		verb := "put"
		if l.Exec {
			verb = "exec"
		}
		switch {
		case l.Delete:
			fmt.Fprintf(&b, "delete %s\n", quote([]byte(l.Path)))
		case l.Inline:
			fmt.Fprintf(&b, "%s %s = %s\n", verb, quote([]byte(l.Path)), quote(l.Text))
		default:
			fmt.Fprintf(&b, "%s %s < %s\n", verb, quote([]byte(l.Path)), quote([]byte(l.Source)))
		}
	}
	return b.String()
}

// FuzzParseChanges checks that the parser never panics, that every error
// carries a position inside the input, that every accepted path is valid,
// and that a formatted list parses back to the same statements.
func FuzzParseChanges(f *testing.F) {
	for _, s := range []string{
		"put a < b\n",
		"put \"x y\" = \"a\\n\\t\\\\\\\"\\x00\\xff\"\n# c\ndelete d/e\n",
		"exec bin/x = \"#!/bin/sh\\n\"  # note\n",
		"put ../x = \"y\"", "put a = \"x", "put a\"b = \"1\"", "\n\n\tdelete a\r\n",
		"put a = \"1\"\ndelete a", "frob", "put", "put a <", "put a = x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		lines, err := parseChanges("fuzz", src)
		if err != nil {
			var le *listError
			if !errors.As(err, &le) {
				t.Fatalf("error without a position: %v", err)
			}
			n := strings.Count(string(src), "\n") + 1
			if le.Line < 1 || le.Line > n || le.Col < 1 {
				t.Fatalf("position %d:%d outside an input of %d lines: %v", le.Line, le.Col, n, err)
			}
			return
		}
		for _, l := range lines {
			if err := checkPath(l.Path); err != nil {
				t.Fatalf("accepted a bad path: %v", err)
			}
		}
		again, err := parseChanges("fuzz", []byte(format(lines)))
		if err != nil {
			t.Fatalf("formatted list does not parse: %v\n%s", err, format(lines))
		}
		if len(again) != len(lines) {
			t.Fatalf("round trip: %d statements, want %d", len(again), len(lines))
		}
		for i := range lines {
			a, b := lines[i], again[i]
			if a.Path != b.Path || a.Delete != b.Delete || a.Exec != b.Exec || a.Inline != b.Inline ||
				string(a.Text) != string(b.Text) || a.Source != b.Source {
				t.Fatalf("round trip changed statement %d: %+v vs %+v", i, a, b)
			}
		}
	})
}

// FuzzCheckRev checks that revision syntax checking never panics and never
// accepts what the store could not name: whitespace, ':', NUL, or an empty
// base.
func FuzzCheckRev(f *testing.F) {
	for _, s := range []string{"main", "main~2", "abcd", "a/b~", "a~1~2", "~1", "main~x", "a:b", "a\x00", "-x", strings.Repeat("f", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rev string) {
		if err := checkRev(rev); err != nil {
			return
		}
		if strings.ContainsAny(rev, " \t\n\x00:") {
			t.Fatalf("accepted %q", rev)
		}
		base, _, _ := strings.Cut(rev, "~")
		if err := checkRefName(base); err != nil {
			t.Fatalf("accepted %q whose base is bad: %v", rev, err)
		}
	})
}

// FuzzRevPath checks REV:PATH parsing never panics and only accepts valid
// paths.
func FuzzRevPath(f *testing.F) {
	for _, s := range []string{"main:a/b", "main:", "main", "x~1:../y", ":a", "a:b:c"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, arg string, need bool) {
		rev, path, err := revPath(arg, need)
		if err != nil {
			return
		}
		if checkRev(rev) != nil {
			t.Fatalf("accepted rev %q", rev)
		}
		if (need || path != "") && checkPath(path) != nil {
			t.Fatalf("accepted path %q", path)
		}
	})
}
