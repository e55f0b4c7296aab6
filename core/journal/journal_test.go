package journal_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var testStore = journal.StoreID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func cfg(t *testing.T) journal.Config {
	m := faultfs.NewMem()
	if err := m.MkdirAll("/j", 0o755); err != nil {
		t.Fatal(err)
	}
	return journal.Config{FS: m, Dir: "/j", Store: testStore, Key: journal.DeriveKey(testStore), SegmentSize: 8 << 10, Window: 2 << 10}
}

func frame(c journal.Config, seq, wm uint64, payload string) []byte {
	p := []byte(payload)
	return journal.EncodeFrame(c.Key, 1, seq, wm, p, journal.PayloadDigest(p))
}

// TestFrameGolden pins the frame and segment header encodings. Regenerate
// with: go test ./core/journal -run TestFrameGolden -update
func TestFrameGolden(t *testing.T) {
	c := journal.Config{Key: journal.DeriveKey(testStore)}
	got := hex.Dump(frame(c, 7, 5, "hello, journal")) + "\n" +
		hex.Dump(journal.EncodeSegHeader(c.Key, journal.SegHeader{Store: testStore, Seg: 3, FirstSeq: 7})) + "\n" +
		splitGolden(c)
	golden := filepath.Join("testdata", "frame.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./core/journal -run TestFrameGolden -update)", err)
	}
	if got != string(want) {
		t.Fatalf("frame encoding changed (an on-disk format change!).\ngot:\n%s\nwant:\n%s\nIf intended, regenerate with: go test ./core/journal -run TestFrameGolden -update", got, want)
	}
}

func hexDump(b []byte) string { return hex.Dump(b) }

func appendAll(t *testing.T, c journal.Config, payloads ...string) []journal.Pos {
	t.Helper()
	w := journal.NewWriter(c)
	if err := w.CreateSegment(1, 1, 0); err != nil {
		t.Fatal(err)
	}
	end := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	var at []journal.Pos
	for i, p := range payloads {
		fr := frame(c, uint64(i+1), uint64(i), p)
		pos, err := w.Append(end, uint64(i+1), fr)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, pos)
		end = journal.Pos{Seg: pos.Seg, Off: pos.Off + int64(len(fr))}
	}
	w.Close()
	return at
}

func TestScanFollowsRolloverAndStopsAtTheEnd(t *testing.T) {
	c := cfg(t)
	payloads := []string{"a", strings.Repeat("b", 3000), strings.Repeat("c", 3000), "d", strings.Repeat("e", 20000), "f"}
	at := appendAll(t, c, payloads...)
	if at[4].Seg == at[3].Seg || at[5].Seg == at[4].Seg {
		t.Fatalf("a frame larger than the segment must get a segment of its own: %v", at)
	}
	r := journal.NewReader(c)
	defer r.Close()
	var got []string
	res, err := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, func(f *journal.Frame) error {
		got = append(got, string(f.Payload))
		return nil
	})
	if err != nil || res.NextSeq != 7 || strings.Join(got, "|") != strings.Join(payloads, "|") {
		t.Fatalf("scan: %v next %d, got %d frames", err, res.NextSeq, len(got))
	}
	if err := r.Classify(res.End, res.NextSeq, 6); err != nil {
		t.Fatalf("a clean end is not corruption: %v", err)
	}
}

func TestStaleAndForeignBytesNeverParse(t *testing.T) {
	c := cfg(t)
	appendAll(t, c, "one", "two")
	// A frame from another store, written where frame 3 would go.
	other := c
	other.Store[0] ^= 1
	other.Key = journal.DeriveKey(other.Store)
	f, _ := c.FS.OpenFile(c.SegPath(1), os.O_RDWR, 0)
	f.WriteAt(frame(other, 3, 0, "foreign"), 3*journal.FrameAlign)
	// A stale copy of frame 1 (right store, wrong sequence) after it.
	f.WriteAt(frame(c, 1, 0, "one"), 4*journal.FrameAlign)
	f.Close()
	r := journal.NewReader(c)
	defer r.Close()
	res, err := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, nil)
	if err != nil || res.NextSeq != 3 {
		t.Fatalf("scan accepted foreign or stale bytes: next %d, %v", res.NextSeq, err)
	}
}

func TestClassifyTornVersusCorrupt(t *testing.T) {
	c := cfg(t)
	at := appendAll(t, c, "one", "two", "three", "four")
	r := journal.NewReader(c)
	defer r.Close()
	// Damage frame 3's payload: frame 4 (watermark 3) proves 3 was durable.
	f, _ := c.FS.OpenFile(c.SegPath(1), os.O_RDWR, 0)
	f.WriteAt([]byte("X"), at[2].Off+journal.FrameHeaderSize)
	f.Close()
	res, _ := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, nil)
	err := r.Classify(res.End, res.NextSeq, 0)
	var ce *journal.CorruptError
	if res.NextSeq != 3 || !errors.As(err, &ce) || ce.Offset != at[2].Off {
		t.Fatalf("damaged frame 3 followed by frame 4: next %d, %v; want corruption at %d", res.NextSeq, err, at[2].Off)
	}
	// The same damage with only the durable bound from outside.
	if err := r.Classify(res.End, res.NextSeq, 3); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("damage inside the durable prefix: got %v", err)
	}
	// Now damage the last frame instead: nothing proves it durable, it is
	// a torn tail, and CutTail erases it idempotently.
	c2 := cfg(t)
	at2 := appendAll(t, c2, "one", "two", "three")
	f, _ = c2.FS.OpenFile(c2.SegPath(1), os.O_RDWR, 0)
	f.WriteAt([]byte("X"), at2[2].Off+journal.FrameHeaderSize)
	f.Close()
	r2 := journal.NewReader(c2)
	defer r2.Close()
	res, _ = r2.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, nil)
	if err := r2.Classify(res.End, res.NextSeq, 2); err != nil {
		t.Fatalf("torn last frame classified as %v", err)
	}
	n, err := r2.CutTail(res.End)
	if err != nil || n == 0 {
		t.Fatalf("CutTail: %d, %v", n, err)
	}
	if n, err := r2.CutTail(res.End); err != nil || n != 0 {
		t.Fatalf("second CutTail: %d, %v; want nothing left to cut", n, err)
	}
	buf := make([]byte, 64)
	r2.ReadAt(1, res.End.Off, buf)
	if !bytes.Equal(buf, make([]byte, 64)) {
		t.Fatal("tail not zeroed")
	}
}

func TestWriterPreZeroesWholeWindows(t *testing.T) {
	c := cfg(t)
	at := appendAll(t, c, strings.Repeat("z", 2500))
	st, err := c.FS.Stat(c.SegPath(1))
	if err != nil {
		t.Fatal(err)
	}
	end := at[0].Off + journal.FrameSize(2500)
	if st.Size()%(2<<10) != 0 || st.Size() < end {
		t.Fatalf("segment size %d: want a multiple of the 2 KiB window covering %d", st.Size(), end)
	}
}

// TestClassifyFindsProvingFramesAcrossTailPieces: the tail check reads the
// rest of a segment in pieces, and a checksum-valid later frame still proves
// a damaged frame durable when it lies in a later piece, runs past the end of
// its piece, or is larger than a piece.
func TestClassifyFindsProvingFramesAcrossTailPieces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  []int // frames (0-based) whose payload gets a flipped byte
		proving string
	}{
		{"a frame larger than a piece proves its predecessor", []int{1}, "frame 3 (100 KiB)"},
		{"a frame in a later piece, running past it, proves the frames before", []int{1, 2}, "frame 4 (40 KiB, after 100 KiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(t)
			c.SegmentSize, c.Window = 1<<20, 256<<10
			at := appendAll(t, c, "one", "two", strings.Repeat("3", 100<<10), strings.Repeat("4", 40<<10))
			f, _ := c.FS.OpenFile(c.SegPath(1), os.O_RDWR, 0)
			for _, i := range tc.damage {
				f.WriteAt([]byte("X"), at[i].Off+journal.FrameHeaderSize)
			}
			f.Close()
			r := journal.NewReader(c)
			defer r.Close()
			res, _ := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, nil)
			err := r.Classify(res.End, res.NextSeq, 0)
			var ce *journal.CorruptError
			if res.NextSeq != 2 || !errors.As(err, &ce) || ce.Offset != at[1].Off {
				t.Fatalf("damaged frame 2, %s valid later: next %d, %v; want corruption at %d", tc.proving, res.NextSeq, err, at[1].Off)
			}
		})
	}
}

// TestScanBorrowedLendsTheWindow checks ScanBorrowed against Scan: the same
// frames, and payloads that are views of the read window rather than
// copies. The copies were most of a fresh process's page faults in replay;
// with them back, the borrowed scan allocates as much as the copying one
// and the allocation bound fails.
func TestScanBorrowedLendsTheWindow(t *testing.T) {
	c := cfg(t)
	c.SegmentSize = 1 << 20
	var payloads []string
	for i := range 64 {
		payloads = append(payloads, strings.Repeat(string(rune('a'+i%26)), 1000+i))
	}
	appendAll(t, c, payloads...)
	r := journal.NewReader(c)
	defer r.Close()
	start := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	// The fewest bytes of five scans: a collection between them may empty
	// the read window's pool, and the scan that refills it allocates the
	// window too.
	scan := func(borrowed bool) (got []string, allocated uint64) {
		allocated = math.MaxUint64
		for range 5 {
			got = got[:0]
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			fn := func(f *journal.Frame) error {
				got = append(got, string(f.Payload)) // a copy, as a caller that keeps it must make
				return nil
			}
			var err error
			if borrowed {
				_, err = r.ScanBorrowed(start, 1, 0, fn)
			} else {
				_, err = r.Scan(start, 1, 0, fn)
			}
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
		}
		return got, allocated
	}
	copied, copyAlloc := scan(false)
	lent, lendAlloc := scan(true)
	if strings.Join(lent, "|") != strings.Join(payloads, "|") || strings.Join(copied, "|") != strings.Join(payloads, "|") {
		t.Fatalf("scans disagree with what was written: %d and %d frames", len(copied), len(lent))
	}
	var payloadBytes uint64
	for _, p := range payloads {
		payloadBytes += uint64(len(p))
	}
	// Both scans allocate the test's own copies (payloadBytes, in strings)
	// and a frame struct each; only Scan also allocates a copy of each
	// payload and its padding.
	if lendAlloc >= copyAlloc || copyAlloc-lendAlloc < payloadBytes {
		t.Fatalf("ScanBorrowed allocated %d bytes, Scan %d: want at least the %d payload bytes fewer", lendAlloc, copyAlloc, payloadBytes)
	}
}
