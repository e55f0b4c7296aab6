package core_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// TestCompactionAcrossProcessesLosesNothing: several store handles on one
// directory of the real file system (each its own flocks, as separate
// processes) commit on their own refs with a checkpoint every 4 frames, so
// checkpoints and compactions of different handles interleave: one merges
// while others add runs in front. Afterwards every acknowledged changeset
// reads back, deep verification finds nothing, and a final compaction
// leaves at most 8 runs and no leftover files in index/. The install step's
// check that its inputs are still named in order is what this exercises;
// installing a merge into a run list re-read without that check, or
// removing inputs before the checkpoint naming the merged run, loses runs
// here.
func TestCompactionAcrossProcessesLosesNothing(t *testing.T) {
	const handles, commits = 4, 120
	dir := filepath.Join(t.TempDir(), "s")
	o := core.Options{CheckpointEvery: 4}
	s0 := mustCreate(t, dir, o)
	if err := s0.Close(); err != nil {
		t.Fatal(err)
	}
	ids := make([][]core.ID, handles)
	var wg sync.WaitGroup
	errs := make(chan error, handles)
	for h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := core.Open(dir, o)
			if err != nil {
				errs <- err
				return
			}
			var head core.ID
			for i := range commits {
				req := core.CommitRequest{Changes: []core.Change{put(fmt.Sprintf("h%d/f", h), fmt.Sprint(i))}, Advance: fmt.Sprintf("h%d", h)}
				if i > 0 {
					req.Parents = []core.ID{head}
				}
				if head, err = s.Commit(req); err != nil {
					errs <- fmt.Errorf("handle %d commit %d: %w", h, i, err)
					s.Close()
					return
				}
				ids[h] = append(ids[h], head)
			}
			if err := s.Close(); err != nil {
				errs <- fmt.Errorf("handle %d close: %w", h, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, o)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	for h := range ids {
		for i, id := range ids[h] {
			if _, err := sn.Changeset(id); err != nil {
				t.Fatalf("handle %d commit %d: %v", h, i, err)
			}
		}
	}
	rep, err := s.Verify(true, nil)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("Verify(deep): %v %+v", err, rep)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 8 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("index/ holds %d files after a final compaction; want at most 8 runs: %v", len(ents), names)
	}
	in, err := s.Info()
	if err != nil || in.Changesets != int64(handles*commits) {
		t.Fatalf("Info: %d changesets (%v); want %d", in.Changesets, err, handles*commits)
	}
}
