package index

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCSmallMatchesCRC32: the bytewise prefix checksum gives exactly what
// crc32.Update gives, for every length the record, fanout and heap checksums
// use and more, from any starting value, so run files keep their format.
func TestCRCSmallMatchesCRC32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 64; n++ {
		for range 50 {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			crc := rng.Uint32()
			if got, want := crcSmall(crc, p), crc32.Update(crc, castagnoli, p); got != want {
				t.Fatalf("crcSmall(%#x, % x) = %#x, want %#x (crc32.Update)", crc, p, got, want)
			}
		}
	}
}
