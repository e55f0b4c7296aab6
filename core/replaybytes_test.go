package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
)

// importMB is the size of the import in TestOpenAfterABigImportReadsOnlyHeads
// (SWARMOPS_IMPORT_MB, default 24).
func importMB(t *testing.T) int {
	return envCount(t, "SWARMOPS_IMPORT_MB", 24)
}

// bigImport commits a tree of 8 KiB files totalling mb megabytes, as one
// commit advancing main, and one small commit after it (whose watermark
// says the import is durable), into a store at /s on m with no checkpoint
// after them (as after a crash before the checkpoint). It returns the
// import's paths and contents.
func bigImport(t *testing.T, m *faultfs.MemFS, mb int) (core.Options, []core.Change) {
	t.Helper()
	o := core.Options{FS: m, CheckpointEvery: 1 << 20, CheckpointBytes: 1 << 40}
	s := mustCreate(t, "/s", o)
	var changes []core.Change
	for i := 0; i < mb<<7; i++ {
		changes = append(changes, core.Change{Path: fmt.Sprintf("d%02d/f%05d", i%64, i), Data: blobOf(i, 8<<10)})
	}
	head := mustCommit(t, s, core.CommitRequest{Changes: changes, Advance: "main"})
	mustCommit(t, s, core.CommitRequest{Parents: []core.ID{head}, Changes: []core.Change{put("small", "1")}, Advance: "main"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return o, changes
}

// TestOpenAfterABigImportReadsOnlyHeads: opening a store whose journal
// past the checkpoint holds a big import reads the import frame's head
// (ids, sizes, trees, the changeset), not its blobs' bytes: a split
// frame's checksum covers its head and its body's digest, and replay of
// frames below a published end of this boot reads heads only. The blobs
// still read back whole and checked.
func TestOpenAfterABigImportReadsOnlyHeads(t *testing.T) {
	mb := importMB(t)
	m := faultfs.NewMem()
	o, changes := bigImport(t, m, mb)
	c := faultfs.NewCounting(m)
	o.FS = c
	s := mustOpen(t, "/s", o)
	// The head holds about 45 bytes a blob and the trees' entries.
	limit := int64(len(changes)) * 200
	if n := c.PathBytesRead(seg1); n > limit {
		t.Fatalf("open after a %d MB import read %d bytes of the journal; want at most %d (go test ./core -run %s)", mb, n, limit, t.Name())
	}
	t.Logf("open after a %d MB import: %d bytes of the journal, %d in all", mb, c.PathBytesRead(seg1), c.BytesRead())
	sn, head := snapRef(t, s, "main")
	for _, i := range []int{0, len(changes) / 2, len(changes) - 1} {
		got, _, err := sn.ReadPath(head, changes[i].Path)
		if err != nil || string(got) != string(changes[i].Data) {
			t.Fatalf("read %s after the open: %d bytes, %v; want its %d bytes", changes[i].Path, len(got), err, len(changes[i].Data))
		}
	}
}

// lastBodyByte returns the offset in seg1 of the last nonzero byte of the
// first frame (an import's split frame, whose body ends its payload, then
// zero padding): a byte of the body's last blob.
func lastBodyByte(t *testing.T, m *faultfs.MemFS) int64 {
	t.Helper()
	b, err := afero.ReadFile(m, seg1)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(journal.FirstFrame) + 512
	for end < int64(len(b)) && string(b[end:end+4]) != "SWF1" {
		end += 512
	}
	for end--; end > journal.FirstFrame && b[end] == 0; end-- {
	}
	return end
}

// TestDamageInASkippedBodyIsDetected: a bit flipped in the body of a split
// frame, which open does not read, is found when a blob of the damaged
// group is read (its zstd frame no longer decodes, or the blob no longer
// hashes to its id: E_CORRUPT either way), by a deep Verify, and by
// recovery after a power loss, which reads every frame whole (C6).
func TestDamageInASkippedBodyIsDetected(t *testing.T) {
	m := faultfs.NewMem()
	o, changes := bigImport(t, m, 1)
	flipBit(t, m, seg1, lastBodyByte(t, m))
	s, err := core.Open("/s", o)
	if err != nil {
		t.Fatalf("open (heads only) after a flip in a body: %v; want it to open", err)
	}
	defer s.Close()
	sn, head := snapRef(t, s, "main")
	corrupt := 0
	for _, ch := range changes {
		got, _, err := sn.ReadPath(head, ch.Path)
		switch {
		case errors.Is(err, core.ErrCorrupt):
			corrupt++
		case err != nil || string(got) != string(ch.Data):
			t.Fatalf("read %s: %d bytes, %v; want its bytes or ErrCorrupt", ch.Path, len(got), err)
		}
	}
	// The import's 8 KiB blobs make groups of 32 (core/internal/zblob).
	if corrupt < 1 || corrupt > 32 {
		t.Fatalf("%d reads failed with ErrCorrupt; want those of the flipped group's blobs, 1 to 32", corrupt)
	}
	rep, err := s.Verify(true, nil)
	if err != nil || len(rep.Problems) == 0 {
		t.Fatalf("deep verify: %+v, %v; want the damaged frame reported", rep, err)
	}
	if _, err := core.Open("/s", core.Options{FS: m.CrashClone(faultfs.Strict, 0)}); !errors.Is(err, core.ErrCorrupt) {
		t.Fatalf("open after a power loss: %v; want ErrCorrupt (recovery reads bodies)", err)
	}
}

// TestABigHeadIsCheckpointedBeforeClose: a commit whose frame head is
// large (8,192 small files: their ids and the trees, about 400 KB) but
// whose journal bytes are short of CheckpointBytes makes a checkpoint due
// right after it, so the process that made it writes the checkpoint before
// Close returns, and the next open reads almost none of the journal
// instead of the head (every later command of a CLI is such an open).
func TestABigHeadIsCheckpointedBeforeClose(t *testing.T) {
	m := faultfs.NewMem()
	s, err := core.Create("/s", core.Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	var changes []core.Change
	for i := 0; i < 8192; i++ {
		changes = append(changes, core.Change{Path: fmt.Sprintf("d%02d/f%05d", i%64, i), Data: blobOf(i, 64)})
	}
	mustCommit(t, s, core.CommitRequest{Changes: changes, Advance: "main"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c := faultfs.NewCounting(m)
	s, err = core.Open("/s", core.Options{FS: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := c.PathBytesRead(seg1); n > 64<<10 {
		t.Fatalf("the open after a commit with a big head read %d bytes of the journal; want at most 64 KiB (no checkpoint after the commit?)", n)
	}
}
