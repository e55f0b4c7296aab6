package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// blobOf returns n bytes that differ from every other (i, n).
func blobOf(i, n int) []byte {
	b := bytes.Repeat([]byte{byte('a' + i%26)}, n)
	copy(b, fmt.Sprintf("blob %d of %d\n", i, n))
	return b
}

// noiseOf is n incompressible bytes, different for each i.
func noiseOf(i, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(i), 1))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// TestCheckpointIsDueByBytes: a checkpoint is due when the frames since the
// last one reach CheckpointBytes, whatever their number, and each commit
// still makes exactly one journal datasync. With B = 32 KiB, one-sector
// commits make none; commits of 25-sector frames (12,800 bytes) make one
// after every third; a frame bigger than B makes one right after it, and
// the next open replays none of it.
func TestCheckpointIsDueByBytes(t *testing.T) {
	c := faultfs.NewCounting(faultfs.NewMem())
	const seg = "/s/journal/seg-000000000001"
	o := core.Options{FS: c, CheckpointEvery: 1 << 20, CheckpointBytes: 32 << 10, InlineCheckpoint: true}
	s := mustCreate(t, "/s", o)
	ckptSeq := func() uint64 {
		in, err := s.Info()
		if err != nil {
			t.Fatal(err)
		}
		return in.CheckpointSeq
	}
	// commit makes one commit and checks its journal datasyncs and that
	// the newest checkpoint covers it (wantCkpt) or has not moved.
	commit := func(what string, i int, data []byte, wantCkpt bool) {
		t.Helper()
		before := ckptSeq()
		c.Reset()
		mustCommit(t, s, core.CommitRequest{Changes: []core.Change{{Path: fmt.Sprintf("f%d", i), Data: data}}})
		ds := c.PathCount(faultfs.OpDatasync, seg)
		after, err := s.Info()
		if err != nil {
			t.Fatal(err)
		}
		got := after.CheckpointSeq != before
		if ds != 1 || got != wantCkpt || (got && after.CheckpointSeq != after.DurableSeq) {
			t.Fatalf("%s commit %d: %d journal datasyncs, checkpoint %d -> %d (durable %d); want 1 datasync and a checkpoint after it: %v (go test ./core -run %s)",
				what, i, ds, before, after.CheckpointSeq, after.DurableSeq, wantCkpt, t.Name())
		}
	}
	for i := 0; i < 20; i++ {
		commit("one-sector", i, []byte(fmt.Sprint(i)), false)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 9; i++ {
		commit("12,000-byte", i, blobOf(i, 12_000), i%3 == 0)
	}
	// Incompressible: a split frame compresses its blobs (zblob), and
	// this one must stay 40,000 bytes.
	commit("40,000-byte", 100, noiseOf(100, 40_000), true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	mustOpen(t, "/s", o)
	if n := c.PathBytesRead(seg); n > 512 {
		t.Fatalf("open read %d bytes of the journal; want at most its header sector, nothing past the checkpoint", n)
	}
}

// TestCheckpointBytesMustNotBeNegative: a negative CheckpointBytes is
// ErrInvalid, not a default.
func TestCheckpointBytesMustNotBeNegative(t *testing.T) {
	_, err := core.Create("/s", core.Options{FS: faultfs.NewMem(), CheckpointBytes: -1})
	if !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("Create with CheckpointBytes -1: %v; want ErrInvalid", err)
	}
}
