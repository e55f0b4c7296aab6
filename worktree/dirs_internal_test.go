package worktree

import (
	"bytes"
	"io/fs"
	"reflect"
	"testing"
	"time"
)

// dirInfo is an fs.FileInfo of a directory with the given stat data.
type dirInfo struct{ st Stat }

func (d dirInfo) Name() string       { return "d" }
func (d dirInfo) Size() int64        { return d.st.Size }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (d dirInfo) ModTime() time.Time { return time.Unix(0, d.st.Mtime) }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }

// TestADirectoryRecordVouchesOnlyForTheNamesItWasMadeFor: a record whose
// stat still matches is not trusted once the index tracks other names in
// its directory, nor a record of another directory, nor a racy one.
func TestADirectoryRecordVouchesOnlyForTheNamesItWasMadeFor(t *testing.T) {
	st := Stat{Size: 4096, Mtime: 10}
	names := []string{"a", "b", "sub"}
	tr := &Tree{dirs: &dirCache{Written: 20, Dirs: []dirRecord{{Path: "d", Stat: st, Names: namesDigest(names)}}}}
	fi := dirInfo{st}
	if !tr.trustedDir("d", fi, names) {
		t.Fatal("a matching record is not trusted")
	}
	for _, other := range [][]string{{"a", "b"}, {"a", "b", "sub", "z"}, {"a", "c", "sub"}, {"ab", "sub"}} {
		if tr.trustedDir("d", fi, other) {
			t.Fatalf("a record made for %v vouches for %v", names, other)
		}
	}
	if tr.trustedDir("e", fi, names) {
		t.Fatal("a record vouches for another directory")
	}
	if tr.trustedDir("d", dirInfo{Stat{Size: 4096, Mtime: 11}}, names) {
		t.Fatal("a record vouches for a directory whose mtime moved")
	}
	tr.dirs.Written = 10
	if tr.trustedDir("d", fi, names) {
		t.Fatal("a racy record (as new as its file) is trusted")
	}
}

// TestChildrenAreTheTrackedNamesOfADirectory checks children against the
// index order, in which "a/b" sorts after "a-b" and "a.c".
func TestChildrenAreTheTrackedNamesOfADirectory(t *testing.T) {
	ix := &Index{}
	for _, p := range []string{"a-b", "a.c", "a/b", "a/c/d", "a/e", "b", "c/x"} {
		ix.Entries = append(ix.Entries, IndexEntry{Path: p})
	}
	lo, hi := ix.span(".")
	if got, want := ix.children(lo, hi, "."), []string{"a", "a-b", "a.c", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("children of the root: %v, want %v", got, want)
	}
	lo, hi = ix.span("a")
	if got, want := ix.children(lo, hi, "a"), []string{"b", "c", "e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("children of a: %v, want %v", got, want)
	}
}

func TestDirsFileRoundTrips(t *testing.T) {
	c := &dirCache{BootID: "boot", Written: 99, Dirs: []dirRecord{
		{Path: "a", Stat: Stat{Size: 1, Mtime: 2, Ctime: 3, Ino: 4, Dev: 5}, Names: 6},
		{Path: "a/b c", Stat: Stat{Size: 7, Mtime: -8, Ctime: 9, Ino: 10, Dev: 11}, Names: 1 << 63},
	}}
	b := c.encode()
	back, err := decodeDirs(b)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, c)
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		if _, err := decodeDirs(d); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := decodeDirs(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
}

// FuzzDecodeDirs: a dirs file comes from the work tree, which anyone may
// write; decoding it never panics, and what decodes encodes back to the
// same bytes.
func FuzzDecodeDirs(f *testing.F) {
	f.Add((&dirCache{BootID: "b", Written: 1, Dirs: []dirRecord{{Path: "x", Names: 3}}}).encode())
	f.Add([]byte("SWTD"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeDirs(b)
		if err != nil {
			return
		}
		if !bytes.Equal(c.encode(), b) {
			t.Fatalf("decoded %+v, which encodes to other bytes", c)
		}
	})
}
