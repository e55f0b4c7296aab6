package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"pgregory.net/rapid"
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
		{Time: at, Objs: []Obj{blob("a"), blob("bb"), blob("ccc")}, Origin: refs.Origin{Agent: "a1", Op: refs.OpRefSet},
			Moves: []refs.Move{{Name: "x", New: objects.ID{1}}, {Name: "y", Old: objects.ID{2}, New: objects.ID{3}}}},
		{Time: at.Add(time.Second), Objs: []Obj{blob("d")}},
		{Time: at.Add(2 * time.Second), Moves: []refs.Move{{Name: "z", Old: objects.ID{4}}}, Origin: refs.Origin{Op: refs.OpUndo, Undoes: 7}},
		{Time: at.Add(3 * time.Second), Objs: []Obj{blob("e"), blob("f")}, Moves: []refs.Move{{Name: "x", Old: objects.ID{1}, New: objects.ID{5}}}, Origin: refs.Origin{Op: refs.OpCommit}},
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
		if !scratch.Time.Equal(want.Time) || len(scratch.Objs) != len(want.Objs) || len(scratch.Moves) != len(want.Moves) || scratch.Origin != f.Origin ||
			(len(want.Objs) > 0 && !reflect.DeepEqual(scratch.Objs, want.Objs)) ||
			(len(want.Moves) > 0 && !reflect.DeepEqual(scratch.Moves, want.Moves)) {
			t.Fatalf("frame %d: decoded into scratch as %+v; a fresh decode gives %+v", i, scratch, *want)
		}
	}
}

// noOrigin rewrites a version 3 payload of t, which has moves, as the
// version 2 payload of the same transaction: the origin's bytes cut off its
// end.
func noOrigin(t *Txn) []byte {
	p := Encode(t)
	n := 1 + len(binary.AppendUvarint(nil, uint64(len(t.Origin.Agent)))) + len(t.Origin.Agent)
	if t.Origin.Op == refs.OpUndo {
		n += len(binary.AppendUvarint(nil, t.Origin.Undoes))
	}
	p = p[:len(p)-n]
	p[0] = VersionNoOrigin
	return p
}

// TestPayloadsWithoutOriginDecodeWithOriginUnknown: a frame written
// before moves recorded their origin decodes with the same moves and an
// unknown origin.
func TestPayloadsWithoutOriginDecodeWithOriginUnknown(t *testing.T) {
	tx := &Txn{Time: time.Unix(1700000000, 0).UTC(), Moves: []refs.Move{{Name: "main", New: objects.ID{9}}},
		Origin: refs.Origin{Agent: "agent-7", Op: refs.OpLand}}
	got, err := Decode(noOrigin(tx))
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != (refs.Origin{}) || !reflect.DeepEqual(got.Moves, tx.Moves) {
		t.Fatalf("decoded %+v, want the moves %+v with no origin", got, tx.Moves)
	}
}

// TestOriginsAreEncodedOnlyWithMovesAndChecked: a frame without moves
// carries no origin bytes; an origin a writer may not record (an unknown
// operation, an undo naming no frame) does not decode.
func TestOriginsAreEncodedOnlyWithMovesAndChecked(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	if a, b := Encode(&Txn{Time: at}), Encode(&Txn{Time: at, Origin: refs.Origin{Agent: "x", Op: refs.OpCommit}}); !bytes.Equal(a, b) {
		t.Fatalf("a frame without moves encodes its origin: %x vs %x", a, b)
	}
	for _, o := range []refs.Origin{{Op: refs.OpUnknown}, {Op: 200}, {Op: refs.OpUndo}} {
		p := Encode(&Txn{Time: at, Moves: []refs.Move{{Name: "m", New: objects.ID{1}}}, Origin: o})
		if _, err := Decode(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("origin %+v decoded: %v", o, err)
		}
	}
}

// TestTxnRoundTripsAndTruncationsFail: any transaction with moves and a
// valid origin, and protections (version 4 exactly when it has some),
// decodes to itself, and every proper prefix of its payload
// is an error (the frame's checksum, not the payload, catches bit flips).
func TestTxnRoundTripsAndTruncationsFail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tx := &Txn{Time: time.Unix(0, rapid.Int64().Draw(t, "time")).UTC()}
		for i, n := 0, rapid.IntRange(0, 3).Draw(t, "moves"); i < n; i++ {
			var m refs.Move
			m.Name = fmt.Sprintf("r%d", i)
			m.Old[0], m.New[0] = rapid.Byte().Draw(t, "old"), rapid.Byte().Draw(t, "new")
			tx.Moves = append(tx.Moves, m)
		}
		if len(tx.Moves) > 0 {
			tx.Origin.Op = refs.Op(rapid.IntRange(int(refs.OpCommit), int(refs.OpImport)).Draw(t, "op"))
			tx.Origin.Agent = rapid.StringN(0, 40, -1).Draw(t, "agent")
			if tx.Origin.Op == refs.OpUndo {
				tx.Origin.Undoes = rapid.Uint64Min(1).Draw(t, "undoes")
			}
		}
		for i, n := 0, rapid.IntRange(0, 2).Draw(t, "protections"); i < n; i++ {
			pat := rapid.SampledFrom([]string{"main", "release/", "a/b"}).Draw(t, "pattern")
			tx.Protect = append(tx.Protect, refs.Protection{Pattern: pat, On: rapid.Bool().Draw(t, "on")})
		}
		p := Encode(tx)
		got, err := Decode(p)
		if err != nil {
			t.Fatal(err)
		}
		if (p[0] == VersionProtect) != (len(tx.Protect) > 0) || len(got.Protect) != len(tx.Protect) ||
			(len(tx.Protect) > 0 && !reflect.DeepEqual(got.Protect, tx.Protect)) {
			t.Fatalf("version %d, protections %+v, want %+v", p[0], got.Protect, tx.Protect)
		}
		if got.Origin != tx.Origin || !got.Time.Equal(tx.Time) || len(got.Moves) != len(tx.Moves) ||
			(len(tx.Moves) > 0 && !reflect.DeepEqual(got.Moves, tx.Moves)) {
			t.Fatalf("decoded %+v, want %+v", got, tx)
		}
		for n := range len(p) {
			if _, err := Decode(p[:n]); err == nil {
				t.Fatalf("the first %d of %d bytes decoded", n, len(p))
			}
		}
	})
}

// TestBadProtectionsDoNotDecode: a protection's pattern must be a valid ref
// name or prefix, and its flag 0 or 1.
func TestBadProtectionsDoNotDecode(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	for _, pat := range []string{"", "/", "a//b", "-x", "a..b/"} {
		p := Encode(&Txn{Time: at, Protect: []refs.Protection{{Pattern: pat, On: true}}})
		if _, err := Decode(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("pattern %q decoded: %v", pat, err)
		}
	}
	p := Encode(&Txn{Time: at, Protect: []refs.Protection{{Pattern: "main", On: true}}})
	p[len(p)-1] = 2
	if _, err := Decode(p); !errors.Is(err, ErrMalformed) {
		t.Errorf("flag 2 decoded: %v", err)
	}
}
