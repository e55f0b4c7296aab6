package worktree

import (
	"strings"
	"testing"
)

// FuzzIgnoreFile feeds arbitrary .gitignore content and paths to the
// matcher: it must never panic, and a final "!*" line, which re-includes
// every name, must leave every path below the file's directory included,
// whatever came before it (the last matching pattern wins, as in git).
func FuzzIgnoreFile(f *testing.F) {
	for _, s := range []string{"*.o\n", "/build/\n!keep\n", "a/**/b\n\\#x\n", "[z-a]\n", "**\n!", "\\\n"} {
		f.Add([]byte(s), "build/x.o", false)
	}
	f.Fuzz(func(t *testing.T, data []byte, path string, isDir bool) {
		if len(data) > maxIgnoreFile {
			return
		}
		p := strings.Trim(path, "/")
		if p == "" || strings.Contains(p, "//") {
			return
		}
		r := &rules{patterns: parseIgnore(data, []string{"d"})}
		r.match("d/"+p, isDir)
		all := &rules{patterns: parseIgnore(append(append([]byte{}, data...), "\n!*\n"...), []string{"d"})}
		if all.match("d/"+p, isDir) {
			t.Fatalf("%q ends in !*, yet d/%s (dir %v) is ignored", data, p, isDir)
		}
	})
}
