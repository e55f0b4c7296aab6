package core_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// BenchmarkBlobReadsInParallel reads blobs of an import, each from a
// compressed group the store's cache does not hold, from b.N goroutines
// sharing one store. A group is decoded after the view's lock is
// released, so with -cpu 1,2 the second figure should approach half the
// first on two idle cores; with the decode under the lock the two are
// the same.
func BenchmarkBlobReadsInParallel(b *testing.B) {
	const files, size = 2048, 8 << 10 // 16 MiB: 64 groups of 256 KiB
	s, err := core.Create(b.TempDir()+"/s", core.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	changes := make([]core.Change, files)
	for i := range changes {
		changes[i] = core.Change{Path: fmt.Sprintf("d%02d/f%04d.go", i%37, i), Data: sourceLike(i, size)}
	}
	head, err := s.Commit(core.CommitRequest{Changes: changes, Advance: "main"})
	if err != nil {
		b.Fatal(err)
	}
	sn, err := s.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var seed atomic.Uint64
	b.SetBytes(size)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 7))
		for pb.Next() {
			ch := changes[r.IntN(files)]
			if _, _, err := sn.ReadPath(head, ch.Path); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
