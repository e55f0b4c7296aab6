package index

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestFilterHasEveryKeyItWasBuiltFrom: a filter never excludes a key it
// holds, whatever the keys (random ids, and ids that differ in one byte,
// as small test ids do). Skipping filterAdd's write made it fail.
func TestFilterHasEveryKeyItWasBuiltFrom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 3000).Draw(t, "n")
		small := rapid.Bool().Draw(t, "small")
		seed := rapid.Uint64().Draw(t, "seed")
		r := rand.New(rand.NewPCG(seed, 2))
		keys := make([]objects.ID, n)
		for i := range keys {
			if small {
				binary.BigEndian.PutUint32(keys[i][28:], uint32(i))
			} else {
				keys[i] = rid(r)
			}
		}
		f := make([]byte, int64(filterBlocks(uint64(n)))*filterBlockSize)
		for _, k := range keys {
			filterAdd(f, k[:])
		}
		for i, k := range keys {
			if !filterHas(f, k[:]) {
				t.Fatalf("key %d of %d excluded", i, n)
			}
		}
	})
}

// TestFilterExcludesMostAbsentKeys: at filterBitsPerKey bits a key, a
// split-block filter passes about 0.5 % of the keys it does not hold. The
// bound is 1 %; a filter of a quarter the size (3 bits a key) passed 57 %.
func TestFilterExcludesMostAbsentKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t, 5), 5))
	const n, probes = 100_000, 200_000
	f := make([]byte, int64(filterBlocks(n))*filterBlockSize)
	for range n {
		k := rid(r)
		filterAdd(f, k[:])
	}
	fp := 0
	for range probes {
		k := rid(r)
		if filterHas(f, k[:]) {
			fp++
		}
	}
	rate := float64(fp) / probes
	t.Logf("%d keys in %d bytes: %.3f %% of absent keys pass", n, len(f), 100*rate)
	if rate > 0.01 {
		t.Fatalf("%.3f %% of absent keys pass the filter; want at most 1 %%", 100*rate)
	}
}

// TestWarmMissesReadNothing: once a run has loaded its fanouts and filters,
// a lookup of an id it does not hold reads no file (all but about 0.5 % of
// them), and so does a lookup by a prefix of 12 hex digits or more, while
// a hit still reads its bucket. Without the filter check in Changeset and
// Object every miss read one bucket: "2000 misses read 2000 times"; without
// it in prefix lookups, "1000 prefix misses read 2000 times" (both tables).
func TestWarmMissesReadNothing(t *testing.T) {
	mem := faultfs.NewMem()
	_, g, b := writeTestRun(t, mem, "run", 2000, 2000, 13)
	c := faultfs.NewCounting(mem)
	r, err := OpenRun(c, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.LoadFanout(); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	const misses = 1000
	for range misses {
		if _, ok, err := r.Changeset(g.cs().ID); ok || err != nil {
			t.Fatalf("changeset miss: %v %v", ok, err)
		}
		if _, ok, err := r.Object(g.obj().ID); ok || err != nil {
			t.Fatalf("object miss: %v %v", ok, err)
		}
	}
	if got := c.Count(faultfs.OpRead); got > 2*misses/50 {
		t.Fatalf("%d misses read %d times; want at most %d", 2*misses, got, 2*misses/50)
	}
	// A prefix as long as the CLI's short id (12 hex digits) or longer
	// asks the filters too; a shorter one cannot.
	c.Reset()
	for range misses {
		id := g.cs().ID
		if m, err := r.Prefix(prefixOf(t, id, 12), 4); len(m) > 0 || err != nil {
			t.Fatalf("prefix miss: %v %v", m, err)
		}
	}
	if got := c.Count(faultfs.OpRead); got > 2*misses/50 {
		t.Fatalf("%d prefix misses read %d times; want at most %d", misses, got, 2*misses/50)
	}
	c.Reset()
	for _, x := range b.Changesets[:100] {
		if _, ok, err := r.Changeset(x.ID); !ok || err != nil {
			t.Fatalf("hit: %v %v", ok, err)
		}
		for _, n := range []int{4, 11, 12, 13, 64} {
			m, err := r.Prefix(prefixOf(t, x.ID, n), 4)
			if err != nil || !slices.ContainsFunc(m, func(m Match) bool { return m.ID == x.ID }) {
				t.Fatalf("prefix of %d digits of a changeset the run holds: %v %v", n, m, err)
			}
		}
	}
	if got := c.Count(faultfs.OpRead); got < 100 {
		t.Fatalf("100 hits read %d times; want at least one each", got)
	}
}

func prefixOf(t *testing.T, id objects.ID, nibbles int) objects.Prefix {
	t.Helper()
	p, err := objects.ParsePrefix(id.String()[:nibbles])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDamagedFilterIsCorruptWhenLoaded: a flipped bit in a filter could
// make it exclude a key the run holds, so loading it checks its checksum
// and a lookup gets a CorruptError rather than a wrong "absent". Verify
// finds the same damage. With the checksum test removed from filter, the
// lookups after the load answered "absent" for records the run holds.
func TestDamagedFilterIsCorruptWhenLoaded(t *testing.T) {
	mem := faultfs.NewMem()
	r0, _, b := writeTestRun(t, mem, "good", 500, 500, 14)
	orig := readAll(t, mem, "good")
	for tab := byte(0); tab < nFiltered; tab++ {
		fl := r0.h.filt[tab]
		if fl.blocks == 0 {
			t.Fatalf("table %d has no filter", tab)
		}
		bad := slices.Clone(orig)
		// Clear a whole block: every key that picked it now fails its probe.
		clear(bad[fl.off : fl.off+filterBlockSize])
		writeAll(t, mem, "bad", bad)
		r, err := OpenRun(mem, "bad")
		if err != nil {
			t.Fatal(err)
		}
		var lerr error
		for i := 0; i < 2*preloadAfter && lerr == nil; i++ {
			if tab == tabCS {
				_, _, lerr = r.Changeset(b.Changesets[i%len(b.Changesets)].ID)
			} else {
				_, _, lerr = r.Object(b.Objects[i%len(b.Objects)].ID)
			}
		}
		if !errors.Is(lerr, ErrCorrupt) {
			t.Fatalf("table %d: lookups past the filter's load returned %v; want ErrCorrupt", tab, lerr)
		}
		if err := r.Verify(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("table %d: Verify returned %v; want ErrCorrupt", tab, err)
		}
		r.Close()
	}
}

// TestRunsWithOtherFilterSchemesAreReadWithoutThem: a run whose header
// names no filter scheme (written before filters) or another one is read
// through its tables, and finds every record. Trusting a filter of another
// scheme would answer "absent" for records the run holds.
func TestRunsWithOtherFilterSchemesAreReadWithoutThem(t *testing.T) {
	mem := faultfs.NewMem()
	_, _, b := writeTestRun(t, mem, "good", 300, 300, 15)
	orig := readAll(t, mem, "good")
	for _, scheme := range []byte{0, filterScheme + 1} {
		bad := slices.Clone(orig)
		bad[208] = scheme
		binary.BigEndian.PutUint32(bad[headerCRCAt:], crc32.Checksum(bad[:headerCRCAt], castagnoli))
		writeAll(t, mem, "other", bad)
		r, err := OpenRun(mem, "other")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.LoadFanout(); err != nil {
			t.Fatal(err)
		}
		if f, _ := r.filter(tabCS); f != nil {
			t.Fatalf("scheme %d: the changeset filter was loaded", scheme)
		}
		for _, c := range b.Changesets {
			if _, ok, err := r.Changeset(c.ID); !ok || err != nil {
				t.Fatalf("scheme %d: changeset %x: %v %v", scheme, c.ID[:4], ok, err)
			}
		}
		if err := r.Verify(); err != nil {
			t.Fatalf("scheme %d: Verify: %v", scheme, err)
		}
		r.Close()
	}
}

// TestPresenceChecksLoadTheFilterWhenItPays: HasChangeset without the
// filter reads the run (two reads a check) until those reads have cost
// about what loading the filter costs (FilterBytesPerCheck bytes a check);
// then it loads the filter and later checks of absent ids read nothing.
// ExpectChangesetChecks loads it at once for enough expected checks, not
// for a few. Without the load in has every check read twice.
func TestPresenceChecksLoadTheFilterWhenItPays(t *testing.T) {
	mem := faultfs.NewMem()
	r0, g, b := writeTestRun(t, mem, "run", 20000, 10, 16)
	size := int64(r0.h.filt[tabCS].blocks) * filterBlockSize
	due := int((size + FilterBytesPerCheck - 1) / FilterBytesPerCheck)
	c := faultfs.NewCounting(mem)
	r, err := OpenRun(c, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.ExpectChangesetChecks(due / 2); err != nil || r.filt[tabCS].Load() != nil {
		t.Fatalf("expecting %d checks against a %d-byte filter loaded it (%v)", due/2, size, err)
	}
	for _, x := range b.Changesets[:5] {
		if ok, err := r.HasChangeset(x.ID); !ok || err != nil {
			t.Fatalf("present: %v %v", ok, err)
		}
	}
	c.Reset()
	for range 4 * due {
		if ok, err := r.HasChangeset(g.cs().ID); ok || err != nil {
			t.Fatalf("absent: %v %v", ok, err)
		}
	}
	got := c.Count(faultfs.OpRead)
	if r.filt[tabCS].Load() == nil || got > int64(2*due+2+4*due/50) {
		t.Fatalf("%d checks of absent ids against a %d-byte filter read %d times (filter loaded: %v); want at most %d", 4*due, size, got, r.filt[tabCS].Load() != nil, 2*due+2+4*due/50)
	}
	r2, err := OpenRun(c, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.ExpectChangesetChecks(due); err != nil || r2.filt[tabCS].Load() == nil {
		t.Fatalf("expecting %d checks against a %d-byte filter did not load it (%v)", due, size, err)
	}
}
