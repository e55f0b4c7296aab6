package core_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// content is file i's bytes: size bytes that do not repeat within a file
// (inline blobs are stored as they are; loose ones compress little).
func content(i, size int) []byte {
	b := make([]byte, size)
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for j := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[j] = byte(x)
	}
	return b
}

// lazyTree is n changes whose content Commit reads through Open: 30,000
// bytes a file, and every 25th file 100,000 bytes (a loose object). Every
// 16th read, open forces a collection and passes the live heap to at.
func lazyTree(n int, at func(live uint64)) []core.Change {
	chs := make([]core.Change, n)
	for i := range chs {
		size := 30_000
		if i%25 == 0 {
			size = 100_000
		}
		chs[i] = core.Change{Path: fmt.Sprintf("d%d/f%d", i%13, i), Open: func() ([]byte, error) {
			if i%16 == 0 && at != nil {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				at(m.HeapAlloc)
			}
			return content(i, size), nil
		}}
	}
	return chs
}

// TestABigCommitHoldsAboutOneChunkOfContent: a commit whose changes give
// their content through Open holds at most about a chunk of it
// (Options.CommitChunkBytes) at any read, whatever the tree's size: trees
// of 8 and 24 MB stay under the same bound of one chunk and 2 MiB over
// the heap before the commit. With the chunk turned off (the whole commit
// in one frame, as before) the 8 MB tree's live heap passes it.
func TestABigCommitHoldsAboutOneChunkOfContent(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 40 MB")
	}
	const chunk = 1 << 20
	bound := uint64(chunk + 2<<20)
	peak := func(mb int, chunkBytes int64) uint64 {
		s := mustCreate(t, filepath.Join(t.TempDir(), "s"), core.Options{CommitChunkBytes: chunkBytes})
		// A first commit with a split frame (a loose blob and two inline
		// ones, past txn.SplitAbove) makes the process-wide zstd encoder
		// for its groups, which the base then counts: run alone, the
		// test would otherwise count the encoder's state against the
		// first commit measured.
		mustCommit(t, s, core.CommitRequest{Changes: lazyTree(3, nil), Advance: "main"})
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		base, top := m.HeapAlloc, m.HeapAlloc
		n := mb << 20 / 32_800 // 30,000 bytes a file, 100,000 every 25th
		id := mustCommit(t, s, core.CommitRequest{Changes: lazyTree(n, func(live uint64) { top = max(top, live) })})
		sn := snap(t, s)
		for _, i := range []int{0, 1, n / 2, n - 1} {
			got, _, err := sn.ReadPath(id, fmt.Sprintf("d%d/f%d", i%13, i))
			size := 30_000
			if i%25 == 0 {
				size = 100_000
			}
			if err != nil || !bytes.Equal(got, content(i, size)) {
				t.Fatalf("file %d of the %d MB commit does not read back: %v", i, mb, err)
			}
		}
		return top - base
	}
	for _, mb := range []int{8, 24} {
		got := peak(mb, chunk)
		t.Logf("%d MB in chunks of %d bytes: live heap %d bytes over its base", mb, chunk, got)
		if got > bound {
			t.Errorf("a %d MB commit in chunks of %d bytes: live heap %d bytes over its base at a read; want at most %d, whatever the tree's size (go test ./core -run %s)",
				mb, chunk, got, bound, t.Name())
		}
	}
	if got := peak(8, -1); got <= bound {
		t.Errorf("an 8 MB commit in one frame: live heap %d bytes over its base; want more than %d, or the bound shows nothing", got, bound)
	}
}

// TestABigCommitCostsOneSyncPerChunk: a commit whose inline blobs pass the
// chunk writes them ahead of its frame, one frame and one data sync per
// chunk, so it costs one data sync more per chunk, and a smaller commit
// one (TestSteadyStateCommitSyncsOnce). 40 files of 30,000 bytes in
// chunks of 256 KiB: a chunk is full at 9 files, so 4 chunks go ahead and
// the commit makes 5 data syncs; its files read back and a deep verify
// finds nothing.
func TestABigCommitCostsOneSyncPerChunk(t *testing.T) {
	c := faultfs.NewCounting(vfs.OS())
	s := mustCreate(t, filepath.Join(t.TempDir(), "s"), core.Options{FS: c, CommitChunkBytes: 256 << 10})
	chs := make([]core.Change, 40)
	for i := range chs {
		chs[i] = core.Change{Path: fmt.Sprintf("f%02d", i), Data: content(i, 30_000)}
	}
	c.Reset()
	id := mustCommit(t, s, core.CommitRequest{Changes: chs, Advance: "main"})
	perChunk := (256<<10)/30_000 + 1
	want := int64(1 + len(chs)/perChunk)
	if ds := c.Count(faultfs.OpDatasync); ds != want {
		t.Fatalf("a commit of %d files of 30,000 bytes in chunks of 256 KiB made %d data syncs; want %d (one per chunk of %d files, one for the commit's frame)",
			len(chs), ds, want, perChunk)
	}
	sn := snap(t, s)
	for i := range chs {
		got, _, err := sn.ReadPath(id, chs[i].Path)
		if err != nil || !bytes.Equal(got, chs[i].Data) {
			t.Fatalf("%s does not read back: %v", chs[i].Path, err)
		}
	}
	rep, err := s.Verify(true, nil)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("deep verify after a chunked commit: %v, %+v", err, rep)
	}
}
