package faultfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// wrappers are the filesystems whose per-call cost BenchmarkCall compares,
// each built over a given inner FS.
var wrappers = []struct {
	name string
	wrap func(vfs.FS) vfs.FS
}{
	{"bare", func(f vfs.FS) vfs.FS { return f }},
	{"counting", func(f vfs.FS) vfs.FS { return faultfs.NewCounting(f) }},
	{"crashing", func(f vfs.FS) vfs.FS { return faultfs.NewCrashing(f, 0) }},
	{"crashexit", func(f vfs.FS) vfs.FS { return faultfs.NewCrashExit(f, 1<<62) }},
	{"injecting", func(f vfs.FS) vfs.FS {
		return faultfs.NewInjecting(f, faultfs.MustParseRule("op=datasync,path=*/never-*,err=eio,persistent"))
	}},
}

// BenchmarkCall measures the cost of one call through each wrapper over
// MemFS and over the real OS (in a temporary directory on TMPDIR's disk).
// The wrapper's overhead is its ns/op minus the bare figure of the same
// base and op.
func BenchmarkCall(b *testing.B) {
	bases := []struct {
		name string
		make func(b *testing.B) (vfs.FS, string)
	}{
		{"mem", func(b *testing.B) (vfs.FS, string) { return faultfs.NewMem(), "/" }},
		{"os", func(b *testing.B) (vfs.FS, string) { return vfs.OS(), b.TempDir() }},
	}
	buf := make([]byte, 64)
	for _, base := range bases {
		for _, w := range wrappers {
			b.Run(fmt.Sprintf("base=%s/fs=%s/op=writeat64", base.name, w.name), func(b *testing.B) {
				inner, dir := base.make(b)
				f, err := w.wrap(inner).OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := f.WriteAt(buf, int64(i%64)*64); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("base=%s/fs=%s/op=stat", base.name, w.name), func(b *testing.B) {
				inner, dir := base.make(b)
				fsys := w.wrap(inner)
				name := filepath.Join(dir, "f")
				if f, err := fsys.Create(name); err != nil {
					b.Fatal(err)
				} else {
					f.Close()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := fsys.Stat(name); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// storeLike builds a MemFS shaped like a small store: a journal of segSize
// bytes per segment, mostly synced with an unsynced tail, loose objects
// and a few small files, every entry synced but a handful.
func storeLike(b *testing.B, segments int, segSize int64) *faultfs.MemFS {
	m := faultfs.NewMem()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range []string{"/s/journal", "/s/objects/ab", "/s/index"} {
		must(m.MkdirAll(d, 0o755))
	}
	chunk := make([]byte, 4096)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for s := 0; s < segments; s++ {
		f, err := m.Create(fmt.Sprintf("/s/journal/seg-%012d", s+1))
		must(err)
		must(vfs.Allocate(f, 0, segSize))
		for off := int64(0); off < segSize*3/4; off += int64(len(chunk)) {
			_, err := f.WriteAt(chunk, off)
			must(err)
		}
		must(vfs.Datasync(f))
		_, err = f.WriteAt(chunk[:1000], segSize*3/4) // an unsynced frame
		must(err)
		must(f.Close())
	}
	for i := 0; i < 32; i++ {
		f, err := m.Create(fmt.Sprintf("/s/objects/ab/%030d", i))
		must(err)
		_, err = f.Write(chunk)
		must(err)
		must(vfs.Datasync(f))
		must(f.Close())
	}
	for _, n := range []string{"/s/LOCK", "/s/SYNCLOCK", "/s/state", "/s/checkpoint", "/s/index/run-1"} {
		f, err := m.Create(n)
		must(err)
		_, err = f.Write(chunk[:200])
		must(err)
		must(f.Sync())
		must(f.Close())
	}
	for _, d := range []string{"/", "/s", "/s/journal", "/s/objects", "/s/objects/ab", "/s/index"} {
		must(m.SyncDir(d))
	}
	// Unsynced directory operations at the crash point.
	f, err := m.Create("/s/checkpoint.tmp")
	must(err)
	must(f.Close())
	must(m.Rename("/s/checkpoint.tmp", "/s/checkpoint"))
	return m
}

// BenchmarkCrashClone measures CrashClone of a store-like MemFS of about
// 4 MiB (segments=4 of 1 MiB) for each model, as a crash sweep takes one
// per crash point.
func BenchmarkCrashClone(b *testing.B) {
	for _, segs := range []int{4, 16} {
		m := storeLike(b, segs, 1<<20)
		for _, model := range faultfs.Models() {
			b.Run(fmt.Sprintf("store=%dMiB/model=%s", segs, model), func(b *testing.B) {
				runtime.GC() // do not charge the setup's garbage to the first model
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c := m.CrashClone(model, int64(i))
					if c == nil {
						b.Fatal("nil clone")
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "clones/s")
			})
		}
	}
}

// BenchmarkCrashPoint measures what a crash sweep pays per crash point
// beyond the scenario itself: a clone, then a write + datasync on the clone
// (which copies the touched page) as recovery would.
func BenchmarkCrashPoint(b *testing.B) {
	m := storeLike(b, 4, 1<<20)
	buf := make([]byte, 512)
	for i := 0; i < b.N; i++ {
		c := m.CrashClone(faultfs.Torn, int64(i))
		f, err := c.OpenFile("/s/journal/seg-000000000001", os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(buf, 3<<18); err != nil {
			b.Fatal(err)
		}
		if err := vfs.Datasync(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkCommitCycle measures a journal-like commit on MemFS: a 256-byte
// WriteAt then Datasync, in a file of size= bytes already written and
// synced. Its cost must not grow with the file size, or a crash sweep over
// a store with large segments would slow down with every commit.
func BenchmarkCommitCycle(b *testing.B) {
	for _, size := range []int64{1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			m := faultfs.NewMem()
			f, err := m.Create("/seg")
			if err != nil {
				b.Fatal(err)
			}
			chunk := make([]byte, 1<<20)
			for off := int64(0); off < size; off += int64(len(chunk)) {
				if _, err := f.WriteAt(chunk, off); err != nil {
					b.Fatal(err)
				}
			}
			if err := vfs.Datasync(f); err != nil {
				b.Fatal(err)
			}
			frame := make([]byte, 256)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.WriteAt(frame, int64(i*256)%size); err != nil {
					b.Fatal(err)
				}
				if err := vfs.Datasync(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
