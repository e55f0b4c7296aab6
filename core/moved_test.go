package core_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// TestAHandleWhoseDirectoryMovedWritesNothing: a store moved away while a
// handle (a server's) has it open, and a new store made at its old path.
// A commit through the old handle must fail with ErrMoved and write
// nothing anywhere: appended by path, its frame landed in the new store's
// journal while the end it published went to the moved store's state
// file, which the moved store then refused to open (corrupt, its
// acknowledged commit in neither store).
func TestAHandleWhoseDirectoryMovedWritesNothing(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	s := mustCreate(t, a, core.Options{})
	head := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", "1")}, Advance: "main"})
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	fresh := mustCreate(t, a, core.Options{})
	mustCommit(t, fresh, core.CommitRequest{Changes: []core.Change{put("g", "new")}, Advance: "main"})
	if err := fresh.Close(); err != nil {
		t.Fatal(err)
	}

	_, err := s.Commit(core.CommitRequest{Parents: []core.ID{head}, Changes: []core.Change{put("f", "2")}, Advance: "main"})
	if !errors.Is(err, core.ErrMoved) {
		t.Fatalf("commit through the moved handle: %v; want ErrMoved", err)
	}
	if err := s.Checkpoint(); !errors.Is(err, core.ErrMoved) {
		t.Fatalf("checkpoint through the moved handle: %v; want ErrMoved", err)
	}
	s.Close()
	for _, dir := range []string{a, b} {
		o, err := core.Open(dir, core.Options{})
		if err != nil {
			t.Fatalf("open %s after the moved handle's commit: %v", dir, err)
		}
		rep, err := o.Verify(true, nil)
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("verify %s: %v %v", dir, err, rep)
		}
		o.Close()
	}
}
