package core

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// file makes an entry whose id is derived from a content label.
func file(content string) objects.Entry {
	return objects.Entry{Mode: objects.ModeFile, ID: objects.ID{0: 1, 1: byte(len(content)), 2: content[0]}}
}

func tree(kv ...string) map[string]objects.Entry {
	m := map[string]objects.Entry{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = file(kv[i+1])
	}
	return m
}

func editsString(edits []headEdit) []string {
	var out []string
	for _, e := range edits {
		if e.Delete {
			out = append(out, "-"+e.Path)
		} else {
			out = append(out, "+"+e.Path)
		}
	}
	return out
}

func TestThreeWayMergeDecidesEachPathByWhoChangedIt(t *testing.T) {
	cases := []struct {
		name               string
		base, head, theirs map[string]objects.Entry
		edits, conflicts   []string
	}{
		{"theirs adds a file head lacks",
			tree("a", "1"), tree("a", "1", "h", "h"), tree("a", "1", "t", "t"), []string{"+t"}, nil},
		{"theirs modifies a file head left alone",
			tree("a", "1"), tree("a", "1", "h", "h"), tree("a", "2"), []string{"+a"}, nil},
		{"theirs deletes a file head left alone",
			tree("a", "1", "b", "b"), tree("a", "1", "b", "b"), tree("a", "1"), []string{"-b"}, nil},
		{"both made the same change: nothing to do",
			tree("a", "1"), tree("a", "2"), tree("a", "2"), nil, nil},
		{"both deleted: nothing to do",
			tree("a", "1"), tree(), tree(), nil, nil},
		{"both modified differently: conflict",
			tree("a", "1"), tree("a", "2"), tree("a", "3"), nil, []string{"a"}},
		{"head deleted what theirs modified: conflict",
			tree("a", "1"), tree(), tree("a", "3"), nil, []string{"a"}},
		{"both added differently: conflict",
			tree(), tree("n", "x"), tree("n", "y"), nil, []string{"n"}},
		{"head's own changes elsewhere never matter",
			tree("a", "1", "z", "z"), tree("a", "1", "z", "Z"), tree("a", "2", "z", "z"), []string{"+a"}, nil},
		{"a file where head has a directory: conflict",
			tree(), tree("d/x", "x"), tree("d", "d"), nil, []string{"d"}},
		{"a file under a path head has as a file: conflict",
			tree(), tree("d", "d"), tree("d/x", "x"), nil, []string{"d/x"}},
		{"theirs turns a directory into a file head left alone",
			tree("d/x", "x"), tree("d/x", "x"), tree("d", "d"), []string{"+d", "-d/x"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newPathMerge(c.base, c.head, c.theirs)
			edits, conflicts := m.result()
			if got := editsString(edits); !slices.Equal(got, c.edits) {
				t.Errorf("edits: got %v, want %v", got, c.edits)
			}
			if !slices.Equal(conflicts, c.conflicts) {
				t.Errorf("conflicts: got %v, want %v", conflicts, c.conflicts)
			}
		})
	}
}

func TestForEachDirListsProperAncestors(t *testing.T) {
	var got []string
	forEachDir("a/b/c", func(d string) { got = append(got, d) })
	if want := []string{"a", "a/b"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got = nil
	forEachDir("top", func(d string) { got = append(got, d) })
	if len(got) != 0 {
		t.Fatalf("got %v for a top-level path, want none", got)
	}
}

// drawTree draws a small tree over a fixed alphabet of paths, so that the
// three sides overlap often.
func drawTree(t *rapid.T, label string) map[string]objects.Entry {
	paths := []string{"a", "b", "c", "d/x", "d/y", "e/f/g", "e"}
	m := map[string]objects.Entry{}
	for _, p := range paths {
		if rapid.Bool().Draw(t, label+" has "+p) {
			m[p] = file(rapid.SampledFrom([]string{"1", "2", "33"}).Draw(t, label+" content "+p))
		}
	}
	// One tree never holds a path as a file and as a directory.
	if _, ok := m["e/f/g"]; ok {
		delete(m, "e")
	}
	return m
}

// drawEdit draws a tree that keeps each of base's paths with probability
// one half and otherwise drops or rewrites it (or adds it, if base lacks it).
func drawEdit(t *rapid.T, base map[string]objects.Entry, label string) map[string]objects.Entry {
	paths := []string{"a", "b", "c", "d/x", "d/y", "e/f/g", "e"}
	m := map[string]objects.Entry{}
	for _, p := range paths {
		switch rapid.IntRange(0, 3).Draw(t, label+" edit of "+p) {
		case 0, 1:
			if e, ok := base[p]; ok {
				m[p] = e
			}
		case 2: // drop
		case 3:
			m[p] = file(rapid.SampledFrom([]string{"1", "2", "33"}).Draw(t, label+" content "+p))
		}
	}
	if _, ok := m["e/f/g"]; ok {
		delete(m, "e")
	}
	return m
}

// TestIncrementalRemergeEqualsAFreshMerge is the claim behind
// LandResult.Remerged: moving a merge onto a newer head by the head's diff
// alone gives exactly the edits and conflicts a merge from scratch against
// the newer head gives.
func TestIncrementalRemergeEqualsAFreshMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base, theirs := drawTree(t, "base"), drawTree(t, "theirs")
		h1, h2 := drawTree(t, "head1"), drawTree(t, "head2")
		inc := newPathMerge(maps.Clone(base), maps.Clone(h1), maps.Clone(theirs))
		var edits []headEdit
		for _, p := range changedPaths(h1, h2) {
			e, ok := h2[p]
			_, had := h1[p]
			edits = append(edits, headEdit{Path: p, Delete: !ok, Entry: e, Had: had})
		}
		if n := inc.advanceHead(edits); n != len(edits) {
			t.Fatalf("advanceHead reported %d re-merged paths, want %d", n, len(edits))
		}
		fresh := newPathMerge(maps.Clone(base), maps.Clone(h2), maps.Clone(theirs))
		ge, gc := inc.result()
		we, wc := fresh.result()
		if fmt.Sprint(ge) != fmt.Sprint(we) || !slices.Equal(gc, wc) {
			t.Fatalf("incremental: edits %v conflicts %v\nfresh:       edits %v conflicts %v", ge, gc, we, wc)
		}
	})
}

// TestMergeResultIsTheirsOverHead checks the result against the definition:
// applying the edits to head yields head with theirs' changes, whenever
// there is no conflict.
func TestMergeResultIsTheirsOverHead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// head and theirs are edits of base, so most draws merge cleanly;
		// independent trees conflicted so often that rapid ran out of
		// valid draws now and then.
		base := drawTree(t, "base")
		head, theirs := drawEdit(t, base, "head"), drawEdit(t, base, "theirs")
		edits, conflicts := newPathMerge(maps.Clone(base), maps.Clone(head), maps.Clone(theirs)).result()
		if len(conflicts) > 0 {
			t.Skip("conflicting draw")
		}
		got := maps.Clone(head)
		for _, e := range edits {
			if e.Delete {
				delete(got, e.Path)
			} else {
				got[e.Path] = e.Entry
			}
		}
		for _, p := range changedPaths(base, theirs) {
			te, tok := theirs[p]
			ge, gok := got[p]
			if !sameEntry(te, tok, ge, gok) {
				t.Fatalf("path %q: merged %v/%v, theirs %v/%v", p, ge, gok, te, tok)
			}
		}
		changed := map[string]bool{}
		for _, p := range changedPaths(base, theirs) {
			changed[p] = true
		}
		for p, he := range head {
			if changed[p] {
				continue
			}
			if ge, ok := got[p]; !ok || ge != he {
				t.Fatalf("path %q that theirs did not change lost head's value", p)
			}
		}
		for p := range got {
			forEachDir(p, func(d string) {
				if _, clash := got[d]; clash {
					t.Fatalf("merged tree holds %q as a file and as a directory", d)
				}
			})
		}
	})
}

// newLandStore makes a store on the power-loss memory filesystem with main
// at a changeset holding base.txt.
func newLandStore(t *testing.T) (*Store, ID) {
	t.Helper()
	s, err := Create("/s", Options{FS: faultfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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

// advanceMain commits changes onto main.
func advanceMain(t *testing.T, s *Store, changes []Change) ID {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := sn.Ref("main")
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.Commit(CommitRequest{Parents: []ID{head}, Changes: changes, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func setLandHook(t *testing.T, f func(attempt int)) {
	TestHookLandBeforeCommit = f
	t.Cleanup(func() { TestHookLandBeforeCommit = nil })
}

func TestLandAfterALostRaceRemergesOnlyWhatTheTargetGained(t *testing.T) {
	for _, ff := range []bool{true, false} {
		t.Run(fmt.Sprintf("first-attempt-fast-forward=%v", ff), func(t *testing.T) {
			s, m0 := newLandStore(t)
			change, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: puts("mine", 5)})
			if err != nil {
				t.Fatal(err)
			}
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
	change, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: puts("mine", 1)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	setLandHook(t, func(int) { n++; advanceMain(t, s, puts(fmt.Sprintf("r%d-", n), 1)) })
	_, err = s.Land(change, "main", LandOptions{MaxAttempts: 3})
	if !errors.Is(err, ErrBusy) || n != 3 {
		t.Fatalf("got %v after %d attempts, want ErrBusy after 3", err, n)
	}
}

func TestLandConflictListsPathsAndWritesNothing(t *testing.T) {
	s, m0 := newLandStore(t)
	change, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: []Change{{Path: "base.txt", Data: []byte("mine")}, {Path: "ok", Data: []byte("1")}}})
	if err != nil {
		t.Fatal(err)
	}
	head := advanceMain(t, s, []Change{{Path: "base.txt", Data: []byte("theirs")}})
	_, err = s.Land(change, "main", LandOptions{})
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
	side, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: puts("side", 1)})
	if err != nil {
		t.Fatal(err)
	}
	change, err := s.Commit(CommitRequest{Parents: []ID{side}, Changes: puts("mine", 1)})
	if err != nil {
		t.Fatal(err)
	}
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
	s0, err := Create("/s", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	m0, err := s0.Commit(CommitRequest{Changes: []Change{{Path: "base.txt", Data: []byte("b")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	handles := make([]*Store, n)
	changes := make([]ID, n)
	for i := range handles {
		if handles[i], err = Open("/s", Options{FS: mem}); err != nil {
			t.Fatal(err)
		}
		defer handles[i].Close()
		if changes[i], err = handles[i].Commit(CommitRequest{Parents: []ID{m0}, Changes: puts(fmt.Sprintf("w%d-", i), 2)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	results := make([]*LandResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = handles[i].Land(changes[i], "main", LandOptions{})
		}()
	}
	close(start)
	wg.Wait()
	for i := range handles {
		if errs[i] != nil {
			t.Fatalf("lander %d: %v", i, errs[i])
		}
		if results[i].Attempts > 3 {
			t.Errorf("lander %d took %d attempts (remerged %v), want at most 3", i, results[i].Attempts, results[i].Remerged)
		}
	}
	sn, err := s0.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := sn.Ref("main")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, _, err := sn.ReadPath(head, fmt.Sprintf("w%d-0", i)); err != nil {
			t.Fatalf("lander %d's file on main: %v", i, err)
		}
	}
}
