package gitx

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// identVersion names the mapping from changesets to commits (Ident, the
// dates, the message). It is written in the mapping file's header: a file
// made under another mapping names commits this one would not make, and is
// rebuilt.
const identVersion = 1

// anonymous is the name an empty agent gets.
const anonymous = "anonymous"

// Ident returns the git name and e-mail of an agent: the name is the agent
// with '<', '>' and ASCII control bytes replaced by '_' and surrounding
// spaces trimmed; the e-mail is SLUG@swarmops, where SLUG keeps the name's
// ASCII letters, digits, '.', '_' and '-' and turns every other byte into
// '-'. An agent that leaves nothing is "anonymous <anonymous@swarmops>".
// The mapping is fixed so that an export is deterministic.
func Ident(agent string) (name, email string) {
	b := []byte(agent)
	for i, c := range b {
		if c < 0x20 || c == 0x7f || c == '<' || c == '>' {
			b[i] = '_'
		}
	}
	name = strings.Trim(string(b), " ")
	if name == "" {
		name = anonymous
	}
	slug := []byte(name)
	for i, c := range slug {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			slug[i] = '-'
		}
	}
	return name, string(slug) + "@swarmops"
}

// gitDate is a changeset time as a git raw date: whole seconds since the
// epoch, +0000. Times before the epoch, which git's raw format cannot
// carry, are written as 0.
func gitDate(t time.Time) string {
	return strconv.FormatInt(max(t.Unix(), 0), 10) + " +0000"
}

// quotePath returns p in the C-style quotes fast-import reads, so that any
// byte of a name (a space, a quote, a newline) reaches git unchanged.
func quotePath(p string) string {
	var b strings.Builder
	b.Grow(len(p) + 2)
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hfsIgnorable lists the code points HFS+ ignores when it compares names,
// which git's fsck strips before it compares a name with ".git".
var hfsIgnorable = map[rune]bool{
	0x200c: true, 0x200d: true, 0x200e: true, 0x200f: true,
	0x202a: true, 0x202b: true, 0x202c: true, 0x202d: true, 0x202e: true,
	0x206a: true, 0x206b: true, 0x206c: true, 0x206d: true, 0x206e: true, 0x206f: true,
	0xfeff: true,
}

// isDotGit reports whether git would take a tree entry name for its own
// directory: ".git" in any case, also followed by the dots and spaces NTFS
// drops or by an NTFS stream name (":..."), its 8.3 short names ("git~1",
// "gi7eba~1" to "~4"), or with code points HFS+ ignores.
// git's fsck refuses such trees and checkouts would write into the
// repository's metadata, so export refuses them.
func isDotGit(name string) bool {
	if len(name) < 4 {
		return false
	}
	var b strings.Builder
	for _, r := range name {
		if !hfsIgnorable[r] {
			b.WriteRune(r)
		}
	}
	n := b.String()
	if i := strings.IndexByte(n, ':'); i >= 0 {
		n = n[:i]
	}
	n = strings.ToLower(strings.TrimRight(n, ". "))
	switch n {
	case ".git", "git~1", "gi7eba~1", "gi7eba~2", "gi7eba~3", "gi7eba~4":
		return true
	}
	return false
}

// checkGitRef checks a full ref name against git check-ref-format's rules:
// it starts with "refs/", and no component is empty, starts with '.' or
// ends with ".lock"; no "..", "@{", ASCII control byte, space, '~', '^',
// ':', '?', '*', '[' or '\\'; it does not end with '.' or '/' and is not
// "@".
func checkGitRef(name string) error {
	bad := func(why string) error { return fmt.Errorf("git ref %q: %s", name, why) }
	switch {
	case !strings.HasPrefix(name, "refs/"):
		return bad("does not start with refs/")
	case strings.HasSuffix(name, ".") || strings.HasSuffix(name, "/"):
		return bad("ends with '.' or '/'")
	case strings.Contains(name, ".."):
		return bad("contains '..'")
	case strings.Contains(name, "@{"):
		return bad("contains '@{'")
	case !utf8.ValidString(name):
		return bad("is not UTF-8")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return bad(fmt.Sprintf("contains %q", c))
		}
	}
	for _, comp := range strings.Split(name, "/") {
		switch {
		case comp == "":
			return bad("has an empty component")
		case strings.HasPrefix(comp, "."):
			return bad("has a component starting with '.'")
		case strings.HasSuffix(comp, ".lock"):
			return bad("has a component ending with .lock")
		}
	}
	return nil
}
