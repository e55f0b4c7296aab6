package index

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// benchDir holds the runs the benchmarks build once per process on the real
// filesystem; TestMain removes it.
var benchDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchSizes reads SWARMOPS_INDEX_BENCH_SIZES (comma-separated record
// counts, default 100000,1000000). A malformed value is fatal.
func benchSizes(b *testing.B) []int {
	s := os.Getenv("SWARMOPS_INDEX_BENCH_SIZES")
	if s == "" {
		return []int{100_000, 1_000_000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("SWARMOPS_INDEX_BENCH_SIZES=%q: %q is not a positive integer", s, f)
		}
		out = append(out, n)
	}
	return out
}

type benchData struct {
	path string
	cs   []CSRecord
	obj  []ObjRecord
}

var (
	benchMu    sync.Mutex
	benchCache = map[int]*benchData{}
)

// benchRun builds (once per process) a run of n changesets and n objects on
// the real OS and returns it.
func benchRun(b *testing.B, n int) *benchData {
	benchMu.Lock()
	defer benchMu.Unlock()
	if d, ok := benchCache[n]; ok {
		return d
	}
	if benchDir == "" {
		dir, err := os.MkdirTemp("", "swarmops-index-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
	}
	g := newGen(uint64(n))
	g.deltas = nil
	bt := Batch{Changesets: make([]CSRecord, n), Objects: make([]ObjRecord, n)}
	for i := range n {
		c := CSRecord{ID: rid(g.r), Generation: uint64(i + 1), Delta: objects.Hash(rid(g.r)), Loc: g.loc()}
		if i > 0 {
			c.Parents = []objects.ID{bt.Changesets[i-1].ID}
		}
		bt.Changesets[i] = c
		bt.Objects[i] = ObjRecord{ID: rid(g.r), Kind: objects.Kind(1 + i%2), Loc: g.loc()}
	}
	d := &benchData{path: filepath.Join(benchDir, fmt.Sprintf("run-%d", n)), cs: bt.Changesets, obj: bt.Objects}
	r, err := WriteRun(vfs.OS(), d.path, 0, bt)
	if err != nil {
		b.Fatal(err)
	}
	r.Close()
	benchCache[n] = d
	return d
}

// readsPerOp counts the ReadAt calls of 1000 lookups through faultfs's
// counting wrapper: a deterministic cost, reported beside the time.
func readsPerOp(b *testing.B, path string, op func(r *Run, i int) error) float64 {
	c := faultfs.NewCounting(vfs.OS())
	r, err := OpenRun(c, path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c.Reset()
	for i := range 1000 {
		if err := op(r, i); err != nil {
			b.Fatal(err)
		}
	}
	return float64(c.Count(faultfs.OpRead)) / 1000
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes(b) {
		d := benchRun(b, n)
		r, err := OpenRun(vfs.OS(), d.path)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		prefixes := make([]objects.Prefix, 1024)
		for i := range prefixes {
			p, err := objects.ParsePrefix(d.cs[rng.IntN(n)].ID.String()[:12])
			if err != nil {
				b.Fatal(err)
			}
			prefixes[i] = p
		}
		misses := make([]objects.ID, 1024)
		for i := range misses {
			misses[i] = rid(rng)
		}
		ops := []struct {
			name string
			op   func(r *Run, i int) error
		}{
			{"get", func(r *Run, i int) error {
				c := d.cs[(i*7919)%n]
				if _, ok, err := r.Changeset(c.ID); !ok || err != nil {
					return fmt.Errorf("get %s: %v %v", c.ID, ok, err)
				}
				return nil
			}},
			{"object", func(r *Run, i int) error {
				o := d.obj[(i*7919)%n]
				if _, ok, err := r.Object(o.ID); !ok || err != nil {
					return fmt.Errorf("object %s: %v %v", o.ID, ok, err)
				}
				return nil
			}},
			{"prefix", func(r *Run, i int) error {
				m, err := r.Prefix(prefixes[i%len(prefixes)], 2)
				if err != nil || len(m) != 1 {
					return fmt.Errorf("prefix: %d matches, %v", len(m), err)
				}
				return nil
			}},
			{"delta", func(r *Run, i int) error {
				c := d.cs[(i*7919)%n]
				ids, err := r.ByDelta(c.Delta)
				if err != nil || len(ids) != 1 {
					return fmt.Errorf("delta: %d ids, %v", len(ids), err)
				}
				return nil
			}},
			{"miss", func(r *Run, i int) error {
				if _, ok, err := r.Changeset(misses[i%len(misses)]); ok || err != nil {
					return fmt.Errorf("miss: %v %v", ok, err)
				}
				return nil
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("n=%d/%s", n, o.name), func(b *testing.B) {
				reads := readsPerOp(b, d.path, o.op)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if err := o.op(r, i); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(reads, "reads/op")
			})
		}
		r.Close()
	}
}

// BenchmarkOpenFirstLookup opens a run and does one exact lookup (then
// closes it) per iteration: the cost a fresh process pays before its first
// answer.
func BenchmarkOpenFirstLookup(b *testing.B) {
	for _, n := range benchSizes(b) {
		d := benchRun(b, n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				r, err := OpenRun(vfs.OS(), d.path)
				if err != nil {
					b.Fatal(err)
				}
				c := d.cs[(i*7919)%n]
				if _, ok, err := r.Changeset(c.ID); !ok || err != nil {
					b.Fatal(ok, err)
				}
				r.Close()
			}
		})
	}
}

// BenchmarkViewGet looks up through a View of two runs: one of n
// changesets and a newer one of 8192 (a few checkpoints' worth), half the
// lookups answered by each.
func BenchmarkViewGet(b *testing.B) {
	for _, n := range benchSizes(b) {
		d := benchRun(b, n)
		x, err := Open(vfs.OS(), []string{d.path})
		if err != nil {
			b.Fatal(err)
		}
		g := newGen(99)
		newer := g.batch(8192, 8192)
		if _, err := x.AddRun(d.path+".newer", 0, newer); err != nil {
			b.Fatal(err)
		}
		v := x.View()
		b.Run(fmt.Sprintf("n=%d/newer=8192", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				id := d.cs[(i*7919)%n].ID
				if i%2 == 1 {
					id = newer.Changesets[(i*31)%len(newer.Changesets)].ID
				}
				if _, ok, err := v.Changeset(id); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
		x.Close()
	}
}

// BenchmarkWriteRun writes a run of n changesets and n objects (sort,
// write, one datasync, rename, directory sync).
func BenchmarkWriteRun(b *testing.B) {
	for _, n := range benchSizes(b) {
		if n > 100_000 {
			continue
		}
		d := benchRun(b, n)
		bt := Batch{Changesets: d.cs, Objects: d.obj}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			for i := 0; b.Loop(); i++ {
				r, err := WriteRun(vfs.OS(), filepath.Join(dir, fmt.Sprintf("w%d", i)), 0, bt)
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
			b.ReportMetric(float64(2*n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkPreadProbe is the floor a lookup is measured against: one ReadAt
// of a bucket's worth (2 KiB) at a random record-aligned offset of the same
// run file, through the same vfs.OS() file, with no decoding or checking.
func BenchmarkPreadProbe(b *testing.B) {
	for _, n := range benchSizes(b) {
		d := benchRun(b, n)
		f, err := vfs.OS().Open(d.path)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 2048)
		rng := rand.New(rand.NewPCG(3, 4))
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				off := headerSize + int64(rng.IntN(n))*csRecSize
				if err := vfs.ReadFull(f, buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
		f.Close()
	}
}
