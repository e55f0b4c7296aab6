package index

import (
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// FuzzOpenRun feeds arbitrary bytes to OpenRun, every lookup, iteration and
// Verify: none may panic, and damage must come back as an error. Seeds are
// valid runs, so the fuzzer mutates real structure.
func FuzzOpenRun(f *testing.F) {
	for _, n := range []int{0, 3, 40} {
		mem := faultfs.NewMem()
		g := newGen(uint64(n))
		b := g.batch(n, n)
		if n > 0 {
			b.Changesets[0].Parents = []objects.ID{{1}, {2}}
			b.Objects[0].Loc = Loc{Segment: 1, Offset: 512, Length: 9000, Stored: 2000} // compressed: a version 2 run
		}
		if _, err := WriteRun(mem, "seed", 1, b); err != nil {
			f.Fatal(err)
		}
		f.Add(readAll(f, mem, "seed"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := faultfs.NewMem()
		writeAll(t, mem, "run", data)
		r, err := OpenRun(mem, "run")
		if err != nil {
			return
		}
		defer r.Close()
		var id objects.ID
		if len(data) >= 300 {
			copy(id[:], data[256:288])
		}
		r.Changeset(id)
		r.Object(id)
		r.ByDelta(objects.Hash(id))
		if p, err := objects.ParsePrefix(id.String()[:5]); err == nil {
			r.Prefix(p, 4)
		}
		r.LoadFanout()
		v := &View{runs: []*Run{r}}
		v.Counts()
		r.Verify()
	})
}
