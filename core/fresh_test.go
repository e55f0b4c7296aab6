package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// TestReplayTrustsFreshFramesAndChecksTheOthers: a writer records in each
// frame whether its changeset was new to the store (frameTxnFresh), so an
// open that replays new changesets reads no index run beyond the headers;
// and a changeset made twice (a writer whose projection was behind built
// it again) is written as an ordinary frame, so replay finds it in the runs
// and keeps its first record. Marking every frame fresh made the second
// part fail: a snapshot from before the second copy lost the changeset.
func TestReplayTrustsFreshFramesAndChecksTheOthers(t *testing.T) {
	m, _, s1, behind := aheadAndBehind(t)
	same := core.CommitRequest{Changes: []core.Change{put("a", "same")}, Agent: "a", Message: "m", Time: time.Unix(1_700_000_000, 0)}
	first := mustCommit(t, s1, same)
	for i := 0; i < 7; i++ {
		mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("n", string(rune('0'+i)))}})
	}
	// Frames of new changesets past the newest checkpoint.
	for i := 0; i < 3; i++ {
		mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("p", string(rune('a'+i)))}})
	}
	in, err := s1.Info()
	if err != nil || in.DurableSeq-in.CheckpointSeq != 3 {
		t.Fatalf("want 3 frames past the checkpoint: %+v, %v", in, err)
	}
	c := faultfs.NewCounting(m.CrashClone(faultfs.ProcessCrash, 0))
	s := mustOpen(t, "/s", core.Options{FS: c, CheckpointEvery: 4})
	var reads, runs int64
	for p := range c.Paths() {
		if strings.HasPrefix(p, "/s/index/") {
			reads += c.PathCount(faultfs.OpRead, p)
			runs++
		}
	}
	s.Close()
	if reads > runs {
		t.Fatalf("an open replaying 3 fresh frames read the index runs %d times; want only their %d headers", reads, runs)
	}

	// The changeset again, from the writer that is behind: its frame is
	// not fresh, so a snapshot from before it still reads the first
	// record, and replay does not count the changeset twice.
	old := snap(t, s1)
	if id := mustCommit(t, behind, same); id != first {
		t.Fatalf("the same request made %s, then %s", first, id)
	}
	if _, err := s1.Snapshot(); err != nil { // catches s1 up
		t.Fatal(err)
	}
	if _, err := old.Changeset(first); err != nil {
		t.Fatalf("a snapshot from before the second copy: %v", err)
	}
	want := in.Changesets
	s2 := mustOpen(t, "/s", core.Options{FS: m.CrashClone(faultfs.ProcessCrash, 0), CheckpointEvery: 4})
	if in, err := s2.Info(); err != nil || in.Changesets != want {
		t.Fatalf("after the changeset was made twice: %d changesets (%v); want %d", in.Changesets, err, want)
	}
}

// TestDeepVerifyReportsAFalseFreshClaim: replay trusts a fresh frame's word
// that its changesets are new, so Verify(deep), which replays the whole
// journal, checks it. A writer made to claim it for a changeset the store
// already holds (the FalseFresh canary) is reported, naming the frames;
// without the check in Verify the report was clean.
func TestDeepVerifyReportsAFalseFreshClaim(t *testing.T) {
	m := faultfs.NewMem()
	o := core.Options{FS: m}
	s1 := mustCreate(t, "/s", o)
	testknobs.Weaken(&o, testknobs.FalseFresh)
	liar := mustOpen(t, "/s", o) // stays behind until it commits
	same := core.CommitRequest{Changes: []core.Change{put("a", "same")}, Agent: "a", Message: "m", Time: time.Unix(1_700_000_000, 0)}
	mustCommit(t, s1, same)
	mustCommit(t, liar, same)
	rep, err := s1.Verify(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.Reason, "says its changesets are new, but frame 1 holds this one")
	}
	if !found {
		t.Fatalf("Verify(deep) after a false fresh claim: %+v", rep.Problems)
	}
}
