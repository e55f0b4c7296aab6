package b3

import (
	"strconv"
	"testing"

	"lukechampine.com/blake3"
)

// TestSameDigest: the digest does not depend on how Write splits the input,
// at every length around the chunk boundaries and the serial limit.
func TestSameDigest(t *testing.T) {
	buf := make([]byte, 3*SerialMax)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	lengths := []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 2*chunk + 1, 5000, SerialMax - 1, SerialMax, SerialMax + 1, 3 * SerialMax}
	for _, n := range lengths {
		if got, want := Sum256(buf[:n]), blake3.Sum256(buf[:n]); got != want {
			t.Fatalf("Sum256 of %d bytes = %x, blake3.Sum256 = %x", n, got, want)
		}
		h := blake3.New(32, nil)
		h.Write([]byte{1})
		Write(h, buf[:n])
		ref := blake3.New(32, nil)
		ref.Write(append([]byte{1}, buf[:n]...))
		if got, want := h.Sum(nil), ref.Sum(nil); string(got) != string(want) {
			t.Fatalf("Write of %d bytes after one byte = %x, want %x", n, got, want)
		}
	}
}

func BenchmarkSum256(b *testing.B) {
	for _, n := range []int{512, 2048, 8192, SerialMax, 64 << 10, 1 << 20} {
		buf := make([]byte, n)
		b.Run("serial/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				Sum256(buf)
			}
		})
		b.Run("blake3/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				blake3.Sum256(buf)
			}
		})
	}
}
