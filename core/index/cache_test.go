package index

import (
	"testing"

	"github.com/swarmops/swarmops/faultfs"
)

// TestCachedBlocksAreStillChecked flips each byte of a run in turn and
// looks every record up twice through a BlockCache: lookups served from the
// cache must answer as lookups that read the file, a CorruptError for a
// damaged record, never a wrong record. With blocks cached unchecked and
// their records trusted it failed ("flip at 288: lookup 0 of 00d55082
// returned a wrong record without error", from a block an earlier lookup
// in the same bucket had cached).
func TestCachedBlocksAreStillChecked(t *testing.T) {
	mem := faultfs.NewMem()
	_, _, b := writeTestRun(t, mem, "good", 40, 40, 11)
	eachFlip(t, mem, headerSize, func(off int, r *Run) {
		r.SetCache(NewBlockCache(1 << 20))
		for _, c := range b.Changesets {
			for pass := 0; pass < 2; pass++ {
				got, ok, err := r.Changeset(c.ID)
				if err != nil {
					checkCorrupt(t, err, off)
				} else if ok && !eqCS(got, c) {
					t.Fatalf("flip at %d: lookup %d of %x returned a wrong record without error", off, pass, c.ID[:4])
				}
			}
		}
		for _, o := range b.Objects {
			for pass := 0; pass < 2; pass++ {
				got, ok, err := r.Object(o.ID)
				if err != nil {
					checkCorrupt(t, err, off)
				} else if ok && got != o {
					t.Fatalf("flip at %d: lookup %d of %x returned a wrong record without error", off, pass, o.ID[:4])
				}
			}
		}
	})
}

// TestCachedLookupReadsNothing: once a BlockCache holds a bucket, a lookup
// that falls in it (a hit, a miss, a delta hash) reads no file; without
// the cache the same lookups read again. (Parents beyond the first live in
// the run's heap, which is read each time: those records are left out.) With SetCache a no-op it
// failed: "with the cache, repeated lookups read 151 times; want 0".
func TestCachedLookupReadsNothing(t *testing.T) {
	mem := faultfs.NewMem()
	_, g, b := writeTestRun(t, mem, "run", 2000, 2000, 12)
	for _, cache := range []bool{true, false} {
		c := faultfs.NewCounting(mem)
		r, err := OpenRun(c, "run")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.LoadFanout(); err != nil {
			t.Fatal(err)
		}
		if cache {
			r.SetCache(NewBlockCache(8 << 20))
		}
		miss := g.cs().ID
		var one []CSRecord
		for _, x := range b.Changesets {
			if len(x.Parents) <= 1 && len(one) < 50 {
				one = append(one, x)
			}
		}
		lookups := func() {
			for _, x := range one {
				if _, ok, err := r.Changeset(x.ID); !ok || err != nil {
					t.Fatalf("Changeset: %v %v", ok, err)
				}
				if _, err := r.ByDelta(x.Delta); err != nil {
					t.Fatal(err)
				}
			}
			for _, x := range b.Objects[:50] {
				if _, ok, err := r.Object(x.ID); !ok || err != nil {
					t.Fatalf("Object: %v %v", ok, err)
				}
			}
			if _, ok, err := r.Changeset(miss); ok || err != nil {
				t.Fatalf("miss: %v %v", ok, err)
			}
		}
		lookups()
		c.Reset()
		lookups()
		got := c.Count(faultfs.OpRead)
		if cache && got != 0 {
			t.Fatalf("with the cache, repeated lookups read %d times; want 0", got)
		}
		if !cache && got < 150 {
			t.Fatalf("without the cache, repeated lookups read %d times; want one each", got)
		}
		r.Close()
	}
}
