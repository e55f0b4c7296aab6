package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// deadStore is a store whose ref "dead" held a changeset with file x
// (3 KB, inline, in a segment gc reclaims) and was deleted; "keep" holds
// enough history after it to fill a few 256 KiB segments. It returns the
// directory, the options, x's bytes and the dead changeset.
func deadStore(t *testing.T, w testknobs.Weakening) (string, core.Options, []byte, core.ID) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	o := core.Options{SegmentSize: 256 << 10, CheckpointEvery: 64, RetryPlace: -1}
	if w != 0 {
		testknobs.Weaken(&o, w)
	}
	s := mustCreate(t, dir, o)
	x := bytes.Repeat([]byte("dead object "), 256)
	dead, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "x", Data: x}}, Advance: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	gcHistory(t, s, 1, 200) // ref b0: three segments
	if err := s.UpdateRefs(core.RefUpdate{Name: "dead", Old: dead}); err != nil {
		t.Fatal(err)
	}
	return dir, o, x, dead
}

// readX commits nothing and reads path p of ref's changeset.
func readRef(t *testing.T, s *core.Store, ref, p string) ([]byte, error) {
	t.Helper()
	sn := snap(t, s)
	id, err := sn.Ref(ref)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := sn.ReadPath(id, p)
	return data, err
}

// TestGCKeepsLeasedObjects: a changeset no ref names, held by a live
// lease, survives gc whole; an expired lease holds nothing and is removed,
// and so does a torn one, reported.
// With the GCIgnoresLeases canary the leased changeset is lost (the check
// that the crash sweep's self-test relies on).
func TestGCKeepsLeasedObjects(t *testing.T) {
	for _, canary := range []bool{false, true} {
		t.Run(fmt.Sprint("canary=", canary), func(t *testing.T) {
			var w testknobs.Weakening
			if canary {
				w = testknobs.GCIgnoresLeases
			}
			dir, o, x, dead := deadStore(t, w)
			s := mustOpen(t, dir, o)
			if err := s.Lease("agent-1", []core.ID{dead}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := s.Lease("gone", []core.ID{dead}, time.Nanosecond); err != nil {
				t.Fatal(err)
			}
			// What a power loss can leave of an unsynced lease write.
			if err := os.WriteFile(filepath.Join(dir, core.LeaseDir, "torn"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			rep, err := s.GC(core.GCOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sn := snap(t, s)
			data, _, rerr := sn.ReadPath(dead, "x")
			if canary {
				if rerr == nil {
					t.Fatalf("with leases ignored the leased changeset survived: %+v", rep)
				}
				return
			}
			if rerr != nil || !bytes.Equal(data, x) {
				t.Fatalf("leased changeset after gc: %v", rerr)
			}
			if rep.LeasesExpired != 1 || len(rep.Leases) != 1 || rep.Leases[0] != "agent-1" ||
				len(rep.LeasesBad) != 1 || rep.LeasesBad[0] != "torn" {
				t.Errorf("leases in the report: %+v", rep)
			}
			if ls, _, _ := s.Leases(); len(ls) != 1 {
				t.Errorf("%d leases left, want 1", len(ls))
			}
			core.DeepClean(t, s)
		})
	}
}

// TestGCKeepsWhatARetainedReflogMoveNames: the dead ref's move is inside
// a retention of an hour, so its old value is a root.
func TestGCKeepsWhatARetainedReflogMoveNames(t *testing.T) {
	dir, o, x, dead := deadStore(t, 0)
	s := mustOpen(t, dir, o)
	if _, err := s.GC(core.GCOptions{Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	sn, _ := s.Snapshot()
	if data, _, err := sn.ReadPath(dead, "x"); err != nil || !bytes.Equal(data, x) {
		t.Fatalf("changeset of a retained move after gc: %v", err)
	}
	if _, err := s.GC(core.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	sn, _ = s.Snapshot()
	if _, _, err := sn.ReadPath(dead, "x"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("changeset of a move outside the retention after gc: %v", err)
	}
	core.DeepClean(t, s)
}

// TestGCKeepsWhatACommitDuringTheMarkNames: after the mark, a commit
// writes a file with x's bytes; its builder finds x stored and names it
// by id. gc's rescan of the frames appended since the mark keeps it.
func TestGCKeepsWhatACommitDuringTheMarkNames(t *testing.T) {
	dir, o, x, _ := deadStore(t, 0)
	s := mustOpen(t, dir, o)
	testknobs.GCAfterMark = func() {
		if _, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "again", Data: x}}, Advance: "revive"}); err != nil {
			t.Error(err)
		}
	}
	defer func() { testknobs.GCAfterMark = nil }()
	if _, err := s.GC(core.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, err := readRef(t, s, "revive", "again"); err != nil || !bytes.Equal(data, x) {
		t.Fatalf("a file a commit during the mark named by id, after gc: %v", err)
	}
	core.DeepClean(t, s)
}

// TestGCResurrectsWhatAStaleWriterNames: another process, whose index is
// the one before gc's rewrite, commits x's bytes after gc's copies and
// before its last turn of the writer lock: its builder finds x in its old
// index and names it by id. The last rescan, in that turn, finds x live
// again and appends it (the resurrection frame) before the rewritten
// index drops its old record.
func TestGCResurrectsWhatAStaleWriterNames(t *testing.T) {
	dir, o, x, _ := deadStore(t, 0)
	s := mustOpen(t, dir, o)
	other := mustOpen(t, dir, o)
	testknobs.GCBeforeFinish = func() {
		if _, err := other.Commit(core.CommitRequest{Changes: []core.Change{{Path: "again", Data: x}}, Advance: "revive"}); err != nil {
			t.Error(err)
		}
	}
	defer func() { testknobs.GCBeforeFinish = nil }()
	rep, err := s.GC(core.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*core.Store{s, other} {
		if data, err := readRef(t, h, "revive", "again"); err != nil || !bytes.Equal(data, x) {
			t.Fatalf("a file a stale writer named by id, after gc: %v (%+v)", err, rep)
		}
	}
	core.DeepClean(t, s)
}

// TestGCRebuildsACommitBuiltAgainstTheOldIndex: another process opened
// before gc commits x's bytes after gc is done, its builder still on the
// index from before: under the writer lock the gc generation has moved,
// so the commit is built again and writes x. With the rebuild skipped
// (GCSkipsRebuild, on that process only) x is named and gone.
func TestGCRebuildsACommitBuiltAgainstTheOldIndex(t *testing.T) {
	for _, canary := range []bool{false, true} {
		t.Run(fmt.Sprint("canary=", canary), func(t *testing.T) {
			dir, o, x, _ := deadStore(t, 0)
			oo := o
			if canary {
				testknobs.Weaken(&oo, testknobs.GCSkipsRebuild)
			}
			other := mustOpen(t, dir, oo)
			s := mustOpen(t, dir, o)
			if _, err := s.GC(core.GCOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Commit(core.CommitRequest{Changes: []core.Change{{Path: "again", Data: x}}, Advance: "revive"}); err != nil {
				t.Fatal(err)
			}
			data, err := readRef(t, s, "revive", "again")
			if canary {
				if err == nil {
					t.Fatal("without the rebuild the commit's file still reads after gc")
				}
				return
			}
			if err != nil || !bytes.Equal(data, x) {
				t.Fatalf("a commit built against the index before gc: %v", err)
			}
			core.DeepClean(t, s)
		})
	}
}

// TestDeadStoreReclaimsASegment pins that deadStore's x lies in a segment
// gc removes, so the hazard tests above exercise the copy and the
// segment removal, not only the index rewrite.
func TestDeadStoreReclaimsASegment(t *testing.T) {
	dir, o, _, _ := deadStore(t, 0)
	s := mustOpen(t, dir, o)
	rep, err := s.GC(core.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SegmentsRemoved == 0 || rep.Copied == 0 {
		t.Fatalf("gc of the dead store reclaimed no segment: %+v", rep)
	}
}
