package state

import (
	"testing"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
)

// TestReadStableRetriesOnlyTornReads (P9): ReadStable reads an invalid
// record again only when a concurrent write in this boot may have torn it.
// What a power loss leaves (a missing, short or zero record, or one from
// another boot) is read once, so an Open after a power loss does not sleep.
func TestReadStableRetriesOnlyTornReads(t *testing.T) {
	var key journal.Key
	boot, other := BootHash("this boot"), BootHash("another boot")
	rec := Rec{Epoch: 1, Pos: journal.Pos{Seg: 1, Off: journal.FirstFrame}, NextSeq: 1}
	valid := func(b [16]byte) []byte { r := rec; r.Boot = b; return Encode(key, End, r) }
	torn := func(b [16]byte) []byte { x := valid(b); x[33] ^= 1; return x }
	for _, tc := range []struct {
		name  string
		bytes []byte
		reads int64
	}{
		{"missing", nil, 1},
		{"short", valid(boot)[:20], 1},
		{"zero", make([]byte, RecSize), 1},
		{"another boot, bad checksum", torn(other), 1},
		{"valid", valid(boot), 1},
		{"this boot, bad checksum", torn(boot), 5},
	} {
		m := faultfs.NewMem()
		if tc.bytes != nil {
			f, err := m.Create("/state")
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(tc.bytes, 0)
			f.Close()
		}
		c := faultfs.NewCounting(m)
		sf := New(c, "/state", key)
		_, ok, err := sf.ReadStable(End, boot)
		sf.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := c.PathCount(faultfs.OpRead, "/state"); n != tc.reads || ok != (tc.name == "valid") {
			t.Fatalf("%s: %d reads, ok %v; want %d reads", tc.name, n, ok, tc.reads)
		}
	}
}
