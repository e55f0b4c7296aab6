package objects

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func idFor(s string) ID { return BlobID([]byte(s)) }

// goldenObjects are the fixed objects whose encodings and ids the golden
// file pins.
func goldenObjects() []struct {
	name string
	obj  any
} {
	tr := &Tree{Entries: []Entry{
		{Name: "README", Mode: ModeFile, ID: idFor("readme")},
		{Name: "run.sh", Mode: ModeExec, ID: idFor("#!/bin/sh")},
		{Name: "src", Mode: ModeDir, ID: idFor("tree")},
	}}
	root, err := tr.ID()
	if err != nil {
		panic(err)
	}
	return []struct {
		name string
		obj  any
	}{
		{"blob-empty", Blob(nil)},
		{"blob-hello", Blob("hello\n")},
		{"tree-empty", &Tree{}},
		{"tree-three", tr},
		{"changeset-root", &Changeset{Root: root, Delta: DeltaHash(nil), Generation: 1, Agent: "a", Message: "m",
			Time: time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)}},
		{"changeset-merge", &Changeset{Parents: []ID{idFor("p1"), idFor("p2")}, Root: root,
			Delta:      DeltaHash([]PathChange{{Path: "a/b", Op: OpAdd, Mode: ModeFile, ID: idFor("x")}}),
			Generation: 7, Agent: "agent-7", Message: "merge\nbody", Time: time.Time{}}},
		{"tree-symlink", &Tree{Entries: []Entry{
			{Name: "link", Mode: ModeSymlink, ID: idFor("../target")},
			{Name: "tool", Mode: ModeExec, ID: idFor("#!/bin/sh")},
		}}},
	}
}

func TestGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString("# name kind id encoding-hex (regenerate: go test ./core/objects -run TestGolden -update)\n")
	for _, g := range goldenObjects() {
		k, enc, err := Encode(g.obj)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", g.name, k, IDOf(k, enc), hex.EncodeToString(enc))
		if ok, err := equalEncoding(k, enc); !ok || err != nil {
			t.Errorf("%s: decode-then-encode differs (err %v)", g.name, err)
		}
	}
	fmt.Fprintf(&b, "delta-empty - %s -\n", DeltaHash(nil))
	fmt.Fprintf(&b, "delta-two - %s -\n", DeltaHash([]PathChange{
		{Path: "x", Op: OpDelete}, {Path: "a/b", Op: OpModify, Mode: ModeExec, ID: idFor("y")}}))
	path := filepath.Join("testdata", "objects.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./core/objects -run TestGolden -update)", err)
	}
	if got := b.String(); got != string(want) {
		t.Fatalf("encodings or ids changed: this is a format change.\ngot:\n%s\nwant:\n%s\n"+
			"If the change is intended, regenerate with: go test ./core/objects -run TestGolden -update", got, want)
	}
}

func TestTreeRoundTripAndLookup(t *testing.T) {
	tr := goldenObjects()[3].obj.(*Tree)
	enc, id, err := tr.EncodeID()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTree(enc)
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := got.ID(); id2 != id {
		t.Fatalf("id after round trip %s, want %s", id2, id)
	}
	if e, ok := got.Lookup("run.sh"); !ok || e.Mode != ModeExec {
		t.Fatalf("Lookup(run.sh) = %v, %v", e, ok)
	}
	if _, ok := got.Lookup("nope"); ok {
		t.Fatal("Lookup(nope) found something")
	}
}

func TestTreeValidationRejects(t *testing.T) {
	id := idFor("x")
	cases := map[string][]Entry{
		"unsorted":  {{Name: "b", Mode: ModeFile, ID: id}, {Name: "a", Mode: ModeFile, ID: id}},
		"duplicate": {{Name: "a", Mode: ModeFile, ID: id}, {Name: "a", Mode: ModeFile, ID: id}},
		"slash":     {{Name: "a/b", Mode: ModeFile, ID: id}},
		"dot":       {{Name: ".", Mode: ModeFile, ID: id}},
		"dotdot":    {{Name: "..", Mode: ModeFile, ID: id}},
		"empty":     {{Name: "", Mode: ModeFile, ID: id}},
		"nul":       {{Name: "a\x00", Mode: ModeFile, ID: id}},
		"long":      {{Name: strings.Repeat("n", 256), Mode: ModeFile, ID: id}},
		"mode":      {{Name: "a", Mode: 0o100600, ID: id}},
		"zero id":   {{Name: "a", Mode: ModeFile}},
	}
	for name, es := range cases {
		if _, err := (&Tree{Entries: es}).Encode(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Encode error %v, want ErrInvalid", name, err)
		}
	}
}

// treeBytes builds a tree encoding by hand, bypassing validation.
func treeBytes(es []Entry) []byte {
	b := []byte{FormatVersion, 0, 0, 0, byte(len(es))}
	for _, e := range es {
		b = append(b, byte(e.Mode>>24), byte(e.Mode>>16), byte(e.Mode>>8), byte(e.Mode))
		b = append(b, e.ID[:]...)
		b = append(b, byte(len(e.Name)))
		b = append(b, e.Name...)
	}
	return b
}

func TestDecodeTreeRejectsNonCanonical(t *testing.T) {
	id := idFor("x")
	good := treeBytes([]Entry{{Name: "a", Mode: ModeFile, ID: id}, {Name: "b", Mode: ModeFile, ID: id}})
	if _, err := DecodeTree(good); err != nil {
		t.Fatalf("good tree: %v", err)
	}
	cases := map[string][]byte{
		"unsorted":   treeBytes([]Entry{{Name: "b", Mode: ModeFile, ID: id}, {Name: "a", Mode: ModeFile, ID: id}}),
		"duplicate":  treeBytes([]Entry{{Name: "a", Mode: ModeFile, ID: id}, {Name: "a", Mode: ModeFile, ID: id}}),
		"bad name":   treeBytes([]Entry{{Name: "a/b", Mode: ModeFile, ID: id}}),
		"bad mode":   treeBytes([]Entry{{Name: "a", Mode: 1, ID: id}}),
		"trailing":   append(append([]byte{}, good...), 0),
		"truncated":  good[:len(good)-1],
		"version":    append([]byte{2}, good[1:]...),
		"huge count": {FormatVersion, 0xff, 0xff, 0xff, 0xff},
		"empty":      nil,
	}
	for name, b := range cases {
		_, err := DecodeTree(b)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want ErrMalformed", name, err)
		} else if !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: error %q does not name an offset", name, err)
		}
	}
}

func TestDecodeChangesetRejectsNonCanonical(t *testing.T) {
	c := goldenObjects()[5].obj.(*Changeset)
	good, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	genOff := 1 + 2 + 64 + 32 + 32
	cases := map[string][]byte{
		"trailing":    append(append([]byte{}, good...), 'x'),
		"truncated":   good[:len(good)-1],
		"version":     mut(func(b []byte) []byte { b[0] = 9; return b }),
		"dup parent":  mut(func(b []byte) []byte { copy(b[3+32:3+64], b[3:3+32]); return b }),
		"zero parent": mut(func(b []byte) []byte { clear(b[3 : 3+32]); return b }),
		"generation0": mut(func(b []byte) []byte { clear(b[genOff : genOff+8]); return b }),
		"nanos":       mut(func(b []byte) []byte { b[genOff+16] = 0xff; return b }),
		"parents":     mut(func(b []byte) []byte { b[1], b[2] = 0xff, 0xff; return b }),
		"empty":       nil,
	}
	for name, b := range cases {
		if _, err := DecodeChangeset(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want ErrMalformed", name, err)
		}
	}
	if _, err := Decode(9, good); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown kind: error %v", err)
	}
}

func TestChangesetTimeKeepsNanosecondsInUTC(t *testing.T) {
	loc := time.FixedZone("x", 3600)
	c := &Changeset{Root: idFor("r"), Generation: 1, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, loc)}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeChangeset(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(c.Time) || got.Time.Location() != time.UTC {
		t.Fatalf("time %v, want %v in UTC", got.Time, c.Time)
	}
}

func TestDeltaHashIgnoresOrderAndDeleteFields(t *testing.T) {
	a := []PathChange{{Path: "a", Op: OpAdd, Mode: ModeFile, ID: idFor("1")}, {Path: "b", Op: OpDelete, ID: idFor("junk")}}
	b := []PathChange{{Path: "b", Op: OpDelete}, {Path: "a", Op: OpAdd, Mode: ModeFile, ID: idFor("1")}}
	if DeltaHash(a) != DeltaHash(b) {
		t.Fatal("same change in another order (or with junk in a delete) hashed differently")
	}
	c := []PathChange{{Path: "a", Op: OpModify, Mode: ModeFile, ID: idFor("1")}, {Path: "b", Op: OpDelete}}
	if DeltaHash(a) == DeltaHash(c) {
		t.Fatal("add and modify hashed the same")
	}
	// Length prefixes keep path boundaries: "ab" + "c" differs from "a" + "bc".
	if DeltaHash([]PathChange{{Path: "ab", Op: OpDelete}, {Path: "c", Op: OpDelete}}) ==
		DeltaHash([]PathChange{{Path: "a", Op: OpDelete}, {Path: "bc", Op: OpDelete}}) {
		t.Fatal("path boundaries are ambiguous")
	}
	if Hash(IDOf(KindBlob, nil)) == DeltaHash(nil) {
		t.Fatal("delta tag collides with blob tag")
	}
}

func TestCleanPath(t *testing.T) {
	for _, p := range []string{"a", "a/b", "a/b.c/d", "...", ".a", "ü/x"} {
		if got, err := CleanPath(p); err != nil || got != p {
			t.Errorf("CleanPath(%q) = %q, %v", p, got, err)
		}
	}
	for _, p := range []string{"", "/a", "a/", "a//b", "./a", "a/.", "a/../b", "..", "a\x00b",
		strings.Repeat("x", 256), strings.Repeat("a/", 2049) + "a", "\xff"} {
		if _, err := CleanPath(p); !errors.Is(err, ErrBadPath) {
			t.Errorf("CleanPath(%q) error %v, want ErrBadPath", p, err)
		} else if p != "" && len(p) < 100 && !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) &&
			!strings.Contains(err.Error(), "name") {
			t.Errorf("CleanPath(%q) error %q does not quote the path", p, err)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	id := idFor("z")
	s := id.String()
	for _, n := range []int{4, 5, 31, 64} {
		p, err := ParsePrefix(strings.ToUpper(s[:n]))
		if err != nil {
			t.Fatalf("ParsePrefix(%q): %v", s[:n], err)
		}
		if p.Nibbles != n || !p.Match(id) || p.String() != s[:n] {
			t.Fatalf("prefix %d: %+v match=%v", n, p, p.Match(id))
		}
		other := id
		other[(n-1)/2] ^= 0x01 << (4 * (1 - uint((n-1)%2)))
		if p.Match(other) {
			t.Fatalf("prefix of %d digits matches an id differing in digit %d", n, n)
		}
	}
	for _, s := range []string{"", "abc", "abcg", strings.Repeat("a", 65), "ab cd"} {
		if _, err := ParsePrefix(s); !errors.Is(err, ErrBadPrefix) {
			t.Errorf("ParsePrefix(%q) error %v, want ErrBadPrefix", s, err)
		}
	}
}

func TestParseID(t *testing.T) {
	id := idFor("q")
	if got, err := ParseID(strings.ToUpper(id.String())); err != nil || got != id {
		t.Fatalf("ParseID = %v, %v", got, err)
	}
	if _, err := ParseID("zz"); !errors.Is(err, ErrBadID) {
		t.Fatalf("ParseID(zz) error %v", err)
	}
}

func TestSymlinkEntriesRoundTripAndOtherLinkModesDoNot(t *testing.T) {
	id := idFor("../target")
	b := treeBytes([]Entry{{Name: "link", Mode: ModeSymlink, ID: id}})
	tr, err := DecodeTree(b)
	if err != nil {
		t.Fatalf("tree with a symlink entry: %v", err)
	}
	if e, ok := tr.Lookup("link"); !ok || !e.Mode.IsSymlink() || e.Mode.IsDir() {
		t.Fatalf("Lookup(link) = %v, %v; want a symlink entry", e, ok)
	}
	for _, m := range []Mode{0o120777, 0o120644, 0o020000, 0o140000} {
		if _, err := DecodeTree(treeBytes([]Entry{{Name: "link", Mode: m, ID: id}})); !errors.Is(err, ErrMalformed) {
			t.Errorf("mode %o: DecodeTree error %v, want ErrMalformed", m, err)
		}
	}
}

// TestEnumNamesAndNumbers: kinds and change operations print their names,
// and a value without a name prints its number.
func TestEnumNamesAndNumbers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{KindBlob.String(), "blob"}, {KindTree.String(), "tree"}, {KindChangeset.String(), "changeset"},
		{Kind(0).String(), "kind(0)"}, {Kind(4).String(), "kind(4)"}, {Kind(255).String(), "kind(255)"},
		{OpAdd.String(), "add"}, {OpModify.String(), "modify"}, {OpDelete.String(), "delete"},
		{ChangeOp(0).String(), "op(0)"}, {ChangeOp(4).String(), "op(4)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
