package props

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// indexModel is the map model of core/index: every record added (each add
// is a run, durable once AddRun returns, so a reopen keeps them all).
type indexModel struct {
	cs  map[objects.ID]index.CSRecord
	obj map[objects.ID]index.ObjRecord
}

func (m *indexModel) clone() *indexModel {
	c := &indexModel{cs: map[objects.ID]index.CSRecord{}, obj: map[objects.ID]index.ObjRecord{}}
	for k, v := range m.cs {
		c.cs[k] = v
	}
	for k, v := range m.obj {
		c.obj[k] = v
	}
	return c
}

// ids lists every id of the model in id order.
func (m *indexModel) ids() []objects.ID {
	var out []objects.ID
	for id := range m.cs {
		out = append(out, id)
	}
	for id := range m.obj {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b objects.ID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// deltaPool is small so that several changesets share a delta hash.
var deltaPool = func() []objects.Hash {
	var out []objects.Hash
	for i := 0; i < 4; i++ {
		out = append(out, objects.Hash(objects.IDOf(objects.KindBlob, []byte{0xde, byte(i)})))
	}
	return out
}()

// indexMachine drives a core/index.Index on a memory FS.
type indexMachine struct {
	fs           *faultfs.MemFS
	x            *index.Index
	m            *indexModel
	runs         int
	brokenPrefix bool // canary: the model forgets the last candidate of an ambiguous prefix
}

// drawIndexID draws an id whose first two bytes come from a tiny pool, so
// that 4-digit prefixes are often shared (ambiguous) while full ids differ.
func drawIndexID(t *rapid.T, label string) objects.ID {
	var id objects.ID
	id[0] = rapid.SampledFrom([]byte{0x00, 0xab, 0xff}).Draw(t, label+" b0")
	id[1] = rapid.SampledFrom([]byte{0x12, 0x13}).Draw(t, label+" b1")
	id[2] = rapid.Byte().Draw(t, label+" b2")
	copy(id[3:], rapid.SliceOfN(rapid.Byte(), 29, 29).Draw(t, label+" rest"))
	return id
}

func drawLoc(t *rapid.T, label string) index.Loc {
	if rapid.Bool().Draw(t, label+" loose") {
		return index.Loc{Loose: true, Length: rapid.Uint32().Draw(t, label+" length")}
	}
	return index.Loc{
		Segment: rapid.Uint32Range(1, 1<<20).Draw(t, label+" segment"),
		Offset:  rapid.Int64Range(0, 1<<40).Draw(t, label+" offset"),
		Length:  rapid.Uint32().Draw(t, label+" length"),
	}
}

// drawObjLoc is drawLoc for a blob or tree, which may also be a blob of a
// compressed group (stored length and inner offset, core/internal/zblob).
func drawObjLoc(t *rapid.T, label string) index.Loc {
	l := drawLoc(t, label)
	if !l.Loose && rapid.Bool().Draw(t, label+" grouped") {
		l.Stored = rapid.Uint32Range(1, index.MaxGroup).Draw(t, label+" stored")
		l.Length = rapid.Uint32Range(0, index.MaxGroup).Draw(t, label+" member length")
		l.Inner = rapid.Uint32Range(0, index.MaxGroup-l.Length).Draw(t, label+" inner")
	}
	return l
}

func (im *indexMachine) add(t *rapid.T) {
	var b index.Batch
	var csIDs []objects.ID
	for id := range im.m.cs {
		csIDs = append(csIDs, id)
	}
	slices.SortFunc(csIDs, func(a, b objects.ID) int { return bytes.Compare(a[:], b[:]) })
	seen := map[objects.ID]bool{}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "changesets"); i < n; i++ {
		id := drawIndexID(t, "cs")
		if seen[id] || im.m.obj[id].Kind != 0 {
			continue
		}
		seen[id] = true
		if old, ok := im.m.cs[id]; ok {
			b.Changesets = append(b.Changesets, old) // the same record again
			continue
		}
		r := index.CSRecord{ID: id, Generation: rapid.Uint64Range(1, 1<<32).Draw(t, "generation"), Delta: rapid.SampledFrom(deltaPool).Draw(t, "delta"), Loc: drawLoc(t, "cs loc")}
		if len(csIDs) > 0 {
			for _, pi := range rapid.SliceOfNDistinct(rapid.IntRange(0, len(csIDs)-1), 0, 3, rapid.ID[int]).Draw(t, "parents") {
				r.Parents = append(r.Parents, csIDs[pi])
			}
		}
		b.Changesets = append(b.Changesets, r)
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "objects"); i < n; i++ {
		id := drawIndexID(t, "obj")
		if seen[id] {
			continue
		}
		if _, isCS := im.m.cs[id]; isCS {
			continue
		}
		seen[id] = true
		if old, ok := im.m.obj[id]; ok {
			b.Objects = append(b.Objects, old)
			continue
		}
		b.Objects = append(b.Objects, index.ObjRecord{ID: id, Kind: rapid.SampledFrom([]objects.Kind{objects.KindBlob, objects.KindTree}).Draw(t, "kind"), Loc: drawObjLoc(t, "obj loc")})
	}
	before, beforeModel := im.x.View(), im.m.clone()
	if _, err := im.x.AddRun(im.runPath(), uint64(im.runs), b); err != nil {
		t.Fatalf("AddRun(%d changesets, %d objects): %v", len(b.Changesets), len(b.Objects), err)
	}
	// A View taken before the run was added still answers as it did.
	if err := im.compare(before, beforeModel); err != nil {
		t.Fatalf("a View taken before AddRun changed: %v", err)
	}
	for _, r := range b.Changesets {
		im.m.cs[r.ID] = r
	}
	for _, r := range b.Objects {
		im.m.obj[r.ID] = r
	}
}

func (im *indexMachine) runPath() string {
	im.runs++
	return fmt.Sprintf("/idx/run-%06d", im.runs)
}

// runPaths lists the current View's run files, newest first, as a
// checkpoint would record them.
func (im *indexMachine) runPaths() []string {
	var out []string
	for _, r := range im.x.View().Runs() {
		out = append(out, r.Name())
	}
	return out
}

func (im *indexMachine) compact(t *rapid.T) {
	maxRuns := rapid.IntRange(1, 3).Draw(t, "maxRuns")
	before, beforeModel := im.x.View(), im.m.clone()
	_, retired, err := im.x.Compact(im.runPath(), uint64(im.runs), maxRuns)
	if err != nil {
		t.Fatalf("Compact(maxRuns %d): %v", maxRuns, err)
	}
	if err := im.compare(before, beforeModel); err != nil {
		t.Fatalf("a View taken before Compact changed: %v", err)
	}
	for _, r := range retired {
		if err := r.Close(); err != nil {
			t.Fatalf("closing retired run %s: %v", r.Name(), err)
		}
		if err := im.fs.Remove(r.Name()); err != nil {
			t.Fatalf("removing retired run %s: %v", r.Name(), err)
		}
	}
}

// reopen opens the index again over its run files, on the same files or on
// a strict crash clone of them (runs written by AddRun and Compact must be
// durable).
func (im *indexMachine) reopen(t *rapid.T) {
	paths := im.runPaths()
	if err := im.x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if rapid.Bool().Draw(t, "crash") {
		im.fs = im.fs.CrashClone(faultfs.Strict, 0)
	}
	x, err := index.Open(im.fs, paths)
	if err != nil {
		t.Fatalf("Open(%v): %v", paths, err)
	}
	im.x = x
}

func (im *indexMachine) check(t *rapid.T) {
	if err := im.compare(im.x.View(), im.m); err != nil {
		t.Fatal(err)
	}
}

func normCS(r index.CSRecord) index.CSRecord {
	if len(r.Parents) == 0 {
		r.Parents = nil
	}
	return r
}

// compare checks every lookup of v against the model m.
func (im *indexMachine) compare(v *index.View, m *indexModel) error {
	for id, want := range m.cs {
		got, ok, err := v.Changeset(id)
		if err != nil || !ok || fmt.Sprint(normCS(got)) != fmt.Sprint(normCS(want)) {
			return fmt.Errorf("Changeset(%s) = %+v, %v, %v; want %+v", short(id), got, ok, err, want)
		}
		o, ok, err := v.Object(id)
		if err != nil || !ok || o.Kind != objects.KindChangeset || o.Loc != want.Loc {
			return fmt.Errorf("Object(changeset %s) = %+v, %v, %v; want kind changeset at %+v", short(id), o, ok, err, want.Loc)
		}
		// First-parent walk through the index equals the model's.
		var gotWalk, wantWalk []objects.ID
		for cur, n := id, 0; n < 50; n++ {
			gotWalk = append(gotWalk, cur)
			r, ok, err := v.Changeset(cur)
			if err != nil || !ok || len(r.Parents) == 0 {
				break
			}
			cur = r.Parents[0]
		}
		for cur, n := id, 0; n < 50; n++ {
			wantWalk = append(wantWalk, cur)
			r, ok := m.cs[cur]
			if !ok || len(r.Parents) == 0 {
				break
			}
			cur = r.Parents[0]
		}
		if !slices.Equal(gotWalk, wantWalk) {
			return fmt.Errorf("first-parent walk from %s = %s; want %s", short(id), shorts(gotWalk), shorts(wantWalk))
		}
	}
	for id, want := range m.obj {
		got, ok, err := v.Object(id)
		if err != nil || !ok || got != want {
			return fmt.Errorf("Object(%s) = %+v, %v, %v; want %+v", short(id), got, ok, err, want)
		}
		if _, ok, err := v.Changeset(id); ok || err != nil {
			return fmt.Errorf("Changeset(%s), a %v, found a changeset (%v)", short(id), want.Kind, err)
		}
	}
	if err := im.comparePrefixes(v, m); err != nil {
		return err
	}
	for _, h := range deltaPool {
		var want []objects.ID
		for id, r := range m.cs {
			if r.Delta == h {
				want = append(want, id)
			}
		}
		sort.Slice(want, func(i, j int) bool { return bytes.Compare(want[i][:], want[j][:]) < 0 })
		got, err := v.ByDelta(h)
		if err != nil || !slices.Equal(got, want) {
			return fmt.Errorf("ByDelta(%s) = %s, %v; want %s", h.String()[:8], shorts(got), err, shorts(want))
		}
	}
	if _, ok, err := v.Changeset(missID); ok || err != nil {
		return fmt.Errorf("Changeset(missing) found something (%v)", err)
	}
	if _, ok, err := v.Object(missID); ok || err != nil {
		return fmt.Errorf("Object(missing) found something (%v)", err)
	}
	ncs, nobj, err := v.Counts()
	if err != nil || ncs != int64(len(m.cs)) || nobj != int64(len(m.obj)) {
		return fmt.Errorf("Counts = %d changesets, %d objects, %v; want %d, %d", ncs, nobj, err, len(m.cs), len(m.obj))
	}
	return nil
}

// comparePrefixes checks Prefix lookups of 4 to 7 digits of every id
// (ambiguous ones included), and of ids that are not there, at several
// limits.
func (im *indexMachine) comparePrefixes(v *index.View, m *indexModel) error {
	all := m.ids()
	prefixes := map[string]bool{}
	for _, id := range all {
		h := id.String()
		for n := 4; n <= 7; n++ {
			prefixes[h[:n]] = true
		}
	}
	prefixes[missID.String()[:5]] = true
	prefixes["ab14"] = true // the pool never makes a second byte of 0x14
	for p := range prefixes {
		var want []index.Match
		for _, id := range all {
			if strings.HasPrefix(id.String(), p) {
				k := objects.KindChangeset
				if o, ok := m.obj[id]; ok {
					k = o.Kind
				}
				want = append(want, index.Match{ID: id, Kind: k})
			}
		}
		if im.brokenPrefix && len(want) > 1 {
			want = want[:len(want)-1]
		}
		pp, err := objects.ParsePrefix(p)
		if err != nil {
			return fmt.Errorf("ParsePrefix(%q): %w", p, err)
		}
		for _, max := range []int{1, 2, len(want) + 1} {
			got, err := v.Prefix(pp, max)
			w := want
			if len(w) > max {
				w = w[:max]
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(w) {
				return fmt.Errorf("Prefix(%s, max %d) = %v, %v; want %v", p, max, got, err, w)
			}
		}
	}
	return nil
}

func indexMachineProp(brokenPrefix bool) func(*rapid.T) {
	return func(t *rapid.T) {
		fs := faultfs.NewMem()
		if err := fs.MkdirAll("/idx", 0o755); err != nil {
			t.Fatalf("mkdir: %v", err)
		}
		if err := fs.SyncDir("/"); err != nil { // the store's Create makes its directories durable the same way
			t.Fatalf("SyncDir: %v", err)
		}
		im := &indexMachine{fs: fs, x: index.New(fs), brokenPrefix: brokenPrefix,
			m: &indexModel{cs: map[objects.ID]index.CSRecord{}, obj: map[objects.ID]index.ObjRecord{}}}
		defer func() { _ = im.x.Close() }()
		t.Repeat(map[string]func(*rapid.T){
			"add":     im.add,
			"compact": im.compact,
			"reopen":  im.reopen,
			"":        im.check,
		})
	}
}

// TestIndexMatchesMapModel holds core/index (runs added one batch each,
// compaction, reopen and strict crash of its run files) against a map:
// lookups by id, by prefix (unique, ambiguous and missing, for several
// result limits), by delta hash, misses, counts and first-parent walks,
// and snapshot isolation of Views across added runs and compaction.
func TestIndexMatchesMapModel(t *testing.T) {
	check(t, 60, indexMachineProp(false))
}

// TestCanaryIndexPropertyCatchesALostPrefixCandidate runs the index
// property against a mutated model that forgets one candidate of every
// ambiguous prefix; the property must notice.
func TestCanaryIndexPropertyCatchesALostPrefixCandidate(t *testing.T) {
	expectFailure(t, 60, "a model that drops a candidate of every ambiguous prefix", indexMachineProp(true))
}
