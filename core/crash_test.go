package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// crashSeeds is how many torn clones each crash point gets
// (SWARMOPS_CRASH_SEEDS, default 3).
func crashSeeds(t *testing.T) int64 {
	v := os.Getenv("SWARMOPS_CRASH_SEEDS")
	if v == "" {
		return 3
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		t.Fatalf("SWARMOPS_CRASH_SEEDS=%q: want a positive integer", v)
	}
	return n
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
	s, err := core.Create("/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
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

// TestCrashAtEveryCall runs each write op with a crash at filesystem call
// 1, 2, … (opening the store included), takes strict, torn and
// process-crash clones, reopens, and checks: every acknowledged op is
// present, nothing is half-visible (a changeset is there whole with its
// tree and blobs, and a ref move travels with it), and the recovered store
// takes a new commit and reopens again.
func TestCrashAtEveryCall(t *testing.T) {
	seeds := crashSeeds(t)
	for _, op := range crashOps {
		t.Run(op.name, func(t *testing.T) {
			base, ids := crashBase(t)
			head := ids[len(ids)-1]
			// The op's result without a crash, to recognise it afterwards.
			want, err := op.run(openOK(t, base.CrashClone(faultfs.ProcessCrash, 0)), head)
			if err != nil {
				t.Fatalf("op without crash: %v", err)
			}
			points := 0
			for n := int64(1); ; n++ {
				live := base.CrashClone(faultfs.ProcessCrash, 0)
				c := faultfs.NewCrashing(live, n)
				acked := false
				s, err := core.Open("/s", core.Options{FS: c, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
				if err == nil {
					_, err = op.run(s, head)
					acked = err == nil
					s.Close()
				}
				if !c.Crashed() {
					if err != nil {
						t.Fatalf("no crash but op failed: %v", err)
					}
					break
				}
				if err != nil && !errors.Is(err, core.ErrCrashed) {
					t.Fatalf("crash at call %d: error %v does not wrap ErrCrashed", n, err)
				}
				points++
				check := func(model faultfs.Model, seed int64) {
					t.Helper()
					after := live.CrashClone(model, seed)
					why := fmt.Sprintf("op %s, crash at call %d, model %s seed %d (acked=%v)", op.name, n, model, seed, acked)
					checkAfterCrash(t, after, ids, want, acked, op.advance, why)
				}
				check(faultfs.Strict, 0)
				check(faultfs.ProcessCrash, 0)
				for seed := int64(1); seed <= seeds; seed++ {
					check(faultfs.Torn, seed)
				}
			}
			t.Logf("%s: %d crash points, each strict, process and %d torn clones", op.name, points, seeds)
		})
	}
}

func openOK(t *testing.T, m *faultfs.MemFS) *core.Store {
	s, err := core.Open("/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkAfterCrash(t *testing.T, m *faultfs.MemFS, ids []core.ID, want core.ID, acked, advance bool, why string) {
	t.Helper()
	s, err := core.Open("/s", core.Options{FS: m, CheckpointEvery: 2, InlineThreshold: 256, Now: fixedNow})
	if err != nil {
		t.Fatalf("%s: reopen: %v", why, err)
	}
	defer s.Close()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatalf("%s: snapshot: %v", why, err)
	}
	for i, id := range ids {
		if _, err := sn.Flatten(id); err != nil {
			t.Fatalf("%s: base commit %d lost: %v", why, i, err)
		}
	}
	main, err := sn.Ref("main")
	if err != nil {
		t.Fatalf("%s: main lost: %v", why, err)
	}
	_, present := sn.Flatten(want)
	visible := present == nil
	if advance {
		visible = main == want
		if main != want && main != ids[len(ids)-1] {
			t.Fatalf("%s: main = %s, neither the old head nor the op's result", why, main)
		}
		if visible {
			if _, err := sn.Flatten(want); err != nil {
				t.Fatalf("%s: main names %s but it is not whole: %v", why, want, err)
			}
		}
	}
	if acked && !visible {
		t.Fatalf("%s: acknowledged op is not visible after recovery", why)
	}
	if rep, err := s.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("%s: verify after recovery: %v %+v", why, err, rep)
	}
	// The recovered store still works and reopens (recovery is complete).
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{main}, Changes: []core.Change{put("after", "x")}}); err != nil {
		t.Fatalf("%s: commit after recovery: %v", why, err)
	}
	s.Close()
	s2, err := core.Open("/s", core.Options{FS: m})
	if err != nil {
		t.Fatalf("%s: second reopen: %v", why, err)
	}
	s2.Close()
}
