package worktree_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/worktree"
)

// memFixture is a store at /s and a work tree directory /w on one MemFS.
func memFixture(t testing.TB) (*fixture, *faultfs.MemFS) {
	m := faultfs.NewMem()
	return newFixture(t, m, "/s"), m
}

// checkedOut is a memory fixture with a root changeset of changes checked
// out at /w.
func checkedOut(t testing.TB, changes ...core.Change) (*fixture, *faultfs.MemFS, objects.ID) {
	t.Helper()
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, changes...)
	f.checkout(a, "/w")
	return f, m, a
}

func writeMem(t testing.TB, fsys vfs.FS, p, data string) {
	t.Helper()
	f, err := fsys.OpenFile(p, 0o1|0o100|0o1000, 0o644) // O_WRONLY|O_CREATE|O_TRUNC
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(data))
	f.Close()
}

func mustOpen(t testing.TB, dir string, o worktree.Options) *worktree.Tree {
	t.Helper()
	wt, err := worktree.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wt.Close() })
	return wt
}

// TestSwitchWritesOnlyTheFilesThatDiffer switches between two changesets
// of 40 files that differ in 10 and counts, through a counting wrapper,
// the files renamed into the tree and the writes: 10 of each, plus the
// writes of the switch's record and the index.
func TestSwitchWritesOnlyTheFilesThatDiffer(t *testing.T) {
	f, m := memFixture(t)
	var cs []core.Change
	for i := 0; i < 40; i++ {
		cs = append(cs, put(fmt.Sprintf("d%d/f%02d", i%4, i), fmt.Sprintf("v1 %d", i)))
	}
	a := f.commit(objects.ZeroID, cs...)
	var mods []core.Change
	for i := 0; i < 10; i++ {
		mods = append(mods, put(fmt.Sprintf("d%d/f%02d", (i*3)%4, i*3), fmt.Sprintf("v2 %d", i)))
	}
	b := f.commit(a, mods...)
	f.checkout(a, "/w")
	c := faultfs.NewCounting(m)
	c.StartTrace()
	o := f.opts()
	o.FS = c
	res, err := mustOpen(t, "/w", o).Switch(f.snap(), b)
	if err != nil {
		t.Fatal(err)
	}
	renamed := 0
	for _, call := range c.Trace() {
		if call.Op == faultfs.OpRename && !strings.Contains(call.To, worktree.MetaDir) {
			renamed++
		}
	}
	if renamed != 10 || c.Count(faultfs.OpWrite) != 12 || res.Written != 10 || res.Removed != 0 {
		t.Fatalf("switch renamed %d files into the tree, made %d writes, reported %+v; want 10, 12 (10 files, the record and the index)",
			renamed, c.Count(faultfs.OpWrite), res)
	}
	if got := content(t, m, "/w/d3/f27"); got != "v2 9" {
		t.Fatalf("d3/f27 holds %q", got)
	}
	st, err := mustOpen(t, "/w", f.opts()).Status()
	if err != nil || len(st.Changes) != 0 {
		t.Fatalf("status after the switch: %v %v", kinds(st), err)
	}
}

// TestSwitchRefusesLocalChangesUnlessForced edits a file the switch
// changes, adds an untracked file where the new revision puts one, and
// checks the switch refuses, listing both, writing nothing; forced, it
// overwrites them.
func TestSwitchRefusesLocalChangesUnlessForced(t *testing.T) {
	f, m, a := checkedOut(t, put("keep", "k"), put("edit", "1"), put("same", "s"))
	b := f.commit(a, put("edit", "2"), put("new", "n"), del("same"))
	writeMem(t, m, "/w/edit", "local edit")
	writeMem(t, m, "/w/new", "untracked")
	_, err := mustOpen(t, "/w", f.opts()).Switch(f.snap(), b)
	var lc *worktree.LocalChangesError
	if !errors.As(err, &lc) || strings.Join(lc.Paths, ",") != "edit,new" {
		t.Fatalf("switch over local changes: %v, want a LocalChangesError listing edit,new", err)
	}
	if content(t, m, "/w/edit") != "local edit" || content(t, m, "/w/same") != "s" {
		t.Fatal("a refused switch changed the tree")
	}
	if mustOpen(t, "/w", f.opts()).Base() != a {
		t.Fatal("a refused switch moved the base")
	}
	o := f.opts()
	o.Force = true
	if _, err := mustOpen(t, "/w", o).Switch(f.snap(), b); err != nil {
		t.Fatal(err)
	}
	if content(t, m, "/w/edit") != "2" || content(t, m, "/w/new") != "n" {
		t.Fatal("a forced switch did not overwrite")
	}
	if _, err := vfs.Lstat(m, "/w/same"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a deleted file is still there: %v", err)
	}
}

// TestSwitchHandlesFileDirectoryAndLinkTransitions switches across a file
// becoming a directory, a directory becoming a file, a file becoming a
// link and back, and checks status is clean at each end and empty
// directories go.
func TestSwitchHandlesFileDirectoryAndLinkTransitions(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("f2d", "file"), put("d2f/x", "1"), put("d2f/sub/y", "2"),
		put("f2l", "file"), link("l2f", "target"), put("gone/deep/z", "z"))
	// core's change list cannot turn a directory into a file in one
	// commit, so b takes two; the switch from a to b is one step.
	b1 := f.commit(a, del("f2d"), put("f2d/inner", "now a dir"), del("d2f/x"), del("d2f/sub/y"),
		link("f2l", "f2d/inner"), put("l2f", "now a file"), del("gone/deep/z"))
	b := f.commit(b1, put("d2f", "now a file"))
	f.checkout(a, "/w")
	check := func(id objects.ID, want map[string]string) {
		t.Helper()
		for p, v := range want {
			if got := content(t, m, "/w/"+p); got != v {
				t.Errorf("after switching to %s: %s holds %q, want %q", id.String()[:8], p, got, v)
			}
		}
		st, err := mustOpen(t, "/w", f.opts()).Status()
		if err != nil || len(st.Changes) != 0 {
			t.Errorf("status after the switch: %v %v", kinds(st), err)
		}
	}
	for _, step := range []struct {
		id   objects.ID
		want map[string]string
	}{
		{b, map[string]string{"f2d/inner": "now a dir", "d2f": "now a file", "f2l": "->f2d/inner", "l2f": "now a file"}},
		{a, map[string]string{"f2d": "file", "d2f/sub/y": "2", "f2l": "file", "l2f": "->target", "gone/deep/z": "z"}},
		{b, map[string]string{"d2f": "now a file"}},
	} {
		if _, err := mustOpen(t, "/w", f.opts()).Switch(f.snap(), step.id); err != nil {
			t.Fatal(err)
		}
		check(step.id, step.want)
	}
	if _, err := vfs.Lstat(m, "/w/gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory left empty by the switch is still there: %v", err)
	}
}

// TestSwitchRefusesUntrackedFilesInADirectoryThatBecomesAFile checks that
// the refusal comes before anything is written.
func TestSwitchRefusesUntrackedFilesInADirectoryThatBecomesAFile(t *testing.T) {
	f, m, a := checkedOut(t, put("d/x", "1"), put("other", "o"))
	b := f.commit(f.commit(a, del("d/x")), put("d", "file"), put("other", "o2"))
	writeMem(t, m, "/w/d/untracked", "mine")
	_, err := mustOpen(t, "/w", f.opts()).Switch(f.snap(), b)
	if !errors.Is(err, worktree.ErrLocalChanges) {
		t.Fatalf("switch: %v, want ErrLocalChanges", err)
	}
	if content(t, m, "/w/other") != "o" || content(t, m, "/w/d/x") != "1" {
		t.Fatal("the refused switch wrote something")
	}
}

// TestStatusReadsOnlyWhatChanged counts the files a status reads: none on
// an unchanged tree whose index is settled, and exactly the edited ones.
func TestStatusReadsOnlyWhatChanged(t *testing.T) {
	f, m := memFixture(t)
	var cs []core.Change
	for i := 0; i < 50; i++ {
		cs = append(cs, put(fmt.Sprintf("d%d/f%d", i%5, i), fmt.Sprint(i)))
	}
	id := f.commit(objects.ZeroID, cs...)
	f.checkout(id, "/w")
	st, err := mustOpen(t, "/w", f.opts()).Status()
	if err != nil || st.Stats.Hashed != 0 || st.Stats.Stated != 56 {
		t.Fatalf("status of a fresh checkout: %+v, %v; want 56 stated (50 files, 5 directories, the metadata directory), 0 read", st.Stats, err)
	}
	writeMem(t, m, "/w/d1/f1", "edited")
	writeMem(t, m, "/w/d2/f7", "edited too")
	st, err = mustOpen(t, "/w", f.opts()).Status()
	if err != nil || st.Stats.Hashed != 2 || !eq(kinds(st), []string{"d1/f1:modified", "d2/f7:modified"}) {
		t.Fatalf("status after two edits: %+v %v, %v; want 2 read", st.Stats, kinds(st), err)
	}
}

// TestACommitKeepsTheStatDataOfWhatItReadUnchanged: files rewritten with
// the same bytes (a build tool, a copy, an editor's save) are read by the
// next commit's snapshot, which finds them unchanged; the commit keeps
// their new stat data, so the commit after it reads only what was edited
// since, without a status in between.
func TestACommitKeepsTheStatDataOfWhatItReadUnchanged(t *testing.T) {
	var cs []core.Change
	for i := 0; i < 20; i++ {
		cs = append(cs, put(fmt.Sprintf("d%d/f%d", i%4, i), fmt.Sprint(i)))
	}
	f, m, tick := checkedOutInOneTick(t, cs...)
	tick()
	for i := 0; i < 20; i++ {
		writeMem(t, m, fmt.Sprintf("/w/d%d/f%d", i%4, i), fmt.Sprint(i))
	}
	writeMem(t, m, "/w/d1/f1", "edited")
	tick()
	if st := snapshotStats(t, "/w", f.opts()); st.Hashed != 20 {
		t.Fatalf("the first snapshot read %d files, want all 20", st.Hashed)
	}
	f.commitDir("/w", f.opts())
	tick()
	writeMem(t, m, "/w/d2/f6", "edited too")
	tick()
	if st := snapshotStats(t, "/w", f.opts()); st.Hashed != 1 {
		t.Fatalf("the snapshot after a commit read %d files, want 1 (the one edited since)", st.Hashed)
	}
}

// snapshotStats takes a snapshot of the work tree dir and returns its
// counts.
func snapshotStats(t *testing.T, dir string, o worktree.Options) worktree.Stats {
	t.Helper()
	wt := mustOpen(t, dir, o)
	defer wt.Close()
	s, err := wt.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s.Stats
}
