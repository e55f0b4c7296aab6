package reflog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/faultfs"
)

func reflogFixture() ([]byte, map[string][]refs.Entry) {
	id := func(b byte) objects.ID { var x objects.ID; x[0] = b; return x }
	at := time.Unix(1700000000, 5).UTC()
	a := []refs.Entry{
		{Seq: 3, Old: objects.ZeroID, New: id(1), Time: at, Origin: refs.Origin{Agent: "agent-1", Op: refs.OpRefCreate}},
		{Seq: 5, Old: id(1), New: id(2), Time: at.Add(time.Second), Origin: refs.Origin{Agent: "agent-2", Op: refs.OpCommit}},
		{Seq: 9, Old: id(7), New: id(3), Time: at.Add(-time.Hour), Origin: refs.Origin{Agent: "agent-1", Op: refs.OpUndo, Undoes: 5}}, // old is not the previous new
	}
	b := []refs.Entry{{Seq: 4, Old: id(9), New: objects.ZeroID, Time: at}} // an origin carried from before origins
	c1 := EncodeChunk(1, 10, []string{"a", "b"}, [][]refs.Entry{a, b})
	c := []refs.Entry{{Seq: 12, Old: id(3), New: id(4), Time: at, Origin: refs.Origin{Op: refs.OpLand}}}
	c2 := EncodeChunk(10, 20, []string{"a"}, [][]refs.Entry{c})
	return append(c1, c2...), map[string][]refs.Entry{"a": append(a, c...), "b": b}
}

// chunkV1 returns the version 1 chunk of testdata/chunk-v1.golden: the
// moves of frames 1 to 5 that TestVersion1ChunksAreReadBeforeVersion2Ones
// wants, as a build before origins wrote them.
func chunkV1(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "chunk-v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var h strings.Builder
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "#") {
			h.WriteString(l)
		}
	}
	b, err := hex.DecodeString(h.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameEntries(t *testing.T, got, want map[string][]refs.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d refs, want %d", len(got), len(want))
	}
	for name, es := range want {
		if len(got[name]) != len(es) {
			t.Fatalf("%s: %d moves, want %d", name, len(got[name]), len(es))
		}
		for i, e := range es {
			g := got[name][i]
			if g.Seq != e.Seq || g.Old != e.Old || g.New != e.New || !g.Time.Equal(e.Time) || g.Origin != e.Origin {
				t.Fatalf("%s[%d] = %+v, want %+v", name, i, g, e)
			}
		}
	}
}

// TestReflogChunksRoundTrip: chunks decode to the moves encoded, with their
// origins, across chunks, with old values given explicitly and implied by
// the previous move, and times going backwards; every chunk is
// sector-aligned.
func TestReflogChunksRoundTrip(t *testing.T) {
	file, want := reflogFixture()
	if len(file)%Align != 0 {
		t.Fatalf("chunks take %d bytes, not a multiple of %d", len(file), Align)
	}
	got, err := Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, want)
}

// TestVersion1ChunksAreReadBeforeVersion2Ones: a file whose older chunks
// were written before origins decodes whole, the old moves with an
// unknown origin, both at once and walked from its end.
func TestVersion1ChunksAreReadBeforeVersion2Ones(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	old := []refs.Entry{{Seq: 2, New: objects.ID{1}, Time: at}, {Seq: 3, Old: objects.ID{1}, New: objects.ID{2}, Time: at}}
	cur := []refs.Entry{{Seq: 7, Old: objects.ID{2}, New: objects.ID{3}, Time: at, Origin: refs.Origin{Agent: "a", Op: refs.OpCommit}}}
	file := append(chunkV1(t), EncodeChunk(5, 8, []string{"main"}, [][]refs.Entry{cur})...)
	got, err := Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, map[string][]refs.Entry{"main": append(append([]refs.Entry(nil), old...), cur...)})
	fs := memFile(t, file)
	var seen []uint64
	if err := ReadBack(fs, "/s", int64(len(file)), 0, ^uint64(0), func(c *Chunk) bool {
		seen = append(seen, c.From)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != "[5 1]" {
		t.Fatalf("chunks walked from the end: froms %v, want [5 1]", seen)
	}
}

func memFile(t interface{ Fatal(...any) }, b []byte) *faultfs.MemFS {
	fs := faultfs.NewMem()
	if err := fs.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(fs, "/s", 0, b, false); err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestAnEmptyReflogNeedsNoFile: a checkpoint naming no reflog bytes reads
// no file, so none need exist, by every reader; one naming bytes of a
// missing file is corruption.
func TestAnEmptyReflogNeedsNoFile(t *testing.T) {
	fs := faultfs.NewMem()
	all := func(*Chunk) bool { t.Error("a chunk of an empty reflog"); return true }
	for length, want := range map[int64]error{0: nil, Align: errs.ErrCorrupt} {
		m, err := Read(fs, "/s", length)
		if !errors.Is(err, want) || want == nil && len(m) != 0 {
			t.Errorf("Read of %d bytes: %v, %v; want %v", length, m, err, want)
		}
		if err := ReadBack(fs, "/s", length, 0, ^uint64(0), all); !errors.Is(err, want) {
			t.Errorf("ReadBack of %d bytes: %v, want %v", length, err, want)
		}
		if err := ReadAll(fs, "/s", length, 0, ^uint64(0), all); !errors.Is(err, want) {
			t.Errorf("ReadAll of %d bytes: %v, want %v", length, err, want)
		}
	}
}

// manyChunks is a file of n chunks, chunk i holding one move of frame
// 10*i+1 of ref "r", and the moves.
func manyChunks(n int) ([]byte, []refs.Entry) {
	var file []byte
	var all []refs.Entry
	at := time.Unix(1700000000, 0).UTC()
	for i := range n {
		e := refs.Entry{Seq: uint64(10*i + 1), New: objects.ID{byte(i + 1)}, Time: at, Origin: refs.Origin{Agent: "w", Op: refs.OpCommit}}
		if i > 0 {
			e.Old = objects.ID{byte(i)}
		}
		all = append(all, e)
		file = append(file, EncodeChunk(uint64(10*i), uint64(10*i+10), []string{"r"}, [][]refs.Entry{{e}})...)
	}
	return file, all
}

// TestReadBackReadsOnlyTheChunksAfterItsStart: the moves after a sequence
// number near the end of a long file cost a few reads, not one per chunk
// and not the whole file; until bounds the walk's other end.
func TestReadBackReadsOnlyTheChunksAfterItsStart(t *testing.T) {
	file, all := manyChunks(200)
	c := faultfs.NewCounting(memFile(t, file))
	var got []uint64
	if err := ReadBack(c, "/s", int64(len(file)), all[197].Seq, ^uint64(0), func(ch *Chunk) bool {
		for _, e := range ch.Logs[0] {
			if e.Seq > all[197].Seq { // a chunk holding a later frame may hold earlier ones
				got = append(got, e.Seq)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint([]uint64{all[199].Seq, all[198].Seq}) {
		t.Fatalf("moves %v, want the last two, newest first", got)
	}
	if n := c.Count(faultfs.OpRead); n > 4 {
		t.Fatalf("reading the last 2 of 200 chunks took %d reads, want at most 4 (three chunks and the trailer that ends the walk)", n)
	}
	c.Reset()
	got = nil
	if err := ReadBack(c, "/s", int64(len(file)), all[99].Seq-1, all[99].Seq, func(ch *Chunk) bool {
		got = append(got, ch.Logs[0][0].Seq)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint([]uint64{all[99].Seq}) {
		t.Fatalf("moves %v, want only frame %d's", got, all[99].Seq)
	}
	if n := c.Count(faultfs.OpRead); n > 102 {
		t.Fatalf("reading one chunk in the middle took %d reads: one trailer per newer chunk, the chunk and the trailer that ends the walk, want at most 102", n)
	}
}

// TestEveryBitFlipInAChunkIsDetected: a flipped bit anywhere in a version 2
// chunk, header, body, checksum, padding or trailer, fails the decoder and
// the walk from the end with a *CorruptError naming the file; none is
// read as other moves.
func TestEveryBitFlipInAChunkIsDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		file, _ := reflogFixture()
		bit := rapid.IntRange(0, len(file)*8-1).Draw(t, "bit")
		file[bit/8] ^= 1 << (bit % 8)
		if _, err := Decode(file); err == nil {
			t.Fatalf("bit %d flipped decoded without an error", bit)
		}
		fs := memFile(t, file)
		err := ReadBack(fs, "/s", int64(len(file)), 0, ^uint64(0), func(*Chunk) bool { return true })
		var ce *errs.CorruptError
		if !errors.As(err, &ce) || ce.File != "/s/"+Name {
			t.Fatalf("bit %d flipped: ReadBack returned %v, want a *CorruptError naming the reflog", bit, err)
		}
	})
}

// FuzzDecodeReflog: arbitrary bytes never panic the decoder or the walk
// from the end, and every byte flipped inside a chunk is an error.
func FuzzDecodeReflog(f *testing.F) {
	file, _ := reflogFixture()
	f.Add(file, 0, byte(1))
	f.Add(file[:40], 3, byte(0x80))
	f.Add([]byte{}, 0, byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at int, x byte) {
		Decode(b)
		if n := len(b) / Align * Align; n > 0 {
			ReadBack(memFile(t, b[:n]), "/s", int64(n), 0, ^uint64(0), func(*Chunk) bool { return true })
		}
		if !bytes.Equal(b, file) || at < 0 || x == 0 {
			return
		}
		c := bytes.Clone(file)
		c[at%len(c)] ^= x
		if _, err := Decode(c); err == nil {
			t.Fatalf("byte %d xor %#x decoded without an error", at%len(c), x)
		}
	})
}
