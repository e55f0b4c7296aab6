package loose

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// text is n bytes of something like source code: compressible.
func text(n int) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(1, 2))
	for b.Len() < n {
		b.WriteString("func f")
		b.WriteByte(byte('a' + r.IntN(26)))
		b.WriteString("(x int) int { return x + 1 }\n")
	}
	return b.Bytes()[:n]
}

// noise is n random bytes: incompressible.
func noise(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeFile(t *testing.T, m *faultfs.MemFS, name string, b []byte) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// TestLooseFilesAreCompressedWhenItPaysAndReadBack: a compressible object
// is stored as a zstd frame smaller than it, an incompressible one as it
// is, and both read back exactly, up to a 20 MB object (past the window).
func TestLooseFilesAreCompressedWhenItPaysAndReadBack(t *testing.T) {
	m := faultfs.NewMem()
	for _, c := range []struct {
		name   string
		data   []byte
		packed bool
	}{{"text", text(200 << 10), true}, {"noise", noise(100 << 10), false}, {"big", append(text(12<<20), noise(8<<20)...), true}} {
		enc := Encode(c.data)
		if packed := len(enc) < len(c.data); packed != c.packed {
			t.Fatalf("%s: %d bytes stored as %d; want compressed: %v", c.name, len(c.data), len(enc), c.packed)
		}
		writeFile(t, m, "/"+c.name, enc)
		got := make([]byte, len(c.data))
		if err := Read(m, "/"+c.name, got); err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: read back %v, equal %v", c.name, err, bytes.Equal(got, c.data))
		}
	}
}

// TestDamagedLooseFilesAreCorruptNeverAPanic: a compressed loose file that
// is cut, flipped anywhere, longer than the object, or a frame of more
// bytes than the object's size reads as ErrCorrupt or as bytes the caller's
// id check rejects, never a panic or an allocation the size does not bound.
func TestDamagedLooseFilesAreCorruptNeverAPanic(t *testing.T) {
	m := faultfs.NewMem()
	data := text(100 << 10)
	enc := Encode(data)
	got := make([]byte, len(data))
	corrupt := func(what string, b []byte) {
		t.Helper()
		writeFile(t, m, "/x", b)
		err := Read(m, "/x", got)
		// No error is allowed too: the bytes then go to the caller's id
		// check (a flip zstd's own checks let through).
		if err != nil && !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("%s: %v; want ErrCorrupt", what, err)
		}
	}
	for i := range enc {
		b := bytes.Clone(enc)
		b[i] ^= 0x20
		corrupt("flipped", b)
	}
	for n := 1; n < len(enc); n += 97 {
		writeFile(t, m, "/x", enc[:n])
		if err := Read(m, "/x", got); !errors.Is(err, errs.ErrCorrupt) {
			t.Fatalf("cut to %d of %d bytes: %v; want ErrCorrupt", n, len(enc), err)
		}
	}
	more := Encode(append(bytes.Clone(data), text(1000)...))
	writeFile(t, m, "/x", more)
	if err := Read(m, "/x", got); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a frame of more bytes than the object: %v; want ErrCorrupt", err)
	}
	writeFile(t, m, "/x", append(bytes.Clone(data), 0))
	if err := Read(m, "/x", got); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("a file longer than the object: %v; want ErrCorrupt", err)
	}
}

// TestABigObjectIsWrittenWithoutASecondCopy: objects from streamAbove on
// are compressed into their file as a stream, stored compressed when that
// pays and as they are when not, and read back exactly; writing a 32 MiB
// object allocates a small part of its size (EncodeAll allocated at least
// as much again, which made a 200 MB commit take 720 MB), and so does
// reading it.
func TestABigObjectIsWrittenWithoutASecondCopy(t *testing.T) {
	// The OS, not the memory filesystem, whose files are heap.
	m := vfs.OS()
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		data   []byte
		packed bool
	}{{"text", text(32 << 20), true}, {"noise", noise(32 << 20), false}} {
		name := dir + "/" + c.name
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		alloc := allocated(func() {
			if err := writeEncoded(f, c.data); err != nil {
				t.Fatal(err)
			}
		})
		f.Close()
		if alloc > len(c.data)/3 {
			t.Errorf("%s: writing %d bytes allocated %d", c.name, len(c.data), alloc)
		}
		st, err := m.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if packed := st.Size() < int64(len(c.data)); packed != c.packed {
			t.Fatalf("%s: %d bytes stored as %d; want compressed: %v", c.name, len(c.data), st.Size(), c.packed)
		}
		got := make([]byte, len(c.data))
		alloc = allocated(func() {
			if err := Read(m, name, got); err != nil {
				t.Fatal(err)
			}
		})
		if !bytes.Equal(got, c.data) {
			t.Fatalf("%s: read back differs", c.name)
		}
		if alloc > len(c.data)/3 {
			t.Errorf("%s: reading %d bytes allocated %d", c.name, len(c.data), alloc)
		}
	}
}

// allocated returns the bytes fn allocated on the heap.
func allocated(fn func()) int {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return int(b.TotalAlloc - a.TotalAlloc)
}
