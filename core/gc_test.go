package core_test

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// dirBytes is the bytes of every file under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		n += st.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gcHistory commits branches of n changesets each on refs b0, b1, …, every
// changeset a new 3 KB file (and every tenth a 70 KB loose one), and
// returns each branch's changesets.
func gcHistory(t *testing.T, s *core.Store, branches, n int) [][]core.ID {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([][]core.ID, branches)
	for b := range branches {
		var head core.ID
		for i := range n {
			size := 3000
			if i%10 == 9 {
				size = 70 << 10
			}
			data := make([]byte, size)
			for j := range data {
				data[j] = byte('a' + rng.IntN(26))
			}
			req := core.CommitRequest{Changes: []core.Change{{Path: fmt.Sprintf("d%d/f%d", i%7, i), Data: data}},
				Advance: fmt.Sprintf("b%d", b), Agent: "gc-test"}
			if i > 0 {
				req.Parents = []core.ID{head}
			}
			var err error
			if head, err = s.Commit(req); err != nil {
				t.Fatal(err)
			}
			ids[b] = append(ids[b], head)
		}
	}
	return ids
}

// checkBranch reads every file of every changeset of ids.
func checkBranch(t *testing.T, s *core.Store, ids []core.ID) {
	t.Helper()
	sn := snap(t, s)
	for _, id := range ids {
		files, err := sn.Flatten(id)
		if err != nil {
			t.Fatalf("flatten %s: %v", id, err)
		}
		for p := range files {
			if _, _, err := sn.ReadPath(id, p); err != nil {
				t.Fatalf("read %s:%s: %v", id, p, err)
			}
		}
	}
}

// TestGCShrinksAStoreWhoseHistoryIsDropped: ten branches of 100
// changesets; nine refs are deleted (90 % of the history, outside the
// retention), and gc shrinks the store by at least 80 % on disk, counting
// every file under the store directory. The kept branch reads back whole,
// after a reopen too, deep verification finds nothing, and a dropped
// branch's changesets are gone.
func TestGCShrinksAStoreWhoseHistoryIsDropped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	o := core.Options{SegmentSize: 256 << 10, CheckpointEvery: 64}
	s, err := core.Create(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	ids := gcHistory(t, s, 10, 100)
	for b := 1; b < 10; b++ {
		last := ids[b][len(ids[b])-1]
		if err := s.UpdateRefs(core.RefUpdate{Name: fmt.Sprintf("b%d", b), Old: last}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	before := dirBytes(t, dir)
	rep, err := s.GC(core.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := dirBytes(t, dir)
	t.Logf("%d bytes before gc, %d after (%.1f %% less); %+v", before, after, 100*(1-float64(after)/float64(before)), rep)
	if after > before/5 {
		t.Errorf("gc left %d of %d bytes, more than 20 %%", after, before)
	}
	checkBranch(t, s, ids[0])
	sn := snap(t, s)
	if _, err := sn.Changeset(ids[3][10]); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a dropped changeset reads back after gc: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = core.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	checkBranch(t, s, ids[0])
	// A commit after gc on the kept branch works.
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{ids[0][99]}, Changes: []core.Change{put("after", "gc")}, Advance: "b0"}); err != nil {
		t.Fatal(err)
	}
	vr, err := s.Verify(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vr.Problems) > 0 {
		t.Errorf("deep verify after gc: %d problems, first %v", len(vr.Problems), vr.Problems[0])
	}
	// Recover agrees: nothing to cut, nothing corrupt.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rr, err := core.Recover(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if rr.TornBytesCut != 0 || len(rr.Corrupt) != 0 {
		t.Errorf("recover after gc: %+v", rr)
	}
}
