package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// TestFailedSyncPoisonsAndNeverAcknowledges (C9): after a failed fdatasync
// the commit fails with ErrIO, the store refuses further work with
// ErrClosed instead of retrying the sync, and a reopen cuts the unsynced
// tail while keeping every acknowledged commit.
func TestFailedSyncPoisonsAndNeverAcknowledges(t *testing.T) {
	m := faultfs.NewMem()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=datasync,path=*/seg-*,nth=3,err=syncfail"))
	s := mustCreate(t, "/s", core.Options{FS: in})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	_, err := s.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("b", "2")}, Advance: "main"})
	if !errors.Is(err, core.ErrIO) || !in.Check(err) {
		t.Fatalf("commit over a failed sync: got %v, want ErrIO carrying the injected fault", err)
	}
	if _, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("c", "3")}}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("commit after a failed sync: got %v, want ErrClosed", err)
	}
	s.Close()
	if u := in.Unsurfaced(); len(u) != 0 {
		t.Fatalf("injected faults never surfaced: %+v", u)
	}
	s2, err := core.Open("/s", core.Options{FS: m})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if got, _ := snap(t, s2).Ref("main"); got != a {
		t.Fatalf("main = %v, want the acknowledged commit a", got)
	}
	if _, err := s2.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("d", "4")}, Advance: "main"}); err != nil {
		t.Fatalf("commit after recovery: %v", err)
	}
}

// TestPoisonIsSeenByOtherInstances: a second instance (another process) that
// finds the durable record poisoned recovers before appending, and its
// commit succeeds.
func TestPoisonIsSeenByOtherInstances(t *testing.T) {
	m := faultfs.NewMem()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=datasync,path=*/seg-*,nth=2,err=syncfail"))
	s1 := mustCreate(t, "/s", core.Options{FS: in})
	s2 := mustOpen(t, "/s", core.Options{FS: m})
	if _, err := s1.Commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"}); !errors.Is(err, core.ErrIO) {
		t.Fatalf("s1: got %v, want ErrIO", err)
	}
	b, err := s2.Commit(core.CommitRequest{Changes: []core.Change{put("b", "2")}, Advance: "main"})
	if err != nil {
		t.Fatalf("s2 after s1's failed sync: %v", err)
	}
	if got, _ := snap(t, s2).Ref("main"); got != b {
		t.Fatalf("main = %v, want s2's commit (s1's unsynced frame is cut)", got)
	}
}

// TestWriteErrorsAreTyped: ENOSPC and EIO while appending fail the commit
// with ErrNoSpace and ErrIO, publish nothing, and the next commit works.
func TestWriteErrorsAreTyped(t *testing.T) {
	for _, c := range []struct {
		rule string
		want error
	}{
		{"op=write,path=*/seg-*,nth=1,err=enospc", core.ErrNoSpace},
		{"op=write,path=*/seg-*,nth=1,err=eio", core.ErrIO},
		{"op=write,path=*/seg-*,nth=1,err=short", core.ErrIO},
		{"op=lock,path=*/LOCK,nth=1,err=eio", core.ErrIO},
		{"op=datasync,path=*/objects/*,nth=1,err=eio", core.ErrIO},
	} {
		t.Run(c.rule, func(t *testing.T) {
			m := faultfs.NewMem()
			s0, err := core.Create("/s", core.Options{FS: m})
			if err != nil {
				t.Fatal(err)
			}
			s0.Close()
			in := faultfs.NewInjecting(m, faultfs.MustParseRule(c.rule))
			s := mustOpen(t, "/s", core.Options{FS: in, InlineThreshold: 8})
			_, err = s.Commit(core.CommitRequest{Changes: []core.Change{put("a", "a loose blob, longer than 8 bytes")}, Advance: "main"})
			if !errors.Is(err, c.want) || !in.Check(err) {
				t.Fatalf("got %v, want %v carrying the injected fault", err, c.want)
			}
			if _, err := snap(t, s).Ref("main"); !errors.Is(err, core.ErrNotFound) {
				t.Fatalf("failed commit is visible: %v", err)
			}
			if _, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("b", "2")}, Advance: "main"}); err != nil {
				t.Fatalf("next commit: %v", err)
			}
		})
	}
}

// TestCreateSyncsALeftoverDirectory (C1): when an init failed at the sync
// of the store directory's parent, the directory exists only in the page
// cache. The next Create must make it durable, or a commit it acknowledges
// vanishes with the whole store at the next power loss.
func TestCreateSyncsALeftoverDirectory(t *testing.T) {
	m := faultfs.NewMem()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=syncdir,nth=1,err=syncfail"))
	if _, err := core.Create("/s", core.Options{FS: in}); !errors.Is(err, core.ErrIO) || !in.Check(err) {
		t.Fatalf("create over a failed parent sync: got %v, want ErrIO carrying the injected fault", err)
	}
	s, err := core.Create("/s", core.Options{FS: m})
	if err != nil {
		t.Fatalf("create over the leftover directory: %v", err)
	}
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	s.Close()
	s2, err := core.Open("/s", core.Options{FS: m.CrashClone(faultfs.Strict, 0)})
	if err != nil {
		t.Fatalf("open after a power loss: %v", err)
	}
	defer s2.Close()
	if got, _ := snap(t, s2).Ref("main"); got != a {
		t.Fatalf("main = %v after a power loss, want the acknowledged commit", got)
	}
}

// TestCheckpointErrorsAreSurfaced (C9): a checkpoint error reaches a
// caller. Recover returns it; after an acknowledged commit (background or
// inline checkpoint) the commit stays acknowledged and durable, and Close
// returns the error.
func TestCheckpointErrorsAreSurfaced(t *testing.T) {
	for _, inline := range []bool{false, true} {
		m := faultfs.NewMem()
		s, err := core.Create("/s", core.Options{FS: m})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=create,path=*/checkpoint.tmp,nth=1,err=eio"))
		o := core.Options{FS: in, CheckpointEvery: 2, InlineCheckpoint: inline}
		s, err = core.Open("/s", o)
		if err != nil {
			t.Fatal(err)
		}
		a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
		b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("b", "2")}, Advance: "main"})
		if err := s.Close(); !errors.Is(err, core.ErrIO) || !in.Check(err) {
			t.Fatalf("inline=%v: Close after a failed checkpoint: got %v, want ErrIO carrying the injected fault", inline, err)
		}
		if u := in.Unsurfaced(); len(u) != 0 {
			t.Fatalf("inline=%v: injected faults never surfaced: %+v", inline, u)
		}
		s2, err := core.Open("/s", core.Options{FS: m.CrashClone(faultfs.Strict, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := snap(t, s2).Ref("main"); got != b {
			t.Fatalf("inline=%v: main = %v after a power loss, want the acknowledged commit", inline, got)
		}
		s2.Close()
	}
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m})
	mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	s.Close()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=rename,path=*/checkpoint.tmp,nth=1,err=eio"))
	if _, err := core.Recover("/s", core.Options{FS: in}); !errors.Is(err, core.ErrIO) || !in.Check(err) {
		t.Fatalf("Recover over a failed checkpoint rename: got %v, want ErrIO carrying the injected fault", err)
	}
}

// TestALeaseThatFailsToWriteLeavesNoFile: a full disk while a lease is
// written leaves no partial temporary file in leases/, which gc, reading
// only installed leases, would never remove.
func TestALeaseThatFailsToWriteLeavesNoFile(t *testing.T) {
	m := faultfs.NewMem()
	s0, err := core.Create("/s", core.Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	head := mustCommit(t, s0, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	s0.Close()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=write,path=*/leases/.tmp-*,nth=1,err=enospc"))
	s := mustOpen(t, "/s", core.Options{FS: in})
	if err := s.Lease("tree", []core.ID{head}, time.Hour); !errors.Is(err, core.ErrIO) && !errors.Is(err, core.ErrNoSpace) {
		t.Fatalf("lease on a full disk: %v", err)
	}
	fis, err := afero.ReadDir(m, "/s/leases")
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range fis {
		t.Errorf("left in leases/: %s", fi.Name())
	}
}
