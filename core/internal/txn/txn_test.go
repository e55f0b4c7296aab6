package txn

import (
	"reflect"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// TestDecodeTxnIntoReusesNothingStale decodes frames of different shapes
// into one txn, as replay does, and checks each against a fresh decode: a
// frame with fewer objects or moves than the one before must not carry the
// earlier frame's over.
func TestDecodeTxnIntoReusesNothingStale(t *testing.T) {
	blob := func(s string) Obj {
		enc := []byte(s) // a blob's encoding is its bytes
		return Obj{Kind: objects.KindBlob, ID: objects.IDOf(objects.KindBlob, enc), Data: enc, Size: int64(len(enc))}
	}
	at := time.Unix(1700000000, 5).UTC()
	frames := []*Txn{
		{Time: at, Objs: []Obj{blob("a"), blob("bb"), blob("ccc")},
			Moves: []refs.Move{{Name: "x", New: objects.ID{1}}, {Name: "y", Old: objects.ID{2}, New: objects.ID{3}}}},
		{Time: at.Add(time.Second), Objs: []Obj{blob("d")}},
		{Time: at.Add(2 * time.Second), Moves: []refs.Move{{Name: "z", Old: objects.ID{4}}}},
		{Time: at.Add(3 * time.Second), Objs: []Obj{blob("e"), blob("f")}, Moves: []refs.Move{{Name: "x", Old: objects.ID{1}, New: objects.ID{5}}}},
	}
	var scratch Txn
	for i, f := range frames {
		p := Encode(f)
		want, err := Decode(p)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if err := DecodeInto(&scratch, p); err != nil {
			t.Fatalf("frame %d into scratch: %v", i, err)
		}
		if !scratch.Time.Equal(want.Time) || len(scratch.Objs) != len(want.Objs) || len(scratch.Moves) != len(want.Moves) ||
			(len(want.Objs) > 0 && !reflect.DeepEqual(scratch.Objs, want.Objs)) ||
			(len(want.Moves) > 0 && !reflect.DeepEqual(scratch.Moves, want.Moves)) {
			t.Fatalf("frame %d: decoded into scratch as %+v; a fresh decode gives %+v", i, scratch, *want)
		}
	}
}
