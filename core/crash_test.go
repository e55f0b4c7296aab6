package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// crashSeeds is how many torn clones each crash point gets
// (SWARMOPS_CRASH_SEEDS, default 3).
func crashSeeds(t *testing.T) int64 {
	return int64(envCount(t, "SWARMOPS_CRASH_SEEDS", 3))
}

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC) }

// crashOp is one write operation swept at every filesystem call.
type crashOp struct {
	name    string
	advance bool // whether the op moves main to its changeset
	run     func(s *core.Store, base core.ID) (core.ID, error)
}

var bigBlob = bytes.Repeat([]byte("large blob "), 64)

var crashOps = []crashOp{
	{"commit", false, func(s *core.Store, base core.ID) (core.ID, error) {
		return s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{put("new/file", "N")}, Time: fixedNow()})
	}},
	{"commit-advance", true, func(s *core.Store, base core.ID) (core.ID, error) {
		return s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{put("new/file", "N"), {Path: "f0", Delete: true}}, Advance: "main", Time: fixedNow()})
	}},
	{"commit-advance-loose", true, func(s *core.Store, base core.ID) (core.ID, error) {
		return s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{{Path: "big", Data: bigBlob}}, Advance: "main", Time: fixedNow()})
	}},
	{"commit-advance-chunked", true, func(s *core.Store, base core.ID) (core.ID, error) {
		chs := []core.Change{put("c/a", strings.Repeat("a", 200)), put("c/b", strings.Repeat("b", 200)), put("c/c", strings.Repeat("c", 200))}
		return s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: chs, Advance: "main", Time: fixedNow()})
	}},
	{"ref-set", true, func(s *core.Store, base core.ID) (core.ID, error) {
		sn, err := s.Snapshot()
		if err != nil {
			return core.ID{}, err
		}
		first, err := sn.Resolve("main~2")
		if err != nil {
			return core.ID{}, err
		}
		return first, s.UpdateRefs(core.RefUpdate{Name: "main", Old: base, New: first})
	}},
}

// crashBase builds the store every crash point starts from: three commits
// advancing main, with a checkpoint every 2 frames so crashes also land in
// checkpoint writes.
func crashBase(t *testing.T) (*faultfs.MemFS, []core.ID) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	var ids []core.ID
	for i := 0; i < 3; i++ {
		req := core.CommitRequest{Changes: []core.Change{put(fmt.Sprint("f", i), fmt.Sprint(i))}, Advance: "main", Time: fixedNow()}
		if i > 0 {
			req.Parents = []core.ID{ids[i-1]}
		}
		ids = append(ids, mustCommit(t, s, req))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return m, ids
}

// sweep runs op with a crash at filesystem call 1, 2, … (opening the store
// included) under the weakening w, takes strict, torn and process-crash
// clones of each crash state, reopens, and returns every violation found:
// an acknowledged op missing, a half-visible op, a store that does not
// reopen, verify, take a new commit and reopen again.
func sweep(t *testing.T, op crashOp, w testknobs.Weakening, seeds int64, stopAtFirst bool) (points int, violations []string) {
	base, ids := crashBase(t)
	head := ids[len(ids)-1]
	// The op's result without a crash, to recognise it afterwards.
	want, err := op.run(openOK(t, base.CrashClone(faultfs.ProcessCrash, 0)), head)
	if err != nil {
		t.Fatalf("op without crash: %v", err)
	}
	for n := int64(1); ; n++ {
		live := base.CrashClone(faultfs.ProcessCrash, 0)
		c := faultfs.NewCrashing(live, n)
		acked := false
		// Chunks of 300 bytes: the chunked op writes one chunk ahead of
		// its frame; the others hold less than a chunk.
		o := core.Options{FS: c, CheckpointEvery: 2, InlineThreshold: 256, CommitChunkBytes: 300, Now: fixedNow}
		testknobs.Weaken(&o, w)
		s, err := core.Open("/s", o)
		if err == nil {
			_, err = op.run(s, head)
			acked = err == nil
			s.Close()
		}
		if !c.Crashed() {
			if err != nil {
				t.Fatalf("no crash but op failed: %v", err)
			}
			return points, violations
		}
		if err != nil && !errors.Is(err, core.ErrCrashed) {
			t.Fatalf("crash at call %d: error %v does not wrap ErrCrashed", n, err)
		}
		points++
		// C4: what a reader could see at the moment of the crash must
		// survive it. A reader opens the crashed state as another process
		// of the same boot would.
		seen := readerSees(live, want, op.advance)
		models := []faultfs.Model{faultfs.Strict, faultfs.ProcessCrash}
		for seed := int64(0); seed <= seeds; seed++ {
			model := faultfs.Torn
			if seed == 0 {
				model = models[0]
			}
			for _, m := range append([]faultfs.Model{model}, models[1:]...)[:1+boolInt(seed == 0)] {
				after := live.CrashClone(m, seed)
				if err := checkAfterCrash(after, ids, want, acked || seen, op.advance); err != nil {
					violations = append(violations, fmt.Sprintf("op %s, crash at call %d, model %s seed %d (acked=%v, seen by a reader=%v): %v", op.name, n, m, seed, acked, seen, err))
					if stopAtFirst {
						return points, violations
					}
				}
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCrashAtEveryCall checks that a commit, a commit with ref advance (with
// and without a loose object) and a ref move keep every claim at every crash
// point.
func TestCrashAtEveryCall(t *testing.T) {
	seeds := crashSeeds(t)
	for _, op := range crashOps {
		t.Run(op.name, func(t *testing.T) {
			points, v := sweep(t, op, 0, seeds, false)
			for _, x := range v {
				t.Error(x)
			}
			t.Logf("%s: %d crash points, each strict, process and %d torn clones", op.name, points, seeds)
		})
	}
}

// TestCrashCheckCatchesWeakenings shows the crash check can fail: each
// canary that breaks a durability rule must produce a violation.
func TestCrashCheckCatchesWeakenings(t *testing.T) {
	cases := []struct {
		w  testknobs.Weakening
		op int
	}{
		{testknobs.SkipDatasync, 1},
		{testknobs.AckBeforeSync, 1},
		{testknobs.EarlyDurable, 1},
		{testknobs.EarlyDurable, 0},
		{testknobs.SkipDirSync, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.w), func(t *testing.T) {
			_, v := sweep(t, crashOps[c.op], c.w, 3, true)
			if len(v) == 0 {
				t.Fatalf("weakening %d went unnoticed by the crash check", c.w)
			}
			t.Logf("caught: %s", v[0])
		})
	}
}

// readerSees reports whether a reader opening the crashed state (same boot)
// sees the op's effect at the crash instant. An open that wrote or synced
// (it made the dead writer's published frames durable, groupsync.Syncer.Orphaned) is not
// such a reader: what it saw is durable because of its own sync, which the
// crash clones of the instant do not have (crashsweep's pureReader).
func readerSees(live *faultfs.MemFS, want core.ID, advance bool) bool {
	c := faultfs.NewCounting(live.CrashClone(faultfs.ProcessCrash, 0))
	s, err := core.Open("/s", core.Options{FS: c})
	if err != nil {
		return false
	}
	defer s.Close()
	if c.Count(faultfs.OpWrite)+c.Count(faultfs.OpDatasync)+c.Count(faultfs.OpSync) > 0 {
		return false
	}
	sn, err := s.Snapshot()
	if err != nil {
		return false
	}
	if advance {
		main, err := sn.Ref("main")
		return err == nil && main == want
	}
	_, err = sn.Changeset(want)
	return err == nil
}

func openOK(t *testing.T, m *faultfs.MemFS) *core.Store {
	s, err := core.Open("/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkAfterCrash(m *faultfs.MemFS, ids []core.ID, want core.ID, acked, advance bool) error {
	s, err := core.Open("/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer s.Close()
	sn, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	for i, id := range ids {
		if _, err := sn.Flatten(id); err != nil {
			return fmt.Errorf("base commit %d lost: %w", i, err)
		}
	}
	main, err := sn.Ref("main")
	if err != nil {
		return fmt.Errorf("main lost: %w", err)
	}
	_, present := sn.Flatten(want)
	visible := present == nil
	if advance {
		visible = main == want
		if main != want && main != ids[len(ids)-1] {
			return fmt.Errorf("main = %s, neither the old head nor the op's result", main)
		}
		if visible {
			if _, err := sn.Flatten(want); err != nil {
				return fmt.Errorf("main names %s but it is not whole: %w", want, err)
			}
		}
	}
	if acked && !visible {
		return fmt.Errorf("an op that was acknowledged or seen by a reader is not visible after recovery")
	}
	if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
		return fmt.Errorf("verify after recovery: %v %+v", err, rep)
	}
	// The recovered store still works and reopens (recovery is complete).
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{main}, Changes: []core.Change{put("after", "x")}}); err != nil {
		return fmt.Errorf("commit after recovery: %w", err)
	}
	s.Close()
	s2, err := core.Open("/s", core.Options{FS: m})
	if err != nil {
		return fmt.Errorf("second reopen: %w", err)
	}
	s2.Close()
	return nil
}

// TestCrashDuringRecovery (C10): recovery of a power-lost store with a torn
// tail is itself crashed at every filesystem call; whatever state that
// leaves (strict, torn, process clones) recovers again to the same store.
func TestCrashDuringRecovery(t *testing.T) {
	m, ids, end := threeCommits(t, core.Options{})
	scribble(t, m, seg1, end, []byte("SWF1\x01\x00\x00\x00 torn frame bytes that a recovery must cut"))
	lost := m.CrashClone(faultfs.Strict, 0)
	seeds := crashSeeds(t)
	points := 0
	for n := int64(1); ; n++ {
		live := lost.CrashClone(faultfs.ProcessCrash, 0)
		c := faultfs.NewCrashing(live, n)
		s, err := core.Open("/s", core.Options{FS: c})
		if err == nil {
			s.Close()
		}
		if !c.Crashed() {
			if err != nil {
				t.Fatalf("recovery without a crash failed: %v", err)
			}
			break
		}
		points++
		for seed := int64(0); seed <= seeds; seed++ {
			model := faultfs.Torn
			if seed == 0 {
				model = faultfs.Strict
			}
			for _, mod := range []faultfs.Model{model, faultfs.ProcessCrash} {
				after := live.CrashClone(mod, seed)
				s, err := core.Open("/s", core.Options{FS: after})
				if err != nil {
					t.Fatalf("recovery crashed at call %d, model %s seed %d: reopen: %v", n, mod, seed, err)
				}
				if got, err := snap(t, s).Ref("main"); err != nil || got != ids[2] {
					t.Fatalf("recovery crashed at call %d, model %s seed %d: main = %v, %v", n, mod, seed, got, err)
				}
				if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
					t.Fatalf("recovery crashed at call %d, model %s seed %d: verify: %v %+v", n, mod, seed, err, rep)
				}
				s.Close()
			}
		}
	}
	t.Logf("%d crash points inside recovery", points)
}

// TestCrashDuringCreate: init is acknowledged only once the store is
// durable; a crashed init leaves either a store that opens or leftovers a
// new Create clears. Either way a commit acknowledged on what the crash left
// survives a further power loss.
func TestCrashDuringCreate(t *testing.T) {
	for n := int64(1); ; n++ {
		live := faultfs.NewMem()
		c := faultfs.NewCrashing(live, n)
		s, err := core.Create("/s", core.Options{FS: c})
		if err == nil {
			s.Close()
		}
		if !c.Crashed() {
			break
		}
		acked := err == nil
		type clone struct {
			mod  faultfs.Model
			seed int64
		}
		clones := []clone{{faultfs.Strict, 0}, {faultfs.ProcessCrash, 0}}
		for seed := n; seed < n+4; seed++ {
			clones = append(clones, clone{faultfs.Torn, seed})
		}
		for _, cl := range clones {
			mod := cl.mod
			after := live.CrashClone(cl.mod, cl.seed)
			s, err := core.Open("/s", core.Options{FS: after})
			if err != nil {
				if acked {
					t.Fatalf("init crashed at call %d (%s) after acknowledging: %v", n, mod, err)
				}
				if s, err = core.Create("/s", core.Options{FS: after}); err != nil {
					t.Fatalf("init crashed at call %d (%s seed %d): neither Open nor Create works: %v", n, mod, cl.seed, err)
				}
			}
			id, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
			s.Close()
			if err != nil {
				t.Fatalf("init crashed at call %d (%s): store opens but does not commit: %v", n, mod, err)
			}
			s, err = core.Open("/s", core.Options{FS: after.CrashClone(faultfs.Strict, 0)})
			if err != nil {
				t.Fatalf("init crashed at call %d (%s seed %d): a commit acknowledged afterwards is lost at a power loss: %v", n, mod, cl.seed, err)
			}
			if got, err := snap(t, s).Ref("main"); err != nil || got != id {
				t.Fatalf("init crashed at call %d (%s seed %d): after a power loss main = %v, %v", n, mod, cl.seed, got, err)
			}
			s.Close()
		}
	}
}

// TestOpenSyncsAnOrphanedTail: a writer killed between publishing its frame
// and the sync step leaves the frame in the page cache, past the durable
// end. The next open makes it durable (groupsync.Syncer.Orphaned), with one datasync, so
// the client that opens, reads main and moves it does not lose its
// compare-and-swap to a frame it could not see. Without that sync the
// move conflicts at those crash points ("ref \"main\": expected ...").
func TestOpenSyncsAnOrphanedTail(t *testing.T) {
	base, ids := crashBase(t)
	op := crashOps[1] // commit-advance
	orphans := 0
	for n := int64(1); ; n++ {
		live := base.CrashClone(faultfs.ProcessCrash, 0)
		c := faultfs.NewCrashing(live, n)
		s, err := core.Open("/s", core.Options{FS: c, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
		if err == nil {
			_, err = op.run(s, ids[len(ids)-1])
			s.Close()
		}
		if !c.Crashed() {
			break
		}
		cnt := faultfs.NewCounting(live.CrashClone(faultfs.ProcessCrash, 0))
		s, err = core.Open("/s", core.Options{FS: cnt, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
		if err != nil {
			t.Fatalf("crash at call %d: open: %v", n, err)
		}
		syncs := cnt.Count(faultfs.OpDatasync)
		if syncs > 1 {
			t.Fatalf("crash at call %d: the open made %d datasyncs, want at most 1", n, syncs)
		}
		orphans += int(syncs)
		head, err := snap(t, s).Ref("main")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{head}, Advance: "main", Changes: []core.Change{put("after", "A")}, Time: fixedNow()}); err != nil {
			t.Fatalf("crash at call %d: a commit on the head the reopened store shows: %v", n, err)
		}
		s.Close()
	}
	if orphans == 0 {
		t.Fatal("no crash point left a published frame past the durable end: the test shows nothing")
	}
	t.Logf("%d crash points left an orphaned frame for the open to sync", orphans)
}
