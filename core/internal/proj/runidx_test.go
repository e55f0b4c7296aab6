package proj

import (
	"encoding/binary"
	"testing"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestCheckpointLoadsAFilterOnlyWhenItPays: expectObjectChecks reads a
// run's object filter only when the presence checks it saves (two reads
// each) cost more than reading it, at index.FilterBytesPerCheck bytes a
// check; so a checkpoint of a few objects does not read the megabyte
// filter of a run of a million (at 1M a changeset filter's read was most of
// an open after a SIGKILL), and one of many does. Loading it whatever the
// count made the first case read it.
func TestCheckpointLoadsAFilterOnlyWhenItPays(t *testing.T) {
	m := faultfs.NewMem()
	if err := m.MkdirAll("/s/index", 0o755); err != nil {
		t.Fatal(err)
	}
	var b index.Batch
	for i := range 5000 {
		var id objects.ID
		binary.BigEndian.PutUint64(id[:], uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(id[8:], uint64(i)+1)
		b.Objects = append(b.Objects, index.ObjRecord{ID: id, Kind: objects.KindBlob, Loc: index.Loc{Segment: 1, Offset: 64, Length: 100}})
	}
	r, err := index.WriteRun(m, "/s/index/run", 5001, b)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	size := int64(filterBlocksFor(5000)) * 32
	few := int(size/index.FilterBytesPerCheck) - 1
	for _, tc := range []struct {
		lookups int
		load    bool
	}{{few, false}, {few + 2, true}} {
		c := faultfs.NewCounting(m)
		x, err := index.Open(c, []string{"/s/index/run"})
		if err != nil {
			t.Fatal(err)
		}
		ri := NewRunIdx(x, []string{"run"})
		c.Reset()
		ri.ExpectObjectChecks(tc.lookups)
		if err := ri.TakeErr(); err != nil {
			t.Fatal(err)
		}
		if got := c.Count(faultfs.OpRead) > 0; got != tc.load {
			t.Errorf("%d lookups against a %d-byte filter: loaded %v, want %v", tc.lookups, size, got, tc.load)
		}
		ri.Close()
	}
}

// filterBlocksFor is index's sizing (12 bits a key in 32-byte blocks).
func filterBlocksFor(n int) int { return (n*12 + 255) / 256 }
