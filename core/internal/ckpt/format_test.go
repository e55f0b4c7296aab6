package ckpt

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// fixture is a checkpoint at next seq 20 whose ref table's last moves
// carry origins of every shape: an agent, none, an undo, and the unknown
// origin of a move written before origins were recorded.
func fixture() ([]byte, map[string]refs.Entry) {
	at := time.Unix(1700000000, 7).UTC()
	want := map[string]refs.Entry{
		"main":     {Seq: 12, Old: objects.ID{1}, New: objects.ID{2}, Time: at, Origin: refs.Origin{Agent: "agent-3", Op: refs.OpLand}},
		"agent/a":  {Seq: 15, New: objects.ID{3}, Time: at, Origin: refs.Origin{Op: refs.OpRefCreate}},
		"agent/b":  {Seq: 17, Old: objects.ID{4}, New: objects.ID{5}, Time: at, Origin: refs.Origin{Agent: "b", Op: refs.OpUndo, Undoes: 9}},
		"old/ref1": {Seq: 3, New: objects.ID{6}, Time: at},
	}
	rt := refs.New()
	for n, e := range want {
		rt.Apply(e.Seq, e.Time, e.Origin, []refs.Move{{Name: n, Old: e.Old, New: e.New}})
	}
	rt.ApplyProtections(4, []refs.Protection{{Pattern: "release/", On: true}, {Pattern: "old", On: true}})
	rt.ApplyProtections(8, []refs.Protection{{Pattern: "main", On: true}, {Pattern: "old", On: false}})
	var id journal.StoreID
	id[0] = 1
	return Encode(id, journal.Pos{Seg: 1, Off: journal.FirstFrame}, 20, 1, []string{"run-1"}, 512, rt), want
}

// TestLastMovesKeepTheirOrigins: each ref's last move comes back from a
// checkpoint with its origin.
func TestLastMovesKeepTheirOrigins(t *testing.T) {
	b, want := fixture()
	c, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want {
		e, ok := c.Proj.Refs.Last(n, 19)
		if !ok || e.Seq != w.Seq || e.Old != w.Old || e.New != w.New || !e.Time.Equal(w.Time) || e.Origin != w.Origin {
			t.Errorf("%s: %+v, want %+v", n, e, w)
		}
	}
}

// TestVersion3CheckpointsAreReadWithOriginsUnknown: a checkpoint written
// before origins were recorded still opens, its last moves with an unknown
// origin.
func TestVersion3CheckpointsAreReadWithOriginsUnknown(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	// Version 3's body, built by hand: no runs, reflog 0, one ref.
	b := make([]byte, headerSize)
	copy(b, magic[:])
	binary.LittleEndian.PutUint32(b[8:], VersionNoOrigin)
	binary.LittleEndian.PutUint64(b[32:], 1)
	binary.LittleEndian.PutUint64(b[40:], uint64(journal.FirstFrame))
	binary.LittleEndian.PutUint64(b[48:], 5)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, 4)
	b = append(b, "main"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, make([]byte, 32)...)
	eight := objects.ID{8}
	b = append(b, eight[:]...)
	b = binary.AppendUvarint(b, uint64(at.UnixNano()))
	sum := b3.Sum256(b)
	c, err := Decode(append(b, sum[:]...))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := c.Proj.Refs.Last("main", 4); !ok || e.New != (objects.ID{8}) || e.Origin != (refs.Origin{}) || !e.Time.Equal(at) {
		t.Fatalf("main: %+v, %v; want its move to 08… with no origin", e, ok)
	}
}

// TestEveryBitFlipInACheckpointIsDetected: the checkpoint's checksum covers
// the origins and the protected patterns with everything else.
func TestEveryBitFlipInACheckpointIsDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, _ := fixture()
		bit := rapid.IntRange(0, len(b)*8-1).Draw(t, "bit")
		b[bit/8] ^= 1 << (bit % 8)
		if _, err := Decode(b); err == nil {
			t.Fatalf("bit %d flipped decoded without an error", bit)
		}
	})
}

// TestProtectionsSetBeforeTheCheckpointAreKept: the checkpoint holds the
// patterns set as of its position, each with its frame, and not a cleared
// one.
func TestProtectionsSetBeforeTheCheckpointAreKept(t *testing.T) {
	b, _ := fixture()
	c, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	pats, seqs := c.Proj.Refs.Protected(19)
	if fmt.Sprint(pats, seqs) != "[main release/] [8 4]" {
		t.Fatalf("protected %v %v, want [main release/] [8 4]", pats, seqs)
	}
}
