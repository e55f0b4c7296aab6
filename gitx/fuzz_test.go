package gitx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/vfs"
)

// FuzzParseMap feeds the mapping file's decoder arbitrary bytes: it never
// panics, and whatever it accepts it writes back to the same entries.
func FuzzParseMap(f *testing.F) {
	f.Add([]byte(mapHeader + strings.Repeat("a", 64) + " " + strings.Repeat("b", 40) + "\n"))
	f.Add([]byte(mapHeader + strings.Repeat("a", 64) + " " + strings.Repeat("c", 64) + "\n" + strings.Repeat("a", 64) + " 12\n"))
	f.Add([]byte("swarmops-export-map 1 ident=0\n"))
	f.Add([]byte(mapHeader + strings.Repeat("a", 64) + " " + strings.Repeat("B", 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := parseMap(data)
		if m.note != "" {
			if len(m.commits) != 0 {
				t.Fatalf("a refused file kept %d entries", len(m.commits))
			}
			return
		}
		dir := t.TempDir()
		if err := m.save(dir); err != nil {
			t.Fatal(err)
		}
		back := loadMap(vfs.OS(), dir)
		if back.note != "" || fmt.Sprint(back.commits) != fmt.Sprint(m.commits) || len(back.order) != len(m.order) {
			t.Fatalf("round trip: %v (%q), want %v", back.commits, back.note, m.commits)
		}
	})
}

// FuzzParseCommit feeds the commit header parser arbitrary objects: it
// never panics, and an accepted one has an author time that is UTC.
func FuzzParseCommit(f *testing.F) {
	f.Add([]byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A U Thor <a@x> 1700000000 +0200\ncommitter C <c@x> 1 +0000\n\nmessage\n"))
	f.Add([]byte("tree x\nauthor <a@x> 5 -0100\ngpgsig -----BEGIN\n author fake <f> 9 +0000\n\n"))
	f.Add([]byte("author >< 1\n\n"))
	f.Add([]byte("author A <a> -5 +0000"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseCommit("0000", raw)
		if err != nil {
			if !strings.Contains(err.Error(), "0000") {
				t.Fatalf("error %q does not name the commit", err)
			}
			return
		}
		if c.time.Location().String() != "UTC" {
			t.Fatalf("time %v is not UTC", c.time)
		}
	})
}
