package zblob

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// text is n bytes of something like source code: compressible.
func text(n int, seed uint64) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(seed, 2))
	for b.Len() < n {
		b.WriteString("func f")
		b.WriteByte(byte('a' + r.IntN(26)))
		b.WriteString("(x int) int { return x + 1 }\n")
	}
	return b.Bytes()[:n]
}

// noise is n random bytes: incompressible.
func noise(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestBlobsAreCompressedOnlyWhenItPays: a compressible blob is appended
// as a smaller frame that decodes to it; an incompressible one, one too
// small to gain, and one whose frame would pass MaxStored are refused and
// leave dst as it was.
func TestBlobsAreCompressedOnlyWhenItPays(t *testing.T) {
	prefix := []byte("before")
	for _, c := range []struct {
		name string
		blob []byte
		want bool
	}{
		{"text", text(20_000, 1), true},
		{"text of 64 KiB", text(64<<10, 2), true},
		{"noise", noise(5_000, 3), false},
		{"one byte", []byte("x"), false},
		{"empty", nil, false},
		{"frame over MaxStored", append(text(10_000, 4), noise(70_000, 5)...), false},
	} {
		out, ok := Append(bytes.Clone(prefix), c.blob)
		if ok != c.want {
			t.Fatalf("%s: Append of %d bytes: %v (frame of %d); want %v", c.name, len(c.blob), ok, len(out)-len(prefix), c.want)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("%s: Append changed dst's bytes", c.name)
		}
		if !ok {
			if len(out) != len(prefix) {
				t.Fatalf("%s: refused, but dst grew by %d bytes", c.name, len(out)-len(prefix))
			}
			continue
		}
		z := out[len(prefix):]
		if len(z) >= len(c.blob) || len(z) > MaxStored {
			t.Fatalf("%s: frame of %d bytes for %d", c.name, len(z), len(c.blob))
		}
		got, err := Decode(z, int64(len(c.blob)))
		if err != nil || !bytes.Equal(got, c.blob) {
			t.Fatalf("%s: decode: %d bytes, %v; want the blob back", c.name, len(got), err)
		}
	}
}

// TestDamagedFramesAreErrorsNeverPanics: a frame with any bit flipped,
// cut short, with bytes after it, or decoded with a size other than its
// own, is ErrDecode or (a flip the frame's checks cannot see) exactly
// size bytes, which the store's id check then rejects; never a panic,
// never another length.
func TestDamagedFramesAreErrorsNeverPanics(t *testing.T) {
	blob := text(6_000, 7)
	z, ok := Append(nil, blob)
	if !ok {
		t.Fatal("test blob does not compress")
	}
	n := int64(len(blob))
	check := func(what string, z []byte, size int64) {
		got, err := Decode(z, size)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("%s: %v; want ErrDecode", what, err)
			}
			return
		}
		if int64(len(got)) != size {
			t.Fatalf("%s: %d bytes without an error; want %d", what, len(got), size)
		}
	}
	for i := range len(z) * 8 {
		d := bytes.Clone(z)
		d[i/8] ^= 1 << (i % 8)
		check("flip", d, n)
	}
	for i := range len(z) {
		check("cut", z[:i], n)
	}
	check("trailing bytes", append(bytes.Clone(z), 1, 2, 3), n)
	check("a second frame", append(bytes.Clone(z), z...), n)
	for _, size := range []int64{0, n - 1, n + 1, 2 * n, -1, 1 << 40} {
		if _, err := Decode(z, size); !errors.Is(err, ErrDecode) {
			t.Fatalf("decode as %d bytes (it is %d): %v; want ErrDecode", size, n, err)
		}
	}
}

// FuzzDecode: arbitrary bytes and sizes never panic, and what decodes is
// exactly the size asked for.
func FuzzDecode(f *testing.F) {
	for i, b := range [][]byte{text(3_000, 8), text(40_000, 9), append(text(500, 10), noise(500, 11)...)} {
		z, ok := Append(nil, b)
		if !ok {
			f.Fatalf("seed %d does not compress", i)
		}
		f.Add(z, int64(len(b)))
	}
	f.Fuzz(func(t *testing.T, z []byte, size int64) {
		if size > 1<<20 {
			size %= 1 << 20
		}
		got, err := Decode(z, size)
		if err == nil && int64(len(got)) != size {
			t.Fatalf("decoded %d bytes without an error; want %d", len(got), size)
		}
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("%v; want ErrDecode", err)
		}
	})
}
