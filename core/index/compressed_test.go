package index

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestCompressedRecordsRoundTripInRunsOfVersion2: an object record of a
// compressed inline blob keeps its flag and stored length through a run
// and a merge, and only a run holding one is written as version 2 (which
// a build that predates compressed records refuses at open); version 1
// runs still open. A record whose flags or stored length are impossible
// is a *CorruptError, never a wrong location.
func TestCompressedRecordsRoundTripInRunsOfVersion2(t *testing.T) {
	mem := faultfs.NewMem()
	plain := ObjRecord{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Segment: 3, Offset: 4096, Length: 5000}}
	z := ObjRecord{ID: objects.ID{2}, Kind: objects.KindBlob, Loc: Loc{Segment: 3, Offset: 9000, Length: 65536, Stored: MaxStored}}
	version := func(name string) uint32 { return binary.BigEndian.Uint32(readAll(t, mem, name)[8:]) }
	r1, err := WriteRun(mem, "r1", 1, Batch{Objects: []ObjRecord{plain}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := WriteRun(mem, "r2", 2, Batch{Objects: []ObjRecord{z}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := MergeRuns(mem, "m", 2, []*Run{r2, r1})
	if err != nil {
		t.Fatal(err)
	}
	if v1, v2, vm := version("r1"), version("r2"), version("m"); v1 != 1 || v2 != 2 || vm != 2 {
		t.Fatalf("run versions %d, %d, merged %d; want 1 without a compressed record, 2 with one", v1, v2, vm)
	}
	for _, r := range []*Run{r1, r2, m} {
		if err := r.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		r    *Run
		want ObjRecord
	}{{r1, plain}, {r2, z}, {m, plain}, {m, z}} {
		got, ok, err := c.r.Object(c.want.ID)
		if err != nil || !ok || got != c.want {
			t.Fatalf("Object(%s): %+v %v %v; want %+v", c.want.ID, got, ok, err, c.want)
		}
	}
	// Impossible records, resealed so only the structure check sees them.
	b := readAll(t, mem, "r2")
	at := int(binary.BigEndian.Uint64(b[24+32*tabObj:]))
	for _, bad := range []func(rec []byte){
		func(rec []byte) { rec[33] = flagLoose | flagZ },
		func(rec []byte) { rec[33] = 4 | flagZ },
		func(rec []byte) { binary.BigEndian.PutUint16(rec[34:], 0) },
		func(rec []byte) { binary.BigEndian.PutUint32(rec[48:], MaxStored) }, // stored not below size
		func(rec []byte) { rec[33] = 0 },                                       // stored length without the flag
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
			t.Fatalf("damaged record read as %+v %v, %v; want ErrCorrupt", got, ok, err)
		}
		r.Close()
	}
}
