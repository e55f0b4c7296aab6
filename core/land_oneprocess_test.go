package core

import (
	"fmt"
	"testing"
	"time"
)

// TestLandersSharingOneHandleEachLandOnce is the server's case: many
// goroutines of one process land onto one ref through one Store. They take
// their turns on the ref one at a time, so none loses a race to another
// and each lands at its first attempt; without that order, losers
// re-merged behind one another and some ran out of attempts (ErrBusy).
func TestLandersSharingOneHandleEachLandOnce(t *testing.T) {
	const n = 24
	setLandHook(t, func(int) { time.Sleep(time.Millisecond) })
	s, m0 := newLandStore(t)
	changes := make([]ID, n)
	for i := range changes {
		var err error
		if changes[i], err = s.Commit(CommitRequest{Parents: []ID{m0}, Changes: puts(fmt.Sprintf("w%d-", i), 2)}); err != nil {
			t.Fatal(err)
		}
	}
	results := landAtOnce(t, changes, func(int) *Store { return s }, LandOptions{MaxAttempts: 2})
	for i := range changes {
		if results[i].Attempts != 1 {
			t.Errorf("lander %d took %d attempts, want 1: lands of one handle onto one ref go one at a time", i, results[i].Attempts)
		}
	}
}
