package index

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// v1Run is a run written by the build before compressed groups (version
// 1, 56-byte object records): two objects, one of them loose, and a
// changeset. It is kept as written then, with no regeneration switch:
// this build cannot write version 1.
const v1Run = "testdata/v1.run"

// TestGroupRecordsRoundTripAndVersion1RunsStillOpen: an object record of
// a blob in a compressed group keeps its flag, stored length and inner
// offset through a run and a merge with a version 1 run, which still
// opens and reads as it was written. A record whose flags, stored length
// or inner offset are impossible is a *CorruptError, never a wrong
// location.
func TestGroupRecordsRoundTripAndVersion1RunsStillOpen(t *testing.T) {
	mem := faultfs.NewMem()
	v1, err := os.ReadFile(v1Run)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, mem, "old", v1)
	old, err := OpenRun(mem, "old")
	if err != nil {
		t.Fatalf("open a version 1 run: %v", err)
	}
	if err := old.Verify(); err != nil {
		t.Fatal(err)
	}
	var oldObjs []ObjRecord
	if err := (&View{runs: []*Run{old}}).ForEachObject(func(o ObjRecord) error { oldObjs = append(oldObjs, o); return nil }); err != nil || len(oldObjs) != 2 {
		t.Fatalf("version 1 run: %d objects, %v; want 2", len(oldObjs), err)
	}
	z := ObjRecord{ID: objects.ID{2}, Kind: objects.KindBlob, Loc: Loc{Segment: 3, Offset: 9000, Length: 5000, Stored: 70_000, Inner: MaxGroup - 5000}}
	r2, err := WriteRun(mem, "r2", 2, Batch{Objects: []ObjRecord{z}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := MergeRuns(mem, "m", 2, []*Run{r2, old})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"r2", "m"} {
		if v := binary.BigEndian.Uint32(readAll(t, mem, name)[8:]); v != runVersion {
			t.Fatalf("%s is version %d; want %d", name, v, runVersion)
		}
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    *Run
		want ObjRecord
	}{{r2, z}, {m, z}, {m, oldObjs[0]}, {m, oldObjs[1]}, {old, oldObjs[1]}} {
		got, ok, err := c.r.Object(c.want.ID)
		if err != nil || !ok || got != c.want {
			t.Fatalf("Object(%s): %+v %v %v; want %+v", c.want.ID, got, ok, err, c.want)
		}
	}
	// Impossible records, resealed so only the structure check sees them.
	b := readAll(t, mem, "r2")
	at := int(binary.BigEndian.Uint64(b[24+32*tabObj:]))
	for i, bad := range []func(rec []byte){
		func(rec []byte) { rec[33] = flagLoose | flagZ },
		func(rec []byte) { rec[33] = 4 | flagZ },
		func(rec []byte) { rec[34] = 1 },
		func(rec []byte) { binary.BigEndian.PutUint32(rec[52:], 0) },
		func(rec []byte) { binary.BigEndian.PutUint32(rec[52:], MaxGroup+1) },
		func(rec []byte) { binary.BigEndian.PutUint32(rec[56:], MaxGroup-4999) }, // past the group's end
		func(rec []byte) { rec[33] = 0 },                                         // a group without the flag
	} {
		d := append([]byte(nil), b...)
		rec := d[at : at+objRecSize]
		bad(rec)
		sealRec(tabObj, 0, rec)
		writeAll(t, mem, "bad", d)
		r, err := OpenRun(mem, "bad")
		if err != nil {
			t.Fatal(err)
		}
		if got, ok, err := r.Object(z.ID); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damage %d: read as %+v %v, %v; want ErrCorrupt", i, got, ok, err)
		}
		r.Close()
	}
}
