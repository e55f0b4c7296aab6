package props

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/swarmops/swarmops/core/journal"
)

// seedFrames returns segment bodies (the bytes after the header) holding
// valid frames under the fixture key, so the fuzzer starts from inputs the
// scanner accepts and mutates them from there.
func seedFrames(t testing.TB) [][]byte {
	fx := newJournalFixture(t, []uint8{1, 2, 1}, [][]byte{[]byte("first"), {}, bytes.Repeat([]byte("x"), 70)}, false)
	seg := fx.segBytes(t)
	last := fx.frames[len(fx.frames)-1]
	body := seg[journal.FirstFrame:last.End().Off]
	return [][]byte{
		nil,
		make([]byte, 1024),
		body,
		body[:len(body)-3],
		append(bytes.Clone(body), make([]byte, 64)...),
	}
}

// FuzzJournalScan writes arbitrary bytes after a valid segment header and
// scans them. Whatever the bytes, the scan must not panic, and every frame it
// returns must be exactly what the encoder produces for the frame's fields
// under the store's key: a frame whose checksum does not verify is never
// accepted. Sequence numbers must run 1, 2, 3… and Classify of the stop must
// not panic either.
func FuzzJournalScan(f *testing.F) {
	for _, s := range seedFrames(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := checkJournalScan(t, body, false); err != nil {
			t.Fatal(err)
		}
	})
}

// checkJournalScan is FuzzJournalScan's property; skipChecksum runs it
// against the journal's SkipChecksum canary.
func checkJournalScan(t *testing.T, body []byte, skipChecksum bool) error {
	fx := newJournalFixture(t, nil, nil, skipChecksum)
	hdr := fx.segBytes(t)[:journal.FirstFrame]
	seg := append(bytes.Clone(hdr), body...)
	fx.setSeg(t, seg)
	got, res, err := scanAll(fx)
	if err != nil {
		// Only I/O can fail a scan, and a memory FS has none.
		return fmt.Errorf("Scan over %d bytes: %w", len(body), err)
	}
	for i, fr := range got {
		if fr.Seq != uint64(i+1) {
			return fmt.Errorf("frame %d carries seq %d", i, fr.Seq)
		}
		enc := journal.EncodeFrame(fx.cfg.Key, fr.Kind, fr.Seq, fr.Watermark, fr.Payload, journal.PayloadDigest(fr.Payload))
		on := seg[fr.Pos.Off : fr.Pos.Off+int64(journal.FrameHeaderSize+len(fr.Payload))]
		if !bytes.Equal(on, enc[:len(on)]) {
			return fmt.Errorf("accepted frame %d at %v differs from its encoding: on disk %x, encoded %x", fr.Seq, fr.Pos, on, enc[:len(on)])
		}
	}
	r := journal.NewReader(fx.cfg)
	defer r.Close()
	_ = r.Classify(res.End, res.NextSeq, 0)
	return nil
}

// TestCanaryJournalScanCatchesSkippedChecksums: the fuzz property rejects a
// scanner that accepts a frame with a flipped payload byte.
func TestCanaryJournalScanCatchesSkippedChecksums(t *testing.T) {
	body := bytes.Clone(seedFrames(t)[2])
	body[journal.FrameHeaderSize] ^= 0x40 // the first payload byte of the first frame
	if err := checkJournalScan(t, body, false); err != nil {
		t.Fatalf("the correct journal fails the property: %v", err)
	}
	err := checkJournalScan(t, body, true)
	if err == nil {
		t.Fatal("the journal-scan property passed against SkipChecksum")
	}
	logOnFailure(t, "as required, the property failed against SkipChecksum: %v", err)
}

// FuzzSegmentHeader decodes arbitrary bytes as a segment header. It must
// not panic, and a header it accepts must be the encoder's output for the
// decoded fields.
func FuzzSegmentHeader(f *testing.F) {
	var store journal.StoreID
	copy(store[:], "props-fixture-id")
	key := journal.DeriveKey(store)
	f.Add(journal.EncodeSegHeader(key, journal.SegHeader{Store: store, Seg: 1, FirstSeq: 1}))
	f.Add(journal.EncodeSegHeader(key, journal.SegHeader{Store: store, Seg: 7, FirstSeq: 1 << 40}))
	f.Add(make([]byte, journal.SegHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := journal.DecodeSegHeader(key, b)
		if err != nil {
			return
		}
		if enc := journal.EncodeSegHeader(key, h); !bytes.Equal(enc, b[:journal.SegHeaderSize]) {
			t.Fatalf("accepted header %x re-encodes as %x", b[:journal.SegHeaderSize], enc)
		}
	})
}
