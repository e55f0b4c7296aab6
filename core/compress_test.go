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

// sourceLike is n bytes that compress as source code does (about 3× at
// zstd's default level), different for each i.
func sourceLike(i, n int) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(uint64(i), 3))
	words := []string{"func ", "return ", "if err != nil {", "}\n", "\t", "x", "y := ", "s.view", "(t *testing.T)", "// ", "0x", "\n"}
	fmt.Fprintf(&b, "// file %d\n", i)
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(byte('a' + r.IntN(26)))
	}
	return b.Bytes()[:n]
}

// readAll reads every change back through main and fails on any
// difference.
func readAllBack(t *testing.T, s *core.Store, changes []core.Change, when string) {
	t.Helper()
	sn := snap(t, s)
	head, err := sn.Ref("main")
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		got, _, err := sn.ReadPath(head, ch.Path)
		if err != nil || !bytes.Equal(got, ch.Data) {
			t.Fatalf("%s: read %s: %d bytes, %v; want its %d bytes (go test ./core -run %s)", when, ch.Path, len(got), err, len(ch.Data), t.Name())
		}
	}
}

// TestImportStoresInlineBlobsCompressedAndReadsThemBack: an import's
// split frame holds its inline blobs in compressed groups, so the journal
// is a fraction of the blobs' bytes, and every blob reads back exactly:
// from the tail after an open, from an index run after a checkpoint (the
// object record's compressed flag, stored length and inner offset), after
// a garbage collection copied the frame forward, and through a deep
// Verify that re-hashes decoded bytes. Incompressible blobs sit in the
// groups beside them.
func TestImportStoresInlineBlobsCompressedAndReadsThemBack(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m, CheckpointEvery: 1 << 20, CheckpointBytes: 1 << 40, SegmentSize: 256 << 10}
	s, err := core.Create("/s", o)
	if err != nil {
		t.Fatal(err)
	}
	var changes []core.Change
	raw := 0
	for i := range 600 {
		data := sourceLike(i, 200+i*37)
		if i%10 == 0 {
			data = noiseOf(i, 3_000)
		}
		raw += len(data)
		changes = append(changes, core.Change{Path: fmt.Sprintf("d%d/f%03d.go", i%7, i), Data: data})
	}
	head := mustCommit(t, s, core.CommitRequest{Changes: changes, Advance: "main"})
	in, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	if in.JournalBytes > int64(raw)/2 {
		t.Fatalf("journal of %d bytes after importing %d bytes of compressible blobs; want at most half (go test ./core -run %s)", in.JournalBytes, raw, t.Name())
	}
	t.Logf("import of %d blob bytes: %d journal bytes", raw, in.JournalBytes)
	readAllBack(t, s, changes, "after the commit")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = core.Open("/s", o); err != nil {
		t.Fatal(err)
	}
	readAllBack(t, s, changes, "after an open (tail)")
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	readAllBack(t, s, changes, "after a checkpoint (this process)")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = core.Open("/s", o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readAllBack(t, s, changes, "after a checkpoint (index run)")
	if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("deep verify: %+v, %v; want no problems", rep, err)
	}
	mustCommit(t, s, core.CommitRequest{Parents: []core.ID{head}, Changes: []core.Change{put("small", "1")}, Advance: "main"})
	rep, err := s.GC(core.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Copied == 0 {
		t.Fatalf("gc copied nothing forward: %+v; want the import's objects copied", rep)
	}
	readAllBack(t, s, changes, "after gc")
	if vr, err := s.Verify(true, nil); err != nil || len(vr.Problems) > 0 {
		t.Fatalf("deep verify after gc: %+v, %v; want no problems", vr, err)
	}
}

// TestDamagedCompressedBlobIsCorruptNamingFileAndOffset: the blobs of a
// compressed group whose zstd frame is damaged read as *CorruptErrors
// naming the segment and the frame's offset, never a panic, and deep
// verification reports them; both from the tail and from an index run.
// Every other blob reads back.
func TestDamagedCompressedBlobIsCorruptNamingFileAndOffset(t *testing.T) {
	for _, ckpt := range []bool{false, true} {
		m := faultfs.NewMem()
		o, changes := bigImport(t, m, 1)
		if ckpt {
			s, err := core.Open("/s", o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		// Zero the last 8 bytes of the body: its last group's frame.
		at := lastBodyByte(t, m) - 7
		scribble(t, m, seg1, at, make([]byte, 8))
		s, err := core.Open("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		sn := snap(t, s)
		head, _ := sn.Ref("main")
		bad := 0
		for _, ch := range changes {
			got, _, err := sn.ReadPath(head, ch.Path)
			var ce *core.CorruptError
			switch {
			case errors.As(err, &ce):
				if ce.File != seg1 || ce.Offset <= journal0 || ce.Offset > at {
					t.Fatalf("checkpoint %v: read %s: %v; want the segment and an offset in the body", ckpt, ch.Path, err)
				}
				bad++
			case err != nil || !bytes.Equal(got, ch.Data):
				t.Fatalf("checkpoint %v: read %s: %d bytes, %v; want its bytes or a *CorruptError", ckpt, ch.Path, len(got), err)
			}
		}
		if bad < 1 || bad > 32 {
			t.Fatalf("checkpoint %v: %d reads were corrupt; want the damaged group's blobs alone (1 to 32 of 8 KiB)", ckpt, bad)
		}
		if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) == 0 {
			t.Fatalf("checkpoint %v: deep verify: %+v, %v; want the damaged blob reported", ckpt, rep, err)
		}
		s.Close()
	}
}

// journal0 is the offset of a segment's first frame.
const journal0 = 512
