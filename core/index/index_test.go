package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// testSeed returns SWARMOPS_TEST_SEED, or def. A malformed value fails the
// test: a silent default would test something other than what was asked.
func testSeed(t testing.TB, def uint64) uint64 {
	s := os.Getenv("SWARMOPS_TEST_SEED")
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("SWARMOPS_TEST_SEED=%q: %v", s, err)
	}
	return v
}

func rid(r *rand.Rand) objects.ID {
	var id objects.ID
	for i := 0; i < 32; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	return id
}

// gen makes random records. deltas is a small pool so that delta hashes
// repeat, as they do when the same change lands twice.
type gen struct {
	r      *rand.Rand
	deltas []objects.Hash
	ids    []objects.ID
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 1))}
	for range 50 {
		g.deltas = append(g.deltas, objects.Hash(rid(g.r)))
	}
	return g
}

func (g *gen) loc() Loc {
	if g.r.IntN(10) == 0 {
		return Loc{Loose: true, Length: g.r.Uint32()}
	}
	return Loc{Segment: g.r.Uint32N(100), Offset: g.r.Int64N(1 << 40), Length: g.r.Uint32()}
}

func (g *gen) cs() CSRecord {
	c := CSRecord{ID: rid(g.r), Generation: g.r.Uint64(), Delta: g.deltas[g.r.IntN(len(g.deltas))], Loc: g.loc()}
	np := []int{0, 1, 1, 1, 1, 2, 3}[g.r.IntN(7)]
	for range np {
		c.Parents = append(c.Parents, rid(g.r))
	}
	g.ids = append(g.ids, c.ID)
	return c
}

func (g *gen) obj() ObjRecord {
	o := ObjRecord{ID: rid(g.r), Kind: objects.Kind(1 + g.r.IntN(2)), Loc: g.loc()}
	if l := &o.Loc; !l.Loose && g.r.IntN(4) == 0 { // a blob of a compressed group
		l.Stored, l.Inner, l.Length = 1+g.r.Uint32N(MaxGroup), g.r.Uint32N(MaxGroup/2), g.r.Uint32N(MaxGroup/2)
	}
	g.ids = append(g.ids, o.ID)
	return o
}

func (g *gen) batch(ncs, nobj int) Batch {
	var b Batch
	for range ncs {
		b.Changesets = append(b.Changesets, g.cs())
	}
	for range nobj {
		b.Objects = append(b.Objects, g.obj())
	}
	return b
}

// model is the plain-map truth the index is compared against.
type model struct {
	cs  map[objects.ID]CSRecord
	obj map[objects.ID]ObjRecord
}

func newModel() *model {
	return &model{cs: map[objects.ID]CSRecord{}, obj: map[objects.ID]ObjRecord{}}
}

func (m *model) add(b Batch) {
	for _, c := range b.Changesets {
		m.cs[c.ID] = c
	}
	for _, o := range b.Objects {
		m.obj[o.ID] = o
	}
}

func eqCS(a, b CSRecord) bool {
	return a.ID == b.ID && a.Generation == b.Generation && a.Delta == b.Delta && a.Loc == b.Loc && slices.Equal(a.Parents, b.Parents)
}

// check compares every kind of lookup of v with m, for every known id, a
// few unknown ones, prefixes of several lengths and every delta hash.
func (m *model) check(t *testing.T, v *View, g *gen, seed uint64) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+" (reproduce: SWARMOPS_TEST_SEED=%d go test ./core/index)", append(args, seed)...)
	}
	for id, want := range m.cs {
		got, ok, err := v.Changeset(id)
		if err != nil || !ok || !eqCS(got, want) {
			fail("Changeset(%s) = %+v, %v, %v; want %+v", id, got, ok, err, want)
		}
		o, ok, err := v.Object(id)
		if err != nil || !ok || o.Kind != objects.KindChangeset || o.Loc != want.Loc {
			fail("Object(changeset %s) = %+v, %v, %v", id, o, ok, err)
		}
	}
	for id, want := range m.obj {
		got, ok, err := v.Object(id)
		if err != nil || !ok || got != want {
			fail("Object(%s) = %+v, %v, %v; want %+v", id, got, ok, err, want)
		}
		if _, ok, err := v.Changeset(id); ok || err != nil {
			fail("Changeset(object %s) found it (err %v)", id, err)
		}
	}
	for range 20 {
		miss := rid(g.r)
		if _, ok, err := v.Object(miss); ok || err != nil {
			fail("Object(unknown %s) = %v, %v", miss, ok, err)
		}
	}
	// Prefixes: every known id at 4, 5 and 9 digits, against a brute-force scan.
	n := 0
	for id := range m.cs {
		if n++; n > 25 {
			break
		}
		for _, digits := range []int{4, 5, 9} {
			p, err := objects.ParsePrefix(id.String()[:digits])
			if err != nil {
				t.Fatal(err)
			}
			var want []objects.ID
			for id2 := range m.cs {
				if p.Match(id2) {
					want = append(want, id2)
				}
			}
			for id2 := range m.obj {
				if p.Match(id2) {
					want = append(want, id2)
				}
			}
			slices.SortFunc(want, cmpID)
			got, err := v.Prefix(p, 1000)
			if err != nil {
				fail("Prefix(%s): %v", p, err)
			}
			gotIDs := make([]objects.ID, len(got))
			for i, mt := range got {
				gotIDs[i] = mt.ID
			}
			if !slices.Equal(gotIDs, want) {
				fail("Prefix(%s) = %d ids, want %d", p, len(got), len(want))
			}
			if lim, err := v.Prefix(p, 1); err != nil || len(lim) != 1 || lim[0].ID != want[0] {
				fail("Prefix(%s, max 1) = %v, %v; want [%s]", p, lim, err, want[0])
			}
		}
	}
	byDelta := map[objects.Hash][]objects.ID{}
	for id, c := range m.cs {
		byDelta[c.Delta] = append(byDelta[c.Delta], id)
	}
	for _, h := range append(g.deltas, objects.Hash(rid(g.r))) {
		want := byDelta[h]
		slices.SortFunc(want, cmpID)
		got, err := v.ByDelta(h)
		if err != nil || !slices.Equal(got, want) {
			fail("ByDelta(%s) = %d ids, %v; want %d", h, len(got), err, len(want))
		}
	}
	ncs, nobj, err := v.Counts()
	if err != nil || ncs != int64(len(m.cs)) || nobj != int64(len(m.obj)) {
		fail("Counts = %d, %d, %v; want %d, %d", ncs, nobj, err, len(m.cs), len(m.obj))
	}
}

// TestIndexMatchesModelAcrossRunsCompactAndReopen adds random batches as
// runs, compacting and reopening at random points, and compares every
// lookup with a map after each step.
func TestIndexMatchesModelAcrossRunsCompactAndReopen(t *testing.T) {
	seed := testSeed(t, 1)
	g := newGen(seed)
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("idx", 0o755); err != nil {
		t.Fatal(err)
	}
	x := New(fsys)
	m := newModel()
	var prevObjs, allObjs []ObjRecord
	runNo := 0
	name := func() string { runNo++; return fmt.Sprintf("idx/run-%06d", runNo) }
	for step := range 60 {
		b := g.batch(g.r.IntN(40), g.r.IntN(80))
		// Re-add known objects at new locations, one from the previous batch
		// (in the newest run) and one from anywhere (likely in an older
		// run): the newest record must win everywhere.
		for _, pool := range [][]ObjRecord{prevObjs, allObjs} {
			if len(pool) > 0 {
				o := pool[g.r.IntN(len(pool))]
				o.Loc = g.loc()
				b.Objects = append(b.Objects, o)
			}
		}
		prevObjs = b.Objects
		allObjs = append(allObjs, b.Objects...)
		before := x.View()
		beforeRuns := len(before.Runs())
		if _, err := x.AddRun(name(), uint64(step), b); err != nil {
			t.Fatal(err)
		}
		if len(before.Runs()) != beforeRuns {
			t.Fatal("a View changed after AddRun")
		}
		m.add(b)
		switch g.r.IntN(6) {
		case 0, 1:
			if _, _, err := x.Compact(name(), uint64(step), 2); err != nil {
				t.Fatal(err)
			}
			if n := len(x.View().Runs()); n > 2 {
				t.Fatalf("after Compact(max 2) there are %d runs", n)
			}
		case 2:
			// Reopen from the run list, as a restart does.
			var paths []string
			for _, r := range x.View().Runs() {
				paths = append(paths, r.Name())
			}
			y, err := Open(fsys, paths)
			if err != nil {
				t.Fatal(err)
			}
			x = y
		}
		m.check(t, x.View(), g, seed)
	}
	if err := x.View().Verify(); err != nil {
		t.Fatal(err)
	}
}

func writeTestRun(t *testing.T, fsys vfs.FS, path string, ncs, nobj int, seed uint64) (*Run, *gen, Batch) {
	t.Helper()
	g := newGen(seed)
	b := g.batch(ncs, nobj)
	r, err := WriteRun(fsys, path, 7, b)
	if err != nil {
		t.Fatal(err)
	}
	return r, g, b
}

func TestWriteRunCostsOneDatasyncAndOneDirSync(t *testing.T) {
	c := faultfs.NewCounting(faultfs.NewMem())
	if err := c.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	writeTestRun(t, c, "d/run", 1000, 1000, 3)
	if got := c.Count(faultfs.OpDatasync) + c.Count(faultfs.OpSync); got != 1 {
		t.Errorf("WriteRun made %d file syncs, want 1", got)
	}
	if got := c.Count(faultfs.OpSyncDir); got != 1 {
		t.Errorf("WriteRun made %d directory syncs, want 1", got)
	}
	if got := c.Count(faultfs.OpRename); got != 1 {
		t.Errorf("WriteRun made %d renames, want 1", got)
	}
}

// TestOpenAndFirstLookupReadAConstantNumberOfTimes counts ReadAt calls:
// opening a run reads its header once; an exact lookup reads two fanout
// entries and one bucket of records, whatever the run's size.
func TestOpenAndFirstLookupReadAConstantNumberOfTimes(t *testing.T) {
	mem := faultfs.NewMem()
	for _, n := range []int{100, 20000} {
		path := fmt.Sprintf("run-%d", n)
		_, g, b := writeTestRun(t, mem, path, n, n, 5)
		c := faultfs.NewCounting(mem)
		r, err := OpenRun(c, path)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Count(faultfs.OpRead); got != 1 {
			t.Errorf("n=%d: OpenRun made %d reads, want 1", n, got)
		}
		c.Reset()
		want := b.Objects[n/2]
		if got, ok, err := r.Object(want.ID); err != nil || !ok || got != want {
			t.Fatalf("n=%d: Object = %+v, %v, %v", n, got, ok, err)
		}
		if got := c.Count(faultfs.OpRead); got > 3 {
			t.Errorf("n=%d: first lookup made %d reads, want <= 3", n, got)
		}
		c.Reset()
		if _, ok, err := r.Changeset(rid(g.r)); ok || err != nil {
			t.Fatalf("miss: %v %v", ok, err)
		}
		if got := c.Count(faultfs.OpRead); got > 3 {
			t.Errorf("n=%d: a miss made %d reads, want <= 3", n, got)
		}
		// A long-lived run caches its fanout: then a lookup is one read.
		for i := range min(preloadAfter, 1000) {
			if _, _, err := r.Object(b.Objects[i%n].ID); err != nil {
				t.Fatal(err)
			}
		}
		c.Reset()
		if _, ok, err := r.Object(b.Objects[n/3].ID); !ok || err != nil {
			t.Fatalf("n=%d: Object: %v %v", n, ok, err)
		}
		if got := c.Count(faultfs.OpRead); got != 1 {
			t.Errorf("n=%d: a lookup on a warm run made %d reads, want 1", n, got)
		}
		r.Close()
	}
}

// TestEveryByteFlipIsCaught flips each byte of a small run in turn (and a
// sample of a larger one): Verify must report ErrCorrupt naming the file,
// and no lookup may panic or return a wrong record without an error.
func TestEveryByteFlipIsCaught(t *testing.T) {
	mem := faultfs.NewMem()
	_, _, b := writeTestRun(t, mem, "good", 40, 40, 9)
	b.Changesets[0].Parents = []objects.ID{{1}, {2}, {3}} // exercise the heap
	if _, err := WriteRun(mem, "good", 7, b); err != nil {
		t.Fatal(err)
	}
	eachFlip(t, mem, 0, func(off int, r *Run) {
		checkCorrupt(t, r.Verify(), off)
		// Lookups either return the right record or an error.
		for _, c := range b.Changesets {
			got, ok, err := r.Changeset(c.ID)
			if err == nil && ok && !eqCS(got, c) {
				t.Fatalf("flip at %d: Changeset returned a wrong record without error", off)
			}
			if err != nil {
				checkCorrupt(t, err, off)
			}
		}
		for _, o := range b.Objects {
			got, ok, err := r.Object(o.ID)
			if err == nil && ok && got != o {
				t.Fatalf("flip at %d: Object returned a wrong record without error", off)
			}
		}
	})
}

// eachFlip flips one bit of every byte of the run "good" on mem from
// offset from on (every 7th byte with -short), one at a time, written as
// the run "bad": where OpenRun refuses the copy it checks the error is a
// CorruptError naming it, and otherwise it calls fn with the open copy,
// closing it after.
func eachFlip(t *testing.T, mem vfs.FS, from int, fn func(off int, r *Run)) {
	t.Helper()
	orig := readAll(t, mem, "good")
	step := 1
	if testing.Short() {
		step = 7
	}
	for off := from; off < len(orig); off += step {
		bad := slices.Clone(orig)
		bad[off] ^= 0x10
		writeAll(t, mem, "bad", bad)
		r, err := OpenRun(mem, "bad")
		if err != nil {
			checkCorrupt(t, err, off)
			continue
		}
		fn(off, r)
		r.Close()
	}
}

func checkCorrupt(t *testing.T, err error, off int) {
	t.Helper()
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != "bad" {
		t.Fatalf("flip at %d: error %v, want a CorruptError naming the file", off, err)
	}
	if !strings.Contains(err.Error(), "offset") {
		t.Fatalf("flip at %d: error %q does not name an offset", off, err)
	}
}

func readAll(t testing.TB, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if err := vfs.ReadFull(f, b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t testing.TB, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestDamagedRunFilesAreTypedErrors(t *testing.T) {
	mem := faultfs.NewMem()
	writeTestRun(t, mem, "good", 100, 100, 11)
	orig := readAll(t, mem, "good")
	cases := map[string][]byte{
		"empty":          nil,
		"truncated":      orig[:len(orig)-1],
		"header only":    orig[:headerSize],
		"short header":   orig[:100],
		"zeroed":         make([]byte, len(orig)),
		"trailing bytes": append(slices.Clone(orig), 0),
	}
	for name, b := range cases {
		writeAll(t, mem, "bad", b)
		_, err := OpenRun(mem, "bad")
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != "bad" {
			t.Errorf("%s: OpenRun error %v, want a CorruptError naming the file", name, err)
		}
	}
	if err := mem.Mkdir("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRun(mem, "dir"); err == nil {
		t.Error("OpenRun of a directory succeeded")
	}
	if _, err := OpenRun(mem, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenRun of a missing file: %v, want ErrNotExist", err)
	}
}

func TestInvalidRecordsAreRejected(t *testing.T) {
	mem := faultfs.NewMem()
	x := New(mem)
	bad := []Batch{
		{Changesets: []CSRecord{{}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindChangeset}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Offset: -1}}}},
		{Changesets: []CSRecord{{ID: objects.ID{1}, Parents: make([]objects.ID, objects.MaxParents+1)}}},
		{Changesets: []CSRecord{{ID: objects.ID{1}, Loc: Loc{Length: 9, Stored: 3}}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Length: 9, Stored: 3, Loose: true}}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Length: 9, Stored: MaxGroup + 1}}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Length: 9, Stored: 5, Inner: MaxGroup - 8}}}},
		{Objects: []ObjRecord{{ID: objects.ID{1}, Kind: objects.KindBlob, Loc: Loc{Length: 9, Inner: 5}}}},
	}
	for i, b := range bad {
		if _, err := x.AddRun(fmt.Sprintf("r%d", i), 0, b); !errors.Is(err, ErrInvalid) {
			t.Errorf("batch %d: AddRun error %v, want ErrInvalid", i, err)
		}
		if _, err := mem.Stat(fmt.Sprintf("r%d", i)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("batch %d: a rejected batch left its run file: %v", i, err)
		}
	}
	if n := len(x.View().Runs()); n != 0 {
		t.Errorf("rejected batches added %d runs", n)
	}
}

// TestReadersNeverBlockOrSeeChangesWhileAWriterAddsAndCompacts runs
// readers over a View held across concurrent AddRuns and Compacts (run
// with -race to check the lock-free claim).
func TestReadersNeverBlockOrSeeChangesWhileAWriterAddsAndCompacts(t *testing.T) {
	fsys := faultfs.NewMem()
	x := New(fsys)
	g := newGen(testSeed(t, 21))
	first := g.batch(200, 200)
	if _, err := x.AddRun("first", 0, first); err != nil {
		t.Fatal(err)
	}
	held := x.View()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, c := range first.Changesets[:20] {
					if _, ok, err := held.Changeset(c.ID); !ok || err != nil {
						t.Errorf("held view lost %s: %v", c.ID, err)
						return
					}
					if _, ok, err := x.View().Changeset(c.ID); !ok || err != nil {
						t.Errorf("current view lost %s: %v", c.ID, err)
						return
					}
				}
			}
		}()
	}
	for i := range 30 {
		if _, err := x.AddRun(fmt.Sprintf("r%d", i), 0, g.batch(20, 20)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if _, _, err := x.Compact(fmt.Sprintf("c%d", i), 0, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if n, _, _ := held.Counts(); n != 200 {
		t.Fatalf("held view has %d changesets, want 200", n)
	}
}

// TestAFailedRunWriteChangesNothing: a run whose datasync fails is not
// added and leaves no file; the same batch is added at the next try.
func TestAFailedRunWriteChangesNothing(t *testing.T) {
	mem := faultfs.NewMem()
	inj := faultfs.NewInjecting(mem, faultfs.MustParseRule("op=datasync,nth=1,err=eio"))
	x := New(inj)
	b := newGen(4).batch(10, 10)
	if _, err := x.AddRun("r1", 0, b); err == nil {
		t.Fatal("AddRun succeeded through a failed datasync")
	}
	if _, err := mem.Stat("r1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("failed run write left r1 behind: %v", err)
	}
	if n := len(x.View().Runs()); n != 0 {
		t.Fatalf("a failed run write added %d runs", n)
	}
	if _, err := x.AddRun("r2", 0, b); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := x.View().Changeset(b.Changesets[0].ID); !ok {
		t.Fatal("records missing after the retry")
	}
}

func TestResolveUniqueAmbiguousAndMissingPrefixes(t *testing.T) {
	x := New(faultfs.NewMem())
	a := objects.ID{0xab, 0xcd, 0x01}
	b := objects.ID{0xab, 0xcd, 0x02}
	c := objects.ID{0x12, 0x34}
	if _, err := x.AddRun("r", 0, Batch{Objects: []ObjRecord{{ID: a, Kind: objects.KindBlob}, {ID: b, Kind: objects.KindTree}},
		Changesets: []CSRecord{{ID: c, Generation: 1}}}); err != nil {
		t.Fatal(err)
	}
	parse := func(s string) objects.Prefix {
		p, err := objects.ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	v := x.View()
	if m, _, err := v.Resolve(parse("1234")); err != nil || m.ID != c || m.Kind != objects.KindChangeset {
		t.Errorf("Resolve(1234) = %v, %v", m, err)
	}
	if m, _, err := v.Resolve(parse("abcd02")); err != nil || m.ID != b || m.Kind != objects.KindTree {
		t.Errorf("Resolve(abcd02) = %v, %v", m, err)
	}
	if _, cands, err := v.Resolve(parse("abcd")); !errors.Is(err, ErrAmbiguous) || len(cands) != 2 || cands[0].ID != a {
		t.Errorf("Resolve(abcd) = %v, %v; want ErrAmbiguous with 2 candidates", cands, err)
	}
	if _, _, err := v.Resolve(parse("ffff")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(ffff) error %v, want ErrNotFound", err)
	}
}
