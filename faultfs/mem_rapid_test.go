package faultfs_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestMemFileMatchesModel drives one MemFS file with random writes,
// truncates, allocations, syncs and clones, and compares the live bytes,
// the strict clone and the process clone with a plain byte-slice model. It
// guards the copy-on-write sharing of pages between a file, its durable
// image and its clones: a clone must never see a later write of the
// original, nor the original a write of a clone.
func TestMemFileMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := faultfs.NewMem()
		f, err := m.Create("/f")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		var live, durable []byte
		type clone struct {
			fs   *faultfs.MemFS
			want []byte
		}
		var clones []clone
		// read returns view of the file's bytes: every write lands in a
		// window of the view, and reading the whole megabyte in between at
		// every step would dominate the test's time.
		read := func(fsys vfs.FS) []byte {
			g, err := fsys.Open("/f")
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			st, err := g.Stat()
			if err != nil {
				t.Fatal(err)
			}
			size := st.Size()
			var out []byte
			for _, w := range windows(size) {
				b := make([]byte, w[1]-w[0])
				if err := vfs.ReadFull(g, b, w[0]); err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			return append(out, fmt.Sprint(size)...)
		}
		view := func(b []byte) []byte {
			var out []byte
			for _, w := range windows(int64(len(b))) {
				out = append(out, b[w[0]:w[1]]...)
			}
			return append(out, fmt.Sprint(len(b))...)
		}
		t.Repeat(map[string]func(*rapid.T){
			"write": func(t *rapid.T) {
				off := offset(t)
				n := rapid.IntRange(1, 9000).Draw(t, "n")
				b := bytes.Repeat([]byte{rapid.Byte().Draw(t, "byte")}, n)
				if _, err := f.WriteAt(b, off); err != nil {
					t.Fatal(err)
				}
				if end := int(off) + n; end > len(live) {
					live = append(live, make([]byte, end-len(live))...)
				}
				copy(live[off:], b)
			},
			"truncate": func(t *rapid.T) {
				n := int(offset(t))
				if err := f.Truncate(int64(n)); err != nil {
					t.Fatal(err)
				}
				if n < len(live) {
					live = live[:n]
				} else {
					live = append(live, make([]byte, n-len(live))...)
				}
			},
			"allocate": func(t *rapid.T) {
				n := int(offset(t)) + 1
				if err := vfs.Allocate(f, 0, int64(n)); err != nil {
					t.Fatal(err)
				}
				if n > len(live) {
					live = append(live, make([]byte, n-len(live))...)
				}
			},
			"sync": func(t *rapid.T) {
				if err := vfs.Datasync(f); err != nil {
					t.Fatal(err)
				}
				durable = append([]byte(nil), live...)
			},
			"strict clone": func(t *rapid.T) {
				clones = keepLast(append(clones, clone{m.CrashClone(faultfs.Strict, 1), append([]byte(nil), durable...)}))
			},
			"process clone": func(t *rapid.T) {
				clones = keepLast(append(clones, clone{m.CrashClone(faultfs.ProcessCrash, 1), append([]byte(nil), live...)}))
			},
			"scribble on a clone": func(t *rapid.T) {
				if len(clones) == 0 {
					t.Skip("no clone yet")
				}
				c := &clones[rapid.IntRange(0, len(clones)-1).Draw(t, "clone")]
				g, err := c.fs.OpenFile("/f", os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				off := int(offset(t))
				if _, err := g.WriteAt([]byte("scribble"), int64(off)); err != nil {
					t.Fatal(err)
				}
				g.Sync()
				g.Close()
				if end := off + 8; end > len(c.want) {
					c.want = append(c.want, make([]byte, end-len(c.want))...)
				}
				copy(c.want[off:], "scribble")
			},
			"": func(t *rapid.T) {
				if got, want := read(m), view(live); !bytes.Equal(got, want) {
					t.Fatalf("live bytes: got %d bytes, want %d (first difference at %d of the view)", len(got), len(want), firstDiff(got, want))
				}
				for i, c := range clones {
					if got, want := read(c.fs), view(c.want); !bytes.Equal(got, want) {
						t.Fatalf("clone %d: got %d bytes, want %d (first difference at %d of the view)", i, len(got), len(want), firstDiff(got, want))
					}
				}
			},
		})
	})
}

// offset draws a file offset near the start or near a 1 MiB boundary, where
// MemFS's page chunks begin and end.
func offset(t *rapid.T) int64 {
	base := rapid.SampledFrom([]int64{0, 1<<20 - 12000}).Draw(t, "region")
	return base + rapid.Int64Range(0, 20000).Draw(t, "off")
}

// windows are the ranges of a file of the given size that the checks read:
// the start and the region around the first 1 MiB boundary, which hold
// every byte offset writes.
func windows(size int64) [][2]int64 {
	var ws [][2]int64
	for _, w := range [][2]int64{{0, 32 << 10}, {1<<20 - 32<<10, 1<<20 + 32<<10}} {
		lo, hi := w[0], min(w[1], size)
		if lo < hi {
			ws = append(ws, [2]int64{lo, hi})
		}
	}
	return ws
}

// keepLast bounds the clones checked after every step, to keep the test
// fast; older clones were checked while they were kept.
func keepLast[T any](s []T) []T {
	if len(s) > 3 {
		return s[len(s)-3:]
	}
	return s
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
