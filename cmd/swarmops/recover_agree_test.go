package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// TestRecoverAgreesWithVerifyDeep damages one file of each kind in a copy
// of a store (an old journal frame that a checkpoint covers, a frame after
// the checkpoint, an index run's records, a reflog chunk, a loose object,
// the checkpoint) and runs verify --deep and recover on it: both must give
// the same code, E_CORRUPT, and both exit 0 on the undamaged copy. Recover
// repairs from the frames after the checkpoint; without its deep check it
// answered 0 ("nothing to repair") on an old frame, an index run, a reflog
// chunk and a loose object.
func TestRecoverAgreesWithVerifyDeep(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	s, err := core.Create(src, core.Options{CheckpointEvery: 4, InlineThreshold: 1024, InlineCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	var head []core.ID
	for i := range 10 {
		data := []byte(fmt.Sprintf("file %d\n", i))
		if i == 2 {
			// Random bytes: zstd cannot shrink them, so the loose file
			// holds them as they are, and byte 100 is in it.
			data = make([]byte, 2600)
			rand.NewChaCha8([32]byte{2}).Read(data)
		}
		id, err := s.Commit(core.CommitRequest{Parents: head, Changes: []core.Change{{Path: fmt.Sprintf("f%d", i), Data: data}}, Advance: "main", Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		head = []core.ID{id}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	glob := func(dir, pattern string) string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no %s in %s: %v", pattern, dir, err)
		}
		return m[0]
	}
	segEnd := func(dir string) int64 {
		fi, err := os.Stat(glob(dir, "journal/seg-*"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	cases := []struct {
		kind string
		file string                 // glob in the store
		off  func(dir string) int64 // the byte to flip; -1: none
	}{
		{"undamaged", "checkpoint", func(string) int64 { return -1 }},
		{"an old journal frame, before the checkpoint", "journal/seg-*", func(string) int64 { return 512 + 100 }},
		{"a journal frame after the checkpoint", "journal/seg-*", func(dir string) int64 { return lastFrame(t, glob(dir, "journal/seg-*"), segEnd(dir)) + 100 }},
		{"an index run's records", "index/run-*", func(dir string) int64 { fi, _ := os.Stat(glob(dir, "index/run-*")); return fi.Size() / 2 }},
		{"a reflog chunk", "reflog", func(string) int64 { return 40 }},
		{"a loose object", "objects/*/*", func(dir string) int64 { return 100 }},
		{"the checkpoint", "checkpoint", func(string) int64 { return 70 }},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			if off := c.off(dir); off >= 0 {
				flipByte(t, glob(dir, c.file), off)
			}
			verify := cliCode(t, dir, "verify", "--deep")
			recover := cliCode(t, dir, "recover")
			want := "E_CORRUPT"
			if c.kind == "undamaged" {
				want = "ok"
			}
			if verify != want || recover != verify {
				t.Errorf("%s: verify --deep says %s, recover says %s; want both %s", c.kind, verify, recover, want)
			}
		})
	}
}

// lastFrame returns the offset of the last frame in a segment of end
// bytes: the last 512-byte boundary holding the frame magic.
func lastFrame(t *testing.T, seg string, end int64) int64 {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for off := (end/512 - 1) * 512; off >= 512; off -= 512 {
		if string(b[off:off+4]) == "SWF1" {
			return off
		}
	}
	t.Fatalf("no frame in %s", seg)
	return 0
}

func flipByte(t *testing.T, file string, off int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if off >= int64(len(b)) {
		t.Fatalf("%s has %d bytes, cannot flip byte %d", file, len(b), off)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cliCode runs the CLI in process on the store in dir and returns the
// envelope's error code, or "ok".
func cliCode(t *testing.T, dir string, args ...string) string {
	t.Helper()
	getenv := inProcessEnv(dir, true)
	var out strings.Builder
	run(args, strings.NewReader(""), &out, io.Discard, getenv)
	var env struct {
		OK    bool `json:"ok"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out.String()), &env); err != nil {
		t.Fatalf("%v: not an envelope: %q", args, out.String())
	}
	if env.OK {
		return "ok"
	}
	return env.Error.Code
}
