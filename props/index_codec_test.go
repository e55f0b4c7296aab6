package props

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/afero"
	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

const runFile = "/idx/run"

// drawBatch draws a batch of index records with ids that share prefixes.
func drawBatch(t *rapid.T) index.Batch {
	var b index.Batch
	seen := map[objects.ID]bool{}
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, "changesets"); i < n; i++ {
		id := drawIndexID(t, "cs")
		if seen[id] {
			continue
		}
		seen[id] = true
		r := index.CSRecord{ID: id, Generation: rapid.Uint64Range(1, 1<<32).Draw(t, "generation"), Delta: rapid.SampledFrom(deltaPool).Draw(t, "delta"), Loc: drawLoc(t, "loc")}
		for _, p := range b.Changesets {
			if rapid.Bool().Draw(t, "parent") {
				r.Parents = append(r.Parents, p.ID)
			}
		}
		b.Changesets = append(b.Changesets, r)
	}
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, "objects"); i < n; i++ {
		id := drawIndexID(t, "obj")
		if seen[id] {
			continue
		}
		seen[id] = true
		b.Objects = append(b.Objects, index.ObjRecord{ID: id, Kind: rapid.SampledFrom([]objects.Kind{objects.KindBlob, objects.KindTree}).Draw(t, "kind"), Loc: drawLoc(t, "loc")})
	}
	return b
}

// writeRunBytes writes b as a run on a fresh memory FS and returns the FS
// and the file's bytes.
func writeRunBytes(t fataler, b index.Batch) (*faultfs.MemFS, []byte) {
	fs := faultfs.NewMem()
	if err := fs.MkdirAll("/idx", 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	r, err := index.WriteRun(fs, runFile, 7, b)
	if err != nil {
		t.Fatalf("WriteRun: %v", err)
	}
	r.Close()
	data, err := afero.ReadFile(fs, runFile)
	if err != nil {
		t.Fatalf("read run: %v", err)
	}
	return fs, data
}

// runRejects reports whether the run bytes are rejected by OpenRun or by a
// full Verify; a rejection must be a typed corruption error.
func runRejects(fs *faultfs.MemFS, data []byte) (bool, error) {
	if err := afero.WriteFile(fs, runFile, data, 0o644); err != nil {
		return false, err
	}
	r, err := index.OpenRun(fs, runFile)
	if err != nil {
		if !errors.Is(err, index.ErrCorrupt) {
			return true, fmt.Errorf("OpenRun rejected damaged bytes with %v, not index.ErrCorrupt", err)
		}
		return true, nil
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		if !errors.Is(err, index.ErrCorrupt) {
			return true, fmt.Errorf("Verify rejected damaged bytes with %v, not index.ErrCorrupt", err)
		}
		return true, nil
	}
	return false, nil
}

// TestIndexRunDamageIsDetected: a run written from a drawn batch round
// trips (every record reads back), and every sampled truncation and
// single-bit flip of the file (each check draws a stride) is rejected by OpenRun or Verify with a typed
// corruption error.
func TestIndexRunDamageIsDetected(t *testing.T) {
	check(t, 12, func(t *rapid.T) {
		b := drawBatch(t)
		fs, data := writeRunBytes(t, b)
		r, err := index.OpenRun(fs, runFile)
		if err != nil {
			t.Fatalf("OpenRun of a fresh run: %v", err)
		}
		for _, want := range b.Changesets {
			got, ok, err := r.Changeset(want.ID)
			if err != nil || !ok || fmt.Sprint(normCS(got)) != fmt.Sprint(normCS(want)) {
				r.Close()
				t.Fatalf("Changeset(%s) = %+v, %v, %v; want %+v", short(want.ID), got, ok, err, want)
			}
		}
		for _, want := range b.Objects {
			got, ok, err := r.Object(want.ID)
			if err != nil || !ok || got != want {
				r.Close()
				t.Fatalf("Object(%s) = %+v, %v, %v; want %+v", short(want.ID), got, ok, err, want)
			}
		}
		r.Close()
		tstep := rapid.IntRange(1, 7).Draw(t, "truncation stride")
		for n := rapid.IntRange(0, tstep-1).Draw(t, "first truncation"); n < len(data); n += tstep {
			rejected, err := runRejects(fs, data[:n])
			if err != nil {
				t.Fatalf("truncation to %d of %d bytes: %v", n, len(data), err)
			}
			if !rejected {
				t.Fatalf("truncation to %d of %d bytes passes OpenRun and Verify", n, len(data))
			}
		}
		step := rapid.IntRange(1, 13).Draw(t, "flip stride")
		for bit := rapid.IntRange(0, step-1).Draw(t, "first flip"); bit < 8*len(data); bit += step {
			f := bytes.Clone(data)
			f[bit/8] ^= 1 << (bit % 8)
			rejected, err := runRejects(fs, f)
			if err != nil {
				t.Fatalf("flip of bit %d of %d bytes: %v", bit, len(data), err)
			}
			if !rejected {
				t.Fatalf("flip of bit %d (byte %d of %d) passes OpenRun and Verify", bit, bit/8, len(data))
			}
		}
	})
}

// FuzzIndexRun opens arbitrary bytes as an index run. Nothing may panic;
// every error is typed; and if the whole file verifies, every record its
// enumeration lists is found again by lookup.
func FuzzIndexRun(f *testing.F) {
	_, seed := writeRunBytes(f, index.Batch{
		Changesets: []index.CSRecord{{ID: objects.BlobID([]byte("c1")), Generation: 1, Loc: index.Loc{Segment: 1, Offset: 512, Length: 100}}},
		Objects:    []index.ObjRecord{{ID: objects.BlobID([]byte("o1")), Kind: objects.KindBlob, Loc: index.Loc{Loose: true, Length: 9}}},
	})
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{})
	f.Add(make([]byte, len(seed)))
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := faultfs.NewMem()
		if err := fs.MkdirAll("/idx", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fs, runFile, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := index.OpenRun(fs, runFile)
		if err != nil {
			if !errors.Is(err, index.ErrCorrupt) {
				t.Fatalf("OpenRun: %v, not index.ErrCorrupt", err)
			}
			return
		}
		defer r.Close()
		typed := func(what string, err error) {
			if err != nil && !errors.Is(err, index.ErrCorrupt) {
				t.Fatalf("%s: %v, not index.ErrCorrupt", what, err)
			}
		}
		_, _, err = r.Changeset(missID)
		typed("Changeset", err)
		_, _, err = r.Object(missID)
		typed("Object", err)
		_, err = r.ByDelta(deltaPool[0])
		typed("ByDelta", err)
		p, _ := objects.ParsePrefix("ab12")
		_, err = r.Prefix(p, 3)
		typed("Prefix", err)
		if err := r.Verify(); err != nil {
			typed("Verify", err)
			return
		}
		x, err := index.Open(fs, []string{runFile})
		if err != nil {
			t.Fatalf("index.Open of a verified run: %v", err)
		}
		defer x.Close()
		v := x.View()
		if err := v.ForEachChangeset(func(c index.CSRecord) error {
			got, ok, err := v.Changeset(c.ID)
			if err != nil || !ok || fmt.Sprint(normCS(got)) != fmt.Sprint(normCS(c)) {
				return fmt.Errorf("enumerated changeset %s looks up as %+v, %v, %v", short(c.ID), got, ok, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := v.ForEachObject(func(o index.ObjRecord) error {
			got, ok, err := v.Object(o.ID)
			if err != nil || !ok || got != o {
				return fmt.Errorf("enumerated object %s looks up as %+v, %v, %v", short(o.ID), got, ok, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
