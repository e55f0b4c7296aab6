package journal_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/journal"
)

// splitFrames appends frames 1..3 to a new journal: a plain frame, a split
// frame (head "HEAD", a body of 3,000 bytes) and another split frame whose
// watermark is 2. It returns the positions and the split payload.
func splitFrames(t *testing.T, c journal.Config) ([]journal.Pos, []byte) {
	t.Helper()
	w := journal.NewWriter(c)
	defer w.Close()
	if err := w.CreateSegment(1, 1, 0); err != nil {
		t.Fatal(err)
	}
	split := append([]byte("HEAD"), bytes.Repeat([]byte("b"), 3000)...)
	frames := [][]byte{
		frame(c, 1, 0, "plain"),
		journal.EncodeFrameDigests(c.Key, 1, 2, 1, split, journal.PayloadDigests(split, 4)),
		journal.EncodeFrameDigests(c.Key, 1, 3, 2, split, journal.PayloadDigests(split, 4)),
	}
	end := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	var at []journal.Pos
	for i, fr := range frames {
		pos, err := w.Append(end, uint64(i+1), fr)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, pos)
		end = journal.Pos{Seg: pos.Seg, Off: pos.Off + int64(len(fr))}
	}
	return at, split
}

// scanAll returns the frames a scan (ScanHeads when heads) finds from the
// first frame.
func scanAll(t *testing.T, r *journal.Reader, heads bool) []journal.Frame {
	t.Helper()
	var got []journal.Frame
	keep := func(fr *journal.Frame) error {
		f := *fr
		f.Payload = append([]byte(nil), fr.Payload...)
		got = append(got, f)
		return nil
	}
	scan := r.Scan
	if heads {
		scan = r.ScanHeads
	}
	if _, err := scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, keep); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSplitFramesReadWholeOrByHead: a split frame reads back whole through
// Scan and as its head alone through ScanHeads; damage to its body stops
// Scan (and a later frame's watermark makes it corruption) but not
// ScanHeads; damage to its head stops both.
func TestSplitFramesReadWholeOrByHead(t *testing.T) {
	c := cfg(t)
	at, split := splitFrames(t, c)
	r := journal.NewReader(c)
	defer r.Close()
	whole, heads := scanAll(t, r, false), scanAll(t, r, true)
	if len(whole) != 3 || !bytes.Equal(whole[1].Payload, split) || whole[1].Head != 4 || whole[1].HeadOnly {
		t.Fatalf("Scan: %d frames, frame 2 head %d of %d bytes; want 3 frames and the whole split payload", len(whole), whole[1].Head, len(whole[1].Payload))
	}
	if len(heads) != 3 || string(heads[1].Payload) != "HEAD" || !heads[1].HeadOnly || heads[1].Len != len(split) ||
		string(heads[0].Payload) != "plain" || heads[1].End() != whole[1].End() {
		t.Fatalf("ScanHeads: %+v; want frame 2's head only, and the same ends", heads)
	}
	flip := func(off int64) {
		f, err := c.FS.OpenFile(c.SegPath(1), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		f.ReadAt(b, off)
		f.WriteAt([]byte{b[0] ^ 1}, off)
	}
	bodyAt := at[1].Off + journal.FrameHeaderSize + journal.BodyDigestSize + 4 + 1500
	flip(bodyAt)
	r.Forget()
	if n := len(scanAll(t, r, false)); n != 1 {
		t.Fatalf("Scan after a flip in frame 2's body: %d frames; want 1", n)
	}
	if n := len(scanAll(t, r, true)); n != 3 {
		t.Fatalf("ScanHeads after a flip in frame 2's body: %d frames; want 3 (the body is not read)", n)
	}
	res, _ := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, nil)
	var ce *journal.CorruptError
	if err := r.Classify(res.End, res.NextSeq, 0); !errors.As(err, &ce) || ce.Offset != at[1].Off {
		t.Fatalf("Classify: %v; want corruption at %d (frame 3's watermark covers frame 2)", err, at[1].Off)
	}
	flip(bodyAt)
	flip(at[1].Off + journal.FrameHeaderSize + journal.BodyDigestSize + 1) // the head
	r.Forget()
	if n := len(scanAll(t, r, true)); n != 1 {
		t.Fatalf("ScanHeads after a flip in frame 2's head: %d frames; want 1", n)
	}
	flip(at[1].Off + journal.FrameHeaderSize + journal.BodyDigestSize + 1)
	flip(at[1].Off + journal.FrameHeaderSize + 3) // the body digest
	r.Forget()
	if n := len(scanAll(t, r, true)); n != 1 {
		t.Fatalf("ScanHeads after a flip in frame 2's body digest: %d frames; want 1", n)
	}
}

// splitGolden is the hex dump of a split frame, pinned in frame.golden.
func splitGolden(c journal.Config) string {
	p := []byte("head|" + strings.Repeat("body", 4))
	return "split frame (head 5 bytes):\n" + hexDump(journal.EncodeFrameDigests(c.Key, 1, 8, 7, p, journal.PayloadDigests(p, 5)))
}
