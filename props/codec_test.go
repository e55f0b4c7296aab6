package props

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/spf13/afero"
	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// --- objects ---------------------------------------------------------------

var nameChars = []byte("abcxyz.-_09")

// drawID draws an id from a small pool or at random, so that equal ids occur.
func drawID(t *rapid.T, label string) objects.ID {
	if rapid.Bool().Draw(t, label+" pooled") {
		return objects.BlobID([]byte{byte(rapid.IntRange(0, 3).Draw(t, label+" pool"))})
	}
	var id objects.ID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	if id.IsZero() {
		id[0] = 1
	}
	return id
}

// drawTree draws a valid tree: sorted unique valid names, valid modes,
// non-zero ids.
func drawTree(t *rapid.T) *objects.Tree {
	names := rapid.SliceOfNDistinct(
		rapid.StringOfN(rapid.SampledFrom([]rune(string(nameChars))), 1, 12, -1).Filter(func(s string) bool { return objects.ValidName(s) == nil }),
		0, 8, rapid.ID[string]).Draw(t, "names")
	sort.Strings(names)
	tr := &objects.Tree{}
	for _, n := range names {
		tr.Entries = append(tr.Entries, objects.Entry{
			Name: n,
			Mode: rapid.SampledFrom([]objects.Mode{objects.ModeFile, objects.ModeExec, objects.ModeDir}).Draw(t, "mode "+n),
			ID:   drawID(t, "id "+n),
		})
	}
	return tr
}

// drawChangesetObject draws a valid changeset.
func drawChangesetObject(t *rapid.T) *objects.Changeset {
	np := rapid.IntRange(0, 3).Draw(t, "parents")
	c := &objects.Changeset{
		Root:       drawID(t, "root"),
		Generation: rapid.Uint64Range(1, 1<<40).Draw(t, "generation"),
		Agent:      rapid.StringN(0, 20, -1).Draw(t, "agent"),
		Message:    rapid.StringN(0, 60, -1).Draw(t, "message"),
		Time:       time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).UTC(),
	}
	copy(c.Delta[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "delta"))
	seen := map[objects.ID]bool{}
	for i := 0; i < np; i++ {
		p := drawID(t, fmt.Sprint("parent ", i))
		if seen[p] {
			continue
		}
		seen[p] = true
		c.Parents = append(c.Parents, p)
	}
	return c
}

// drawObject draws a tree or a changeset and returns its kind, value and
// canonical encoding.
func drawObject(t *rapid.T) (objects.Kind, any, []byte) {
	var obj any
	if rapid.Bool().Draw(t, "tree") {
		obj = drawTree(t)
	} else {
		obj = drawChangesetObject(t)
	}
	k, b, err := objects.Encode(obj)
	if err != nil {
		t.Fatalf("Encode of a valid %T: %v", obj, err)
	}
	return k, obj, b
}

// TestObjectEncodingsRoundTrip: decode(encode(x)) = x and
// encode(decode(b)) = b for trees and changesets.
func TestObjectEncodingsRoundTrip(t *testing.T) {
	check(t, 200, func(t *rapid.T) {
		k, obj, b := drawObject(t)
		got, err := objects.Decode(k, b)
		if err != nil {
			t.Fatalf("Decode(%v, Encode(%+v)): %v", k, obj, err)
		}
		if c, ok := got.(*objects.Changeset); ok && len(c.Parents) == 0 {
			c.Parents = nil
		}
		if c, ok := obj.(*objects.Changeset); ok && len(c.Parents) == 0 {
			c.Parents = nil
		}
		if tr, ok := got.(*objects.Tree); ok && len(tr.Entries) == 0 {
			tr.Entries = nil
		}
		if !reflect.DeepEqual(normalize(got), normalize(obj)) {
			t.Fatalf("round trip changed the object:\n got %+v\nwant %+v", got, obj)
		}
		_, again, err := objects.Encode(got)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding the decoded object gives %x, %v; want %x", again, err, b)
		}
	})
}

// normalize makes a decoded value comparable with DeepEqual: times compare
// by instant, not by location pointer.
func normalize(v any) any {
	if c, ok := v.(*objects.Changeset); ok {
		cc := *c
		cc.Time = time.Unix(0, c.Time.UnixNano()).UTC()
		if cc.Time.Unix() != c.Time.Unix() { // outside int64 nanoseconds
			cc.Time = c.Time.UTC()
		}
		return &cc
	}
	return v
}

// decodeFunc decodes an object; objects.Decode is the real one, the others
// are deliberately broken variants for the canary tests.
type decodeFunc func(k objects.Kind, b []byte) (any, error)

// decodeIgnoringVersion is a broken decoder that does not check the format
// version byte (it overwrites it with the current version first).
func decodeIgnoringVersion(k objects.Kind, b []byte) (any, error) {
	if len(b) > 0 {
		b = append([]byte{objects.FormatVersion}, b[1:]...)
	}
	return objects.Decode(k, b)
}

// decodeZeroPadding is a broken decoder that reads into a buffer of the
// expected size and ignores a short read: a truncated encoding is padded
// with zeros.
func decodeZeroPadding(want int) decodeFunc {
	return func(k objects.Kind, b []byte) (any, error) {
		if len(b) < want {
			b = append(bytes.Clone(b), make([]byte, want-len(b))...)
		}
		return objects.Decode(k, b)
	}
}

// TestObjectBitFlipsAreDetected: every single-bit flip of an encoding
// either fails to decode, or decodes to a different object whose canonical
// encoding is the flipped bytes themselves (so its id differs and a reader
// that checks ids rejects it). A flip must never decode to the original
// object, which would make corruption invisible to an id check.
func TestObjectBitFlipsAreDetected(t *testing.T) {
	check(t, 100, objectFlipProp(objects.Decode))
}

func objectFlipProp(decode decodeFunc) func(*rapid.T) {
	return func(t *rapid.T) {
		k, _, b := drawObject(t)
		want := objects.IDOf(k, b)
		for bit := 0; bit < 8*len(b); bit++ {
			f := bytes.Clone(b)
			f[bit/8] ^= 1 << (bit % 8)
			obj, err := decode(k, f)
			if err != nil {
				if !errors.Is(err, objects.ErrMalformed) {
					t.Fatalf("flip of bit %d: error %v does not wrap objects.ErrMalformed", bit, err)
				}
				continue
			}
			_, enc, err := objects.Encode(obj)
			if err != nil {
				t.Fatalf("flip of bit %d decodes to an object that cannot be encoded: %v", bit, err)
			}
			if !bytes.Equal(enc, f) {
				t.Fatalf("flip of bit %d of a %v decodes to an object whose encoding is %x, not the flipped bytes %x: two encodings for one object", bit, k, enc, f)
			}
			if objects.IDOf(k, enc) == want {
				t.Fatalf("flip of bit %d keeps the id", bit)
			}
		}
	}
}

// TestObjectTruncationsAreErrors: every proper prefix of an encoding is an
// error, never a (shorter) object.
func TestObjectTruncationsAreErrors(t *testing.T) {
	check(t, 200, objectTruncProp(func(int) decodeFunc { return objects.Decode }))
}

func objectTruncProp(decoder func(full int) decodeFunc) func(*rapid.T) {
	return func(t *rapid.T) {
		k, _, b := drawObject(t)
		decode := decoder(len(b))
		for n := 0; n < len(b); n++ {
			if obj, err := decode(k, b[:n]); err == nil {
				t.Fatalf("the first %d of %d bytes of a %v decode to %+v", n, len(b), k, obj)
			} else if !errors.Is(err, objects.ErrMalformed) {
				t.Fatalf("truncation to %d bytes: error %v does not wrap objects.ErrMalformed", n, err)
			}
		}
	}
}

// --- journal frames --------------------------------------------------------

// journalFixture is one segment on a memory FS with frames written by the
// journal's own writer.
type journalFixture struct {
	fs     *faultfs.MemFS
	cfg    journal.Config
	frames []*journal.Frame // as written: kind, seq, watermark, payload, pos, size
}

const fixtureJournalDir = "/j"

func newJournalFixture(t fataler, kinds []uint8, payloads [][]byte, skipChecksum bool) *journalFixture {
	fx := &journalFixture{fs: faultfs.NewMem()}
	var store journal.StoreID
	copy(store[:], "props-fixture-id")
	fx.cfg = journal.Config{FS: fx.fs, Dir: fixtureJournalDir, Store: store, Key: journal.DeriveKey(store), SegmentSize: 1 << 20, Window: 4096, SkipChecksum: skipChecksum}
	if err := fx.fs.MkdirAll(fixtureJournalDir, 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	w := journal.NewWriter(fx.cfg)
	defer w.Close()
	if err := w.CreateSegment(1, 1, 0); err != nil {
		t.Fatalf("CreateSegment: %v", err)
	}
	end := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	for i, p := range payloads {
		seq := uint64(i + 1)
		b := journal.EncodeFrame(fx.cfg.Key, kinds[i], seq, seq-1, p, journal.PayloadDigest(p))
		at, err := w.Append(end, seq, b)
		if err != nil {
			t.Fatalf("Append frame %d: %v", seq, err)
		}
		fx.frames = append(fx.frames, &journal.Frame{Kind: kinds[i], Seq: seq, Watermark: seq - 1, Payload: p, Pos: at, Size: int64(len(b))})
		end = journal.Pos{Seg: at.Seg, Off: at.Off + int64(len(b))}
	}
	return fx
}

// segBytes reads the whole segment file.
func (fx *journalFixture) segBytes(t fataler) []byte {
	b, err := afero.ReadFile(fx.fs, fx.cfg.SegPath(1))
	if err != nil {
		t.Fatalf("reading the segment: %v", err)
	}
	return b
}

// setSeg replaces the segment's bytes.
func (fx *journalFixture) setSeg(t fataler, b []byte) {
	if err := afero.WriteFile(fx.fs, fx.cfg.SegPath(1), b, 0o644); err != nil {
		t.Fatalf("writing the segment: %v", err)
	}
}

func sameFrame(a, b *journal.Frame) bool {
	return a.Kind == b.Kind && a.Seq == b.Seq && a.Watermark == b.Watermark && bytes.Equal(a.Payload, b.Payload) && a.Pos == b.Pos && a.Size == b.Size
}

func drawFrames(t *rapid.T) ([]uint8, [][]byte) {
	n := rapid.IntRange(1, 4).Draw(t, "frames")
	var kinds []uint8
	var payloads [][]byte
	for i := 0; i < n; i++ {
		kinds = append(kinds, rapid.Uint8().Draw(t, fmt.Sprint("kind ", i)))
		payloads = append(payloads, rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, fmt.Sprint("payload ", i)))
	}
	return kinds, payloads
}

// scanAll scans the fixture's segment from the start.
func scanAll(fx *journalFixture) ([]*journal.Frame, journal.ScanResult, error) {
	r := journal.NewReader(fx.cfg)
	defer r.Close()
	var got []*journal.Frame
	res, err := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, 1, 0, func(f *journal.Frame) error {
		got = append(got, f)
		return nil
	})
	return got, res, err
}

// TestFramesRoundTrip: frames written by the journal writer scan back
// exactly, and the scan ends after the last one.
func TestFramesRoundTrip(t *testing.T) {
	const skipChecksum = false
	check(t, 100, func(t *rapid.T) {
		kinds, payloads := drawFrames(t)
		fx := newJournalFixture(t, kinds, payloads, skipChecksum)
		got, res, err := scanAll(fx)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if len(got) != len(fx.frames) {
			t.Fatalf("Scan found %d frames; wrote %d", len(got), len(fx.frames))
		}
		for i := range got {
			if !sameFrame(got[i], fx.frames[i]) {
				t.Fatalf("frame %d scans as %+v; wrote %+v", i, got[i], fx.frames[i])
			}
		}
		if last := fx.frames[len(fx.frames)-1]; res.End != last.End() || res.NextSeq != last.Seq+1 {
			t.Fatalf("Scan ended at %v next seq %d; want %v, %d", res.End, res.NextSeq, last.End(), last.Seq+1)
		}
	})
}

// TestFrameBitFlipsAreDetected: flipping any single bit of a frame's header
// or payload makes the scan stop before that frame, so the frame and
// everything after it are never returned; the frames before it still scan
// exactly. The zero padding after the payload is not under the checksum, but
// the reader requires it to be zero, so a flip there is detected the same way;
// it is sampled, since frames are padded to a whole sector.
func TestFrameBitFlipsAreDetected(t *testing.T) {
	check(t, 40, frameFlipProp(false))
}

// frameFlipProp is the bit-flip property; skipChecksum runs it against the
// journal's SkipChecksum canary.
func frameFlipProp(skipChecksum bool) func(*rapid.T) {
	return func(t *rapid.T) {
		kinds, payloads := drawFrames(t)
		fx := newJournalFixture(t, kinds, payloads, skipChecksum)
		orig := fx.segBytes(t)
		victim := rapid.IntRange(0, len(fx.frames)-1).Draw(t, "victim")
		fr := fx.frames[victim]
		covered := int64(journal.FrameHeaderSize + len(fr.Payload))
		// Every bit the checksum covers, and every 61st bit of the padding
		// up to the next sector.
		for bit := int64(0); bit < 8*fr.Size; bit++ {
			if bit/8 >= covered && bit%61 != 0 {
				continue
			}
			b := bytes.Clone(orig)
			b[fr.Pos.Off+bit/8] ^= 1 << (bit % 8)
			fx.setSeg(t, b)
			got, _, err := scanAll(fx)
			if err != nil {
				t.Fatalf("flip of bit %d of frame %d: Scan: %v", bit, fr.Seq, err)
			}
			want := fx.frames[:victim]
			if len(got) != len(want) {
				t.Fatalf("flip of bit %d (byte %d of %d, %d covered) of frame %d: Scan returned %d frames; want %d", bit, bit/8, fr.Size, covered, fr.Seq, len(got), len(want))
			}
			for i := range got {
				if !sameFrame(got[i], want[i]) {
					t.Fatalf("flip of bit %d of frame %d: frame %d scans as %+v; want %+v", bit, fr.Seq, i, got[i], want[i])
				}
			}
		}
	}
}

// TestFrameTruncationsAreTornTails: cutting the segment at any length
// leaves exactly the frames that lie wholly before the cut; a partial frame
// is a torn tail (the scan stops), never an error and never a shorter frame.
func TestFrameTruncationsAreTornTails(t *testing.T) {
	const skipChecksum = false
	check(t, 25, func(t *rapid.T) {
		kinds, payloads := drawFrames(t)
		fx := newJournalFixture(t, kinds, payloads, skipChecksum)
		orig := fx.segBytes(t)
		last := fx.frames[len(fx.frames)-1]
		for n := int64(journal.SegHeaderSize); n <= last.End().Off; n++ {
			fx.setSeg(t, orig[:n])
			got, res, err := scanAll(fx)
			if err != nil {
				t.Fatalf("truncation to %d bytes: Scan: %v", n, err)
			}
			var want []*journal.Frame
			for _, f := range fx.frames {
				if f.End().Off <= n {
					want = append(want, f)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("truncation to %d bytes: Scan returned %d frames; want %d", n, len(got), len(want))
			}
			for i := range got {
				if !sameFrame(got[i], want[i]) {
					t.Fatalf("truncation to %d bytes: frame %d scans as %+v; want %+v", n, i, got[i], want[i])
				}
			}
			if res.NextSeq != uint64(len(want))+1 {
				t.Fatalf("truncation to %d bytes: next seq %d; want %d", n, res.NextSeq, len(want)+1)
			}
		}
	})
}

// TestSegmentHeaderBitFlipsAreDetected: every single-bit flip of a segment
// header fails DecodeSegHeader.
func TestSegmentHeaderBitFlipsAreDetected(t *testing.T) {
	check(t, 20, func(t *rapid.T) {
		var h journal.SegHeader
		copy(h.Store[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "store"))
		h.Seg = rapid.Uint64Range(1, 1<<40).Draw(t, "seg")
		h.FirstSeq = rapid.Uint64Range(1, 1<<40).Draw(t, "firstSeq")
		key := journal.DeriveKey(h.Store)
		b := journal.EncodeSegHeader(key, h)
		got, err := journal.DecodeSegHeader(key, b)
		if err != nil || got != h {
			t.Fatalf("DecodeSegHeader(EncodeSegHeader(%+v)) = %+v, %v", h, got, err)
		}
		for bit := 0; bit < 8*len(b); bit++ {
			f := bytes.Clone(b)
			f[bit/8] ^= 1 << (bit % 8)
			if got, err := journal.DecodeSegHeader(key, f); err == nil {
				t.Fatalf("flip of bit %d of a segment header decodes to %+v", bit, got)
			}
		}
		for n := 0; n < len(b); n++ {
			if got, err := journal.DecodeSegHeader(key, b[:n]); err == nil {
				t.Fatalf("the first %d bytes of a segment header decode to %+v", n, got)
			}
		}
	})
}

// --- helpers ---------------------------------------------------------------

// --- canaries: each codec property fails against a broken variant ----------

func TestCanaryObjectFlipsCatchADecoderIgnoringTheVersion(t *testing.T) {
	expectFailure(t, 100, "a decoder that ignores the version byte", objectFlipProp(decodeIgnoringVersion))
}

func TestCanaryObjectTruncationsCatchAZeroPaddingDecoder(t *testing.T) {
	expectFailure(t, 100, "a decoder that zero-pads short input", objectTruncProp(decodeZeroPadding))
}

func TestCanaryFrameFlipsCatchSkippedChecksums(t *testing.T) {
	expectFailure(t, 60, "the journal with checksum verification off (SkipChecksum)", frameFlipProp(true))
}
