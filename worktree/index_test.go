package worktree_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/worktree"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenIndex is the fixed index the golden file pins.
func goldenIndex() *worktree.Index {
	return &worktree.Index{
		Base:    objects.BlobID([]byte("base")),
		Written: time.Unix(1_790_000_000, 123_456_789),
		BootID:  "5f0c6e1e-3f7a-4b8e-9d2c-2a1b0c9d8e7f",
		Entries: []worktree.IndexEntry{
			{Path: "README.md", Mode: objects.ModeFile, ID: objects.BlobID([]byte("readme")),
				Stat: worktree.Stat{Size: 6, Mtime: 1_789_999_999_000_000_001, Ctime: 1_789_999_999_000_000_002, Ino: 1234, Dev: 2049}},
			{Path: "bin/run", Mode: objects.ModeExec, ID: objects.BlobID([]byte("#!/bin/sh")), Conflict: true,
				Stat: worktree.Stat{Size: 9, Mtime: 3, Ctime: 4, Ino: 5, Dev: 6}},
			{Path: "docs/ünï cödé", Mode: objects.ModeSymlink, ID: objects.BlobID([]byte("../README.md")), Smudged: true},
		},
		Ref: "agent/7",
		Conflicts: []worktree.ConflictRecord{
			{Path: "bin/run",
				Base:   objects.Entry{Mode: objects.ModeExec, ID: objects.BlobID([]byte("#!/bin/sh"))},
				Ours:   objects.Entry{Mode: objects.ModeExec, ID: objects.BlobID([]byte("#!/bin/bash"))},
				Theirs: objects.Entry{Mode: objects.ModeFile, ID: objects.BlobID([]byte("#!/bin/zsh"))}},
			{Path: "gone", Base: objects.Entry{Mode: objects.ModeFile, ID: objects.BlobID([]byte("g"))},
				Ours: objects.Entry{Mode: objects.ModeDir}},
		},
	}
}

// goldenBytes is goldenIndex encoded.
func goldenBytes(t testing.TB) []byte {
	t.Helper()
	b, err := goldenIndex().Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeReencodes decodes b: it fails with ErrIndexCorrupt, or the index
// re-encodes to b (a version 2 index; an earlier one is re-encoded as 2).
func decodeReencodes(t *testing.T, b []byte) {
	ix, err := worktree.DecodeIndex(b)
	if err != nil {
		if !errors.Is(err, worktree.ErrIndexCorrupt) {
			t.Fatalf("error %v does not wrap ErrIndexCorrupt", err)
		}
		return
	}
	again, err := ix.Encode()
	if err != nil || (b[4] == 2 && !bytes.Equal(again, b)) {
		t.Fatalf("decoded index does not re-encode to its input (%v)", err)
	}
}

// TestVersion1IndexesAreStillRead decodes the version 1 golden file, as
// trees checked out by earlier builds hold it: no ref, no conflict records,
// and it re-encodes as version 2.
func TestVersion1IndexesAreStillRead(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "index-v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	b, err := hex.DecodeString(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	ix, err := worktree.DecodeIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenIndex()
	if ix.Ref != "" || len(ix.Conflicts) != 0 || ix.Base != want.Base || len(ix.Entries) != len(want.Entries) {
		t.Fatalf("version 1 index decoded as %+v", ix)
	}
	again, err := ix.Encode()
	if err != nil || again[4] != 2 {
		t.Fatalf("re-encoded: version %d, %v; want version 2", again[4], err)
	}
}

func TestIndexGolden(t *testing.T) {
	b := goldenBytes(t)
	got := "# worktree index v2 (regenerate: go test ./worktree -run TestIndexGolden -update)\n" + hex.EncodeToString(b) + "\n"
	path := filepath.Join("testdata", "index.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./worktree -run TestIndexGolden -update)", err)
	}
	if got != string(want) {
		t.Fatalf("the index encoding changed:\n got %s\nwant %s\nIf the change is intended, regenerate with: go test ./worktree -run TestIndexGolden -update", got, want)
	}
}

func TestIndexRoundTripsByteForByte(t *testing.T) {
	ix, b := goldenIndex(), goldenBytes(t)
	back, err := worktree.DecodeIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Written.Equal(ix.Written) || back.Base != ix.Base || back.BootID != ix.BootID || back.Ref != ix.Ref || len(back.Entries) != 3 {
		t.Fatalf("decoded header differs: %+v", back)
	}
	for i := range ix.Entries {
		if back.Entries[i] != ix.Entries[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, back.Entries[i], ix.Entries[i])
		}
	}
	if len(back.Conflicts) != len(ix.Conflicts) {
		t.Fatalf("%d conflict records, want %d", len(back.Conflicts), len(ix.Conflicts))
	}
	for i := range ix.Conflicts {
		if back.Conflicts[i] != ix.Conflicts[i] {
			t.Errorf("conflict %d: got %+v, want %+v", i, back.Conflicts[i], ix.Conflicts[i])
		}
	}
	again, err := back.Encode()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("decode-then-encode differs (%v)", err)
	}
	empty, err := (&worktree.Index{}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worktree.DecodeIndex(empty); err != nil {
		t.Fatalf("empty index: %v", err)
	}
}

// TestEveryBitFlipOfTheIndexIsDetected flips each bit of an encoded index
// in turn: every one must fail to decode with ErrIndexCorrupt.
func TestEveryBitFlipOfTheIndexIsDetected(t *testing.T) {
	b := goldenBytes(t)
	for i := 0; i < len(b)*8; i++ {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := worktree.DecodeIndex(c); !errors.Is(err, worktree.ErrIndexCorrupt) {
			t.Fatalf("bit %d (byte %d) flipped: DecodeIndex error %v, want ErrIndexCorrupt", i, i/8, err)
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := worktree.DecodeIndex(b[:n]); !errors.Is(err, worktree.ErrIndexCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

func TestIndexEncodeRefusesInvalidEntries(t *testing.T) {
	id := objects.BlobID([]byte("x"))
	for name, es := range map[string][]worktree.IndexEntry{
		"unsorted":             {{Path: "b", Mode: objects.ModeFile, ID: id}, {Path: "a", Mode: objects.ModeFile, ID: id}},
		"repeated":             {{Path: "a", Mode: objects.ModeFile, ID: id}, {Path: "a", Mode: objects.ModeFile, ID: id}},
		"dotdot":               {{Path: "../a", Mode: objects.ModeFile, ID: id}},
		"dir mode":             {{Path: "a", Mode: objects.ModeDir, ID: id}},
		"zero id":              {{Path: "a", Mode: objects.ModeFile}},
		"long boot":            nil,
		"long ref":             nil,
		"conflicts unsorted":   nil,
		"conflict dir with id": nil,
	} {
		ix := &worktree.Index{Entries: es}
		switch name {
		case "long boot":
			ix.BootID = strings.Repeat("b", 256)
		case "long ref":
			ix.Ref = strings.Repeat("r", 256)
		case "conflicts unsorted":
			ix.Conflicts = []worktree.ConflictRecord{{Path: "b"}, {Path: "a"}}
		case "conflict dir with id":
			ix.Conflicts = []worktree.ConflictRecord{{Path: "a", Ours: objects.Entry{Mode: objects.ModeDir, ID: id}}}
		}
		if _, err := ix.Encode(); err == nil {
			t.Errorf("%s: Encode accepted it", name)
		}
	}
}

func FuzzDecodeIndex(f *testing.F) {
	f.Add(goldenBytes(f))
	empty, _ := (&worktree.Index{}).Encode()
	f.Add(empty)
	f.Add([]byte("SWTI"))
	f.Fuzz(decodeReencodes)
}

// FuzzDecodeIndexBody fuzzes the parser behind the checksum: the input is
// an index body, sealed with its correct checksum before decoding.
func FuzzDecodeIndexBody(f *testing.F) {
	b := goldenBytes(f)
	f.Add(b[:len(b)-32])
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := blake3.Sum256(body)
		decodeReencodes(t, append(bytes.Clone(body), sum[:]...))
	})
}

// TestAnIndexCarriesItsCarriedChangeset: a tree that carries a changeset
// writes version 3, which decodes to the same carried id and re-encodes
// byte for byte; version 3 without one is corrupt; a tree that carries
// none stays version 2.
func TestAnIndexCarriesItsCarriedChangeset(t *testing.T) {
	ix := goldenIndex()
	ix.Carried = objects.ID{7, 7, 7}
	b, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if b[4] != 3 {
		t.Fatalf("version %d, want 3", b[4])
	}
	back, err := worktree.DecodeIndex(b)
	if err != nil || back.Carried != ix.Carried {
		t.Fatalf("decoded carried %v (%v), want %v", back.Carried, err, ix.Carried)
	}
	if again, err := back.Encode(); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("decode-then-encode differs (%v)", err)
	}
	if b2 := goldenBytes(t); b2[4] != 2 {
		t.Fatalf("a tree that carries nothing: version %d, want 2", b2[4])
	}
	zero := bytes.Clone(b)
	off := 4 + 1 + 1 + 32 + 8 + 1 + len(ix.BootID) + 1 + len(ix.Ref)
	for i := off; i < off+32; i++ {
		zero[i] = 0
	}
	body := zero[:len(zero)-32]
	sum := blake3.Sum256(body)
	copy(zero[len(body):], sum[:])
	if _, err := worktree.DecodeIndex(zero); !errors.Is(err, worktree.ErrIndexCorrupt) {
		t.Fatalf("version 3 with a zero carried id: %v, want ErrIndexCorrupt", err)
	}
}
