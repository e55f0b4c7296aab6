package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/swarmops/swarmops/core/objects"
)

// Revision syntax (resolution is the store's: Snapshot.Resolve):
//
//	rev     = base [ "~" [digits] ]
//	base    = hex id (4..64 lowercase hex digits) | ref name
//	refname = components of [A-Za-z0-9._-] joined by "/", no component
//	          empty, "." or "..", not starting with "-"
//
// "~" alone means "~1". A base that is both a valid ref name and hex (for
// example "beef") is left to Resolve, which prefers the ref. The checks here
// only reject what can never resolve, so that a typo is E_USAGE, not
// E_NOT_FOUND, and nothing reaches the store.

// maxBack bounds N in REV~N; a larger walk is never what was meant.
const maxBack = 1 << 30

// checkRev validates the syntax of a revision.
func checkRev(rev string) error {
	if rev == "" {
		return fmt.Errorf("empty revision")
	}
	base := rev
	if i := strings.IndexByte(rev, '~'); i >= 0 {
		base = rev[:i]
		if num := rev[i+1:]; num != "" {
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || n > maxBack || num[0] == '+' || num[0] == '-' {
				return fmt.Errorf("revision %q: %q after '~' is not a count (0..%d)", rev, num, maxBack)
			}
		}
	}
	if base == "" {
		return fmt.Errorf("revision %q: nothing before '~'", rev)
	}
	if err := checkRefName(base); err != nil {
		return fmt.Errorf("revision %q: not an id or a ref name: %w", rev, err)
	}
	return nil
}

// isHex reports whether s is lowercase or uppercase hex.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// checkRefName validates a ref name (see the grammar above).
func checkRefName(name string) error {
	if name == "" {
		return fmt.Errorf("empty ref name")
	}
	if len(name) > 255 {
		return fmt.Errorf("ref name of %d bytes exceeds 255", len(name))
	}
	if name[0] == '-' {
		return fmt.Errorf("ref name %q starts with '-'", name)
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" || comp == "." || comp == ".." {
			return fmt.Errorf("ref name %q has an empty, \".\" or \"..\" component", name)
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == '/'
		if !ok {
			return fmt.Errorf("ref name %q contains %s at byte %d (allowed: ASCII letters, digits, . _ - /)",
				name, describeAt(name, i), i)
		}
	}
	return nil
}

// describeAt names the character that starts at byte i of s: the rune and
// its code point when s holds valid UTF-8 there, else the byte in hex. A
// byte printed as if it were a rune would show 'Ã' for the first byte of
// 'ñ'.
func describeAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("the byte 0x%02x (not UTF-8)", s[i])
	}
	if r < utf8.RuneSelf {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("%q (U+%04X)", r, r)
}

// splitRevPath splits "REV:PATH" at the first colon (ref names and ids never
// hold one); hasPath is false when there is no colon.
func splitRevPath(arg string) (rev, path string, hasPath bool) {
	if i := strings.IndexByte(arg, ':'); i >= 0 {
		return arg[:i], arg[i+1:], true
	}
	return arg, "", false
}

// checkPath validates a store path: relative, slash-separated, canonical,
// no NUL, valid UTF-8. Paths are rejected, never cleaned, so that what is
// written is exactly what was asked for.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte", p)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8", p)
	case p[0] == '/':
		return fmt.Errorf("path %q is absolute", p)
	case len(p) > 4096:
		return fmt.Errorf("path of %d bytes exceeds 4096", len(p))
	}
	for _, comp := range strings.Split(p, "/") {
		switch comp {
		case "":
			return fmt.Errorf("path %q has an empty component (a leading, doubled or trailing '/')", p)
		case ".", "..":
			return fmt.Errorf("path %q has a %q component", p, comp)
		}
	}
	// The store's own rule is the authority; the checks above only give
	// the common mistakes plainer messages.
	if _, err := objects.CleanPath(p); err != nil {
		return err
	}
	return nil
}
