package core

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// newLandStore makes a store on the power-loss memory filesystem with main
// at a changeset holding base.txt.
func newLandStore(t *testing.T) (*Store, ID) {
	t.Helper()
	return newLandStoreOn(t, faultfs.NewMem())
}

// newLandStoreOn is newLandStore on fsys, for tests that open more handles.
func newLandStoreOn(t *testing.T, fsys vfs.FS) (*Store, ID) {
	t.Helper()
	s := MustCreate(t, "/s", Options{FS: fsys})
	m0, err := s.Commit(CommitRequest{Changes: []Change{{Path: "base.txt", Data: []byte("b")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	return s, m0
}

// puts builds n put changes named prefix0..prefix(n-1).
func puts(prefix string, n int) []Change {
	var out []Change
	for i := 0; i < n; i++ {
		out = append(out, Change{Path: fmt.Sprintf("%s%d", prefix, i), Data: []byte(prefix)})
	}
	return out
}

// commitChanges commits changes on parent and moves no ref: a change to
// land, or a branch to build on.
func commitChanges(t *testing.T, s *Store, parent ID, changes []Change) ID {
	t.Helper()
	id, err := s.Commit(CommitRequest{Parents: []ID{parent}, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// advanceMain commits changes onto main.
func advanceMain(t *testing.T, s *Store, changes []Change) ID {
	t.Helper()
	head := refAt(t, s, "main")
	id, err := s.Commit(CommitRequest{Parents: []ID{head}, Changes: changes, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// landAtOnce starts the lands of changes onto main together, change i
// through store(i) with opts, and returns each one's result once all have
// returned; a land that fails fails the test.
func landAtOnce(t *testing.T, changes []ID, store func(i int) *Store, opts LandOptions) []*LandResult {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]*LandResult, len(changes))
	errs := make([]error, len(changes))
	start := make(chan struct{})
	for i := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = store(i).Land(changes[i], "main", opts)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("lander %d: %v", i, err)
		}
	}
	return results
}

func setLandHook(t *testing.T, f func(attempt int)) {
	testknobs.LandBeforeCommit = f
	t.Cleanup(func() { testknobs.LandBeforeCommit = nil })
}

func TestLandAfterALostRaceRemergesOnlyWhatTheTargetGained(t *testing.T) {
	for _, ff := range []bool{true, false} {
		t.Run(fmt.Sprintf("first-attempt-fast-forward=%v", ff), func(t *testing.T) {
			s, m0 := newLandStore(t)
			change := commitChanges(t, s, m0, puts("mine", 5))
			if !ff {
				advanceMain(t, s, puts("early", 2))
			}
			setLandHook(t, func(attempt int) {
				if attempt == 1 {
					advanceMain(t, s, puts("theirs", 3))
				}
			})
			r, err := s.Land(change, "main", LandOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Attempts != 2 || !slices.Equal(r.Remerged, []int{3}) || r.NoOp {
				t.Fatalf("got attempts %d remerged %v noop %v, want 2, [3], false", r.Attempts, r.Remerged, r.NoOp)
			}
			sn, _ := s.Snapshot()
			flat, err := sn.Flatten(r.Changeset)
			if err != nil {
				t.Fatal(err)
			}
			want := 1 + 5 + 3
			if !ff {
				want += 2
			}
			if len(flat) != want {
				t.Fatalf("merged tree has %d files, want %d: %v", len(flat), want, flat)
			}
		})
	}
}

func TestLandGivesUpWithErrBusyWhenTheTargetNeverStops(t *testing.T) {
	s, m0 := newLandStore(t)
	change := commitChanges(t, s, m0, puts("mine", 1))
	n := 0
	setLandHook(t, func(int) { n++; advanceMain(t, s, puts(fmt.Sprintf("r%d-", n), 1)) })
	_, err := s.Land(change, "main", LandOptions{MaxAttempts: 3})
	if !errors.Is(err, ErrBusy) || n != 3 {
		t.Fatalf("got %v after %d attempts, want ErrBusy after 3", err, n)
	}
}

func TestLandConflictListsPathsAndWritesNothing(t *testing.T) {
	s, m0 := newLandStore(t)
	change := commitChanges(t, s, m0, []Change{{Path: "base.txt", Data: []byte("mine")}, {Path: "ok", Data: []byte("1")}})
	head := advanceMain(t, s, []Change{{Path: "base.txt", Data: []byte("theirs")}})
	_, err := s.Land(change, "main", LandOptions{})
	var mc *MergeConflictError
	if !errors.As(err, &mc) || !slices.Equal(mc.Paths, []string{"base.txt"}) || !errors.Is(err, ErrConflict) {
		t.Fatalf("got %v, want a merge conflict on base.txt", err)
	}
	sn, _ := s.Snapshot()
	if now, _ := sn.Ref("main"); now != head {
		t.Fatalf("main moved to %s on a conflict", now)
	}
}

func TestLandMergesAChangeWhoseBranchForkedEarlier(t *testing.T) {
	s, m0 := newLandStore(t)
	side := commitChanges(t, s, m0, puts("side", 1))
	change := commitChanges(t, s, side, puts("mine", 1))
	advanceMain(t, s, puts("main", 1))
	r, err := s.Land(change, "main", LandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sn, _ := s.Snapshot()
	flat, _ := sn.Flatten(r.Changeset)
	for _, p := range []string{"base.txt", "side0", "mine0", "main0"} {
		if _, ok := flat[p]; !ok {
			t.Errorf("%s missing after landing a change whose branch forked at the merge base", p)
		}
	}
	if base, _ := mergeBase(sn, r.Changeset, change); base != change {
		t.Errorf("mergeBase(merge, change) = %s, want change itself", errs.Short(base))
	}
}

// TestRacingLandersEachLandWithinThreeAttempts: landers on separate handles
// (as separate processes) all land onto one main at once. The writer lock
// serves them in arrival order, so a loser that queued again for each retry
// would lose to every lander queued ahead of it, one winner per round, and
// run out of attempts; a loser that keeps its turn after losing lands by its
// third attempt at the latest (its second, unless main moved while it
// queued for the turn). It fails with ErrBusy or more attempts if Land
// gives the lock back between retries.
func TestRacingLandersEachLandWithinThreeAttempts(t *testing.T) {
	const n = 24
	// Each attempt dwells a moment before its commit, as a real merge
	// does, so the landers' attempts overlap and they queue together.
	setLandHook(t, func(int) { time.Sleep(time.Millisecond) })
	mem := faultfs.NewMem()
	s0, m0 := newLandStoreOn(t, mem)
	handles := make([]*Store, n)
	changes := make([]ID, n)
	for i := range handles {
		var err error
		if handles[i], err = Open("/s", Options{FS: mem}); err != nil {
			t.Fatal(err)
		}
		defer handles[i].Close()
		if changes[i], err = handles[i].Commit(CommitRequest{Parents: []ID{m0}, Changes: puts(fmt.Sprintf("w%d-", i), 2)}); err != nil {
			t.Fatal(err)
		}
	}
	results := landAtOnce(t, changes, func(i int) *Store { return handles[i] }, LandOptions{})
	for i := range handles {
		if results[i].Attempts > 3 {
			t.Errorf("lander %d took %d attempts (remerged %v), want at most 3", i, results[i].Attempts, results[i].Remerged)
		}
	}
	sn, head := snapRef(t, s0, "main")
	for i := range n {
		if _, _, err := sn.ReadPath(head, fmt.Sprintf("w%d-0", i)); err != nil {
			t.Fatalf("lander %d's file on main: %v", i, err)
		}
	}
}

func TestLandOfABranchOfSeveralChangesetsFastForwards(t *testing.T) {
	s, m0 := newLandStore(t)
	c1 := commitChanges(t, s, m0, puts("a", 1))
	c2 := commitChanges(t, s, c1, puts("b", 1))
	res, err := s.Land(c2, "main", LandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changeset != c2 || res.NoOp || res.Attempts != 1 {
		t.Fatalf("land of a two-changeset branch onto its unmoved base: %+v, want a fast-forward to %s", res, c2)
	}
	if got := refAt(t, s, "main"); got != c2 {
		t.Fatalf("main is %s, want %s", got, c2)
	}
	// Once main moved past the fork, the same shape merges.
	c3 := commitChanges(t, s, m0, puts("c", 1))
	c4 := commitChanges(t, s, c3, puts("d", 1))
	res, err = s.Land(c4, "main", LandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sn.Changeset(res.Changeset)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cs.Parents, []ID{c2, c4}) {
		t.Fatalf("land after main moved: parents %v, want a merge of %s and %s", cs.Parents, c2, c4)
	}
	// A change that holds main only as a second parent is merged too:
	// a fast-forward would put the branch's history first on main.
	head := res.Changeset
	c5, err := s.Commit(CommitRequest{Parents: []ID{c4, head}, Changes: puts("e", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = s.Land(c5, "main", LandOptions{}); err != nil {
		t.Fatal(err)
	}
	if sn, err = s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if cs, err = sn.Changeset(res.Changeset); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cs.Parents, []ID{head, c5}) {
		t.Fatalf("land of a merge holding main as its second parent: parents %v, want a merge of %s and %s", cs.Parents, head, c5)
	}
}
