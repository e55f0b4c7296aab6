package reflog

import (
	"bytes"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

func reflogFixture() ([]byte, map[string][]refs.Entry) {
	id := func(b byte) objects.ID { var x objects.ID; x[0] = b; return x }
	at := time.Unix(1700000000, 5).UTC()
	a := []refs.Entry{
		{Seq: 3, Old: objects.ZeroID, New: id(1), Time: at},
		{Seq: 5, Old: id(1), New: id(2), Time: at.Add(time.Second)},
		{Seq: 9, Old: id(7), New: id(3), Time: at.Add(-time.Hour)}, // old is not the previous new
	}
	b := []refs.Entry{{Seq: 4, Old: id(9), New: objects.ZeroID, Time: at}}
	c1 := EncodeChunk(1, 10, []string{"a", "b"}, [][]refs.Entry{a, b})
	c := []refs.Entry{{Seq: 12, Old: id(3), New: id(4), Time: at}}
	c2 := EncodeChunk(10, 20, []string{"a"}, [][]refs.Entry{c})
	return append(c1, c2...), map[string][]refs.Entry{"a": append(a, c...), "b": b}
}

// TestReflogChunksRoundTrip: chunks decode to the moves encoded, across
// chunks, with old values given explicitly and implied by the previous
// move, and times going backwards; every chunk is sector-aligned.
func TestReflogChunksRoundTrip(t *testing.T) {
	file, want := reflogFixture()
	if len(file)%Align != 0 {
		t.Fatalf("chunks take %d bytes, not a multiple of %d", len(file), Align)
	}
	got, err := Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, es := range want {
		if len(got[name]) != len(es) {
			t.Fatalf("%s: %d moves, want %d", name, len(got[name]), len(es))
		}
		for i, e := range es {
			g := got[name][i]
			if g.Seq != e.Seq || g.Old != e.Old || g.New != e.New || !g.Time.Equal(e.Time) {
				t.Fatalf("%s[%d] = %+v, want %+v", name, i, g, e)
			}
		}
	}
}

// FuzzDecodeReflog: arbitrary bytes never panic the decoder, and every
// byte flipped inside a chunk (before its padding) is an error.
func FuzzDecodeReflog(f *testing.F) {
	file, _ := reflogFixture()
	f.Add(file, 0, byte(1))
	f.Add(file[:40], 3, byte(0x80))
	f.Add([]byte{}, 0, byte(0))
	f.Fuzz(func(t *testing.T, b []byte, at int, x byte) {
		Decode(b)
		if !bytes.Equal(b, file) || at < 0 || x == 0 {
			return
		}
		// The first chunk's header, body and checksum end before its
		// padding; only those bytes are covered.
		end := hdrSize + int(uint32(file[8])|uint32(file[9])<<8) + 32
		at %= end
		c := bytes.Clone(file)
		c[at] ^= x
		if _, err := Decode(c); err == nil {
			t.Fatalf("byte %d xor %#x decoded without an error", at, x)
		}
	})
}
