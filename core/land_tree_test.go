package core

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/internal/merge"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// drawFiles draws a tree over an alphabet in which paths are files on one
// side and directories on another ("d" and "d/x", "e/f" and "e/f/g"). Every
// tree holds "z", so none is empty.
func drawFiles(t *rapid.T, label string) map[string]string {
	paths := []string{"a", "b", "d/x", "d/y", "d", "e/f/g", "e/f", "e/h", "e", "s/t/u", "s/v"}
	m := map[string]string{"z": "z"}
	for _, p := range paths {
		if !rapid.Bool().Draw(t, label+" has "+p) {
			continue
		}
		clash := false
		for q := range m {
			if len(q) > len(p) && q[:len(p)+1] == p+"/" || len(p) > len(q) && p[:len(q)+1] == q+"/" {
				clash = true
			}
		}
		if !clash {
			m[p] = rapid.SampledFrom([]string{"1", "2", "33"}).Draw(t, label+" content "+p)
		}
	}
	return m
}

// commitFiles commits files as a root changeset (no parents).
func commitFiles(t *rapid.T, s *Store, files map[string]string) ID {
	var changes []Change
	for p, c := range files {
		changes = append(changes, Change{Path: p, Data: []byte(c)})
	}
	id, err := s.Commit(CommitRequest{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// flatDiff is Diff's definition: every path whose entry differs between the
// two flattened trees.
func flatDiff(a, b map[string]objects.Entry) []PathChange {
	var out []PathChange
	for _, p := range merge.ChangedPaths(a, b) {
		ea, aok := a[p]
		eb, bok := b[p]
		switch {
		case !aok:
			out = append(out, PathChange{Path: p, Op: "add", New: eb})
		case !bok:
			out = append(out, PathChange{Path: p, Op: "delete", Old: ea})
		default:
			out = append(out, PathChange{Path: p, Op: "modify", Old: ea, New: eb})
		}
	}
	return out
}

// TestTreeMergeEqualsAFlatMerge: the merge Land builds from tree walks
// (Diff pruning shared subtrees, head read at the changed paths alone) gives
// exactly the edits and conflicts of the merge over three flattened trees,
// before and after moving onto a newer head; and Diff equals the difference
// of the flattened trees. It fails if headAt misses a file where a path needs
// a directory (a lost "e/f/g" vs "e/f" conflict), if it counts no files
// under a path that is a directory in head, or if Diff skips a subtree that
// changed, or if headEdits gets wrong whether the old head had a path.
func TestTreeMergeEqualsAFlatMerge(t *testing.T) {
	s := MustCreate(t, "/s", Options{FS: faultfs.NewMem()})
	rapid.Check(t, func(t *rapid.T) {
		base := commitFiles(t, s, drawFiles(t, "base"))
		head := commitFiles(t, s, drawFiles(t, "head"))
		theirs := commitFiles(t, s, drawFiles(t, "theirs"))
		head2 := commitFiles(t, s, drawFiles(t, "head2"))
		sn, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		flat := map[ID]map[string]objects.Entry{}
		for _, id := range []ID{base, head, theirs, head2} {
			if flat[id], err = sn.Flatten(id); err != nil {
				t.Fatal(err)
			}
		}
		for _, pair := range [][2]ID{{base, theirs}, {head, head2}, {theirs, base}} {
			got, err := sn.Diff(pair[0], pair[1])
			if err != nil {
				t.Fatal(err)
			}
			if want := flatDiff(flat[pair[0]], flat[pair[1]]); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Diff:\n got  %v\n want %v", got, want)
			}
		}

		tm, err := buildMerge(sn, base, head, theirs)
		if err != nil {
			t.Fatal(err)
		}
		fm := merge.New(maps.Clone(flat[base]), maps.Clone(flat[head]), maps.Clone(flat[theirs]))
		same := func(when string) {
			ge, gc := tm.Result()
			we, wc := fm.Result()
			if fmt.Sprint(ge) != fmt.Sprint(we) || !slices.Equal(gc, wc) {
				t.Fatalf("%s: tree merge: edits %v conflicts %v\nflat merge: edits %v conflicts %v", when, ge, gc, we, wc)
			}
		}
		same("first head")
		d, err := sn.Diff(head, head2)
		if err != nil {
			t.Fatal(err)
		}
		// The flat side is a fresh merge against head2, so that the edits
		// Land derives from the diff (headEdits) are checked too.
		tm.AdvanceHead(headEdits(d))
		fm = merge.New(maps.Clone(flat[base]), maps.Clone(flat[head2]), maps.Clone(flat[theirs]))
		same("after moving onto a newer head")
	})
}

// TestLandMergeReadsOnlyWhatTheChangeTouches: a merge of a one-file change
// onto a head of 2,000 files in 40 directories reads the directories on the
// change's path, not the trees. Counted through faultfs.Counting on a
// reopened store, so every tree is read from the journal. Flattening the
// three trees, as buildMerge did, failed it with 126 filesystem calls.
func TestLandMergeReadsOnlyWhatTheChangeTouches(t *testing.T) {
	m := faultfs.NewMem()
	s, err := Create("/s", Options{FS: m})
	if err != nil {
		t.Fatal(err)
	}
	var files []Change
	for d := 0; d < 40; d++ {
		for f := 0; f < 50; f++ {
			files = append(files, Change{Path: "d" + strconv.Itoa(d) + "/f" + strconv.Itoa(f), Data: []byte(strconv.Itoa(d*50 + f))})
		}
	}
	m0, err := s.Commit(CommitRequest{Changes: files, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	change := commitChanges(t, s, m0, []Change{{Path: "d7/new", Data: []byte("new")}})
	head, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: []Change{{Path: "d30/other", Data: []byte("other")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	c := faultfs.NewCounting(m)
	s = MustOpen(t, "/s", Options{FS: c})
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	c.Reset()
	mg, err := buildMerge(sn, m0, head, change)
	if err != nil {
		t.Fatal(err)
	}
	calls := c.Total()
	edits, conflicts := mg.Result()
	if len(conflicts) != 0 || len(edits) != 1 || edits[0].Path != "d7/new" {
		t.Fatalf("edits %v conflicts %v, want +d7/new", edits, conflicts)
	}
	// Three changesets, then the root and d7 of base and change, and the
	// root and d7 of head: 9 reads at most.
	if calls > 9 {
		t.Fatalf("merge of a one-file change onto 2,000 files: %d filesystem calls, want at most 9", calls)
	}
	t.Logf("%d filesystem calls", calls)
}
