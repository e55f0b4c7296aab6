package core_test

import (
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// aheadAndBehind creates a store on a memory FS that checkpoints every
// four changesets (inline), and opens a second handle on it that stays
// behind, replaying nothing, until it commits: a writer whose projection
// is behind and so builds again what the store already holds.
func aheadAndBehind(t *testing.T) (m *faultfs.MemFS, o core.Options, ahead, behind *core.Store) {
	t.Helper()
	m = faultfs.NewMem()
	o = core.Options{FS: m, CheckpointEvery: 4, InlineCheckpoint: true}
	return m, o, mustCreate(t, "/s", o), mustOpen(t, "/s", o)
}

// TestSnapshotReadsABlobARunHoldsAfterALaterCopy: a blob already in an index
// run can come again in a later frame (a writer whose projection was behind
// built it too). Replay indexes that copy in the tail without looking in the
// runs, so a snapshot taken before the copy's frame must still read the blob
// through the run's record. Without the fallback in readObjectSeq it read
// ErrNotFound.
func TestSnapshotReadsABlobARunHoldsAfterALaterCopy(t *testing.T) {
	_, o, s1, s2 := aheadAndBehind(t)
	first := mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("a", "same")}})
	for i := 0; i < 8; i++ {
		mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("n", string(rune('0'+i)))}})
	}
	if in, err := s1.Info(); err != nil || in.CheckpointSeq < 2 {
		t.Fatalf("want the first commit under a checkpoint: %+v, %v", in, err)
	}
	s3 := mustOpen(t, "/s", o)
	old := snap(t, s3)
	// s2 has not seen the blob: its commit carries it again.
	mustCommit(t, s2, core.CommitRequest{Changes: []core.Change{put("b", "same")}})
	snap(t, s3) // s3 replays s2's frame
	data, _, err := old.ReadPath(first, "a")
	if err != nil || string(data) != "same" {
		t.Fatalf("the older snapshot reads a = %q, %v; want \"same\"", data, err)
	}
	if rep, err := s3.Verify(true, nil); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify with the copy in the tail: %v %+v", err, rep)
	}
	in, err := s3.Info()
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint past the copy leaves it out of its run: the counts stay
	// exact and deep verification is clean.
	for i := 0; i < 8; i++ {
		mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("n", string(rune('a'+i)))}})
	}
	rep, err := s1.Verify(true, nil)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	in2, err := s1.Info()
	if err != nil {
		t.Fatal(err)
	}
	if in2.Objects-in.Objects != 8*3 {
		t.Fatalf("objects %d before eight more commits, %d after; want 24 more (blob, tree, changeset each)", in.Objects, in2.Objects)
	}
}
