package worktree_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/worktree"
)

func updateTo(t testing.TB, f *fixture, onto objects.ID) *worktree.UpdateResult {
	t.Helper()
	wt := mustOpen(t, "/w", f.opts())
	res, err := wt.Update(f.snap(), onto, "theirs")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func conflictPaths(cs []worktree.ConflictRecord) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path)
	}
	return out
}

// TestUpdateMergesOursAndTheirs: local edits (a changed line, a deleted
// and an added file) and another agent's (another line of the same file, a
// changed and an added file) meet without a conflict; the tree's base moves
// and its status still shows exactly its own changes.
func TestUpdateMergesOursAndTheirs(t *testing.T) {
	f, m, a := checkedOut(t, put("x", "1\n2\n3\n4\n5\n"), put("y", "y"), put("z", "z"), put("d/keep", "k"))
	writeMem(t, m, "/w/x", "ONE\n2\n3\n4\n5\n")
	writeMem(t, m, "/w/n", "new")
	if err := m.Remove("/w/z"); err != nil {
		t.Fatal(err)
	}
	b := f.commit(a, put("x", "1\n2\n3\n4\nFIVE\n"), put("y", "Y"), put("t", "t"))
	res := updateTo(t, f, b)
	if len(res.Conflicts) != 0 || !eq(res.Merged, []string{"x"}) || res.MergeBase != a {
		t.Fatalf("update: conflicts %v, merged %v, merge base %s", conflictPaths(res.Conflicts), res.Merged, res.MergeBase)
	}
	want := map[string]string{"x": "ONE\n2\n3\n4\nFIVE\n", "y": "Y", "t": "t", "n": "new", "d/keep": "k"}
	if d := diffMaps(treeFiles(t, m, "/w"), want); d != "" {
		t.Fatalf("after update: %s", d)
	}
	wt := mustOpen(t, "/w", f.opts())
	st := mustStatus(t, wt)
	if wt.Base() != b || !eq(kinds(st), []string{"n:added", "x:modified", "z:deleted"}) {
		t.Fatalf("status after update: base %s, %v", wt.Base(), kinds(st))
	}
	c := f.commitDir("/w", f.opts())
	if d := diffMaps(files(t, f.snap(), c), want); d != "" {
		t.Fatalf("the commit after update: %s", d)
	}
}

func diffMaps(got, want map[string]string) string {
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, k+": got "+or(got[k])+", want "+or(v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+": got "+v+", want it absent")
		}
	}
	return strings.Join(out, "; ")
}

func or(s string) string {
	if s == "" {
		return absent
	}
	return s
}

// TestUpdateWritesDiff3MarkersAndRefusesACommitUntilResolved: both sides
// change one line; the file gets diff3-style markers with the base shown,
// the conflict is recorded with its three sides, a snapshot for a commit
// is refused, and so is a resolve while the markers are there.
func TestUpdateWritesDiff3MarkersAndRefusesACommitUntilResolved(t *testing.T) {
	f, m, a := checkedOut(t, put("x", "1\n2\n3\n"), put("y", "y\n"))
	writeMem(t, m, "/w/x", "1\nours\n3\n")
	b := f.commit(a, put("x", "1\ntheirs\n3\n"), put("y", "Y\n"))
	res := updateTo(t, f, b)
	if !eq(conflictPaths(res.Conflicts), []string{"x"}) {
		t.Fatalf("conflicts %v, want [x]", conflictPaths(res.Conflicts))
	}
	c := res.Conflicts[0]
	if c.Base.ID != objects.BlobID([]byte("1\n2\n3\n")) || c.Ours.ID != objects.BlobID([]byte("1\nours\n3\n")) || c.Theirs.ID != objects.BlobID([]byte("1\ntheirs\n3\n")) {
		t.Fatalf("conflict record %+v does not hold the three sides", c)
	}
	wantX := "1\n<<<<<<< work tree\nours\n||||||| base " + a.String()[:12] + "\n2\n=======\ntheirs\n>>>>>>> theirs\n3\n"
	if got := content(t, m, "/w/x"); got != wantX {
		t.Fatalf("x holds\n%s\nwant\n%s", got, wantX)
	}
	wt := mustOpen(t, "/w", f.opts())
	st := mustStatus(t, wt)
	if !eq(kinds(st), []string{"x:conflicted"}) || len(st.Conflicts) != 1 {
		t.Fatalf("status: %v, %d conflict records", kinds(st), len(st.Conflicts))
	}
	var ue *worktree.UnresolvedError
	if _, err := wt.Snapshot(); !errors.As(err, &ue) || !eq(ue.Paths, []string{"x"}) {
		t.Fatalf("snapshot of a conflicted tree: %v, want UnresolvedError [x]", err)
	}
	if _, err := wt.Switch(f.snap(), a); !errors.Is(err, worktree.ErrUnresolved) {
		t.Fatalf("switch of a conflicted tree: %v, want ErrUnresolved", err)
	}
	if _, err := wt.Update(f.snap(), b, ""); !errors.Is(err, worktree.ErrUnresolved) {
		t.Fatalf("update of a conflicted tree: %v, want ErrUnresolved", err)
	}
	if _, err := wt.Resolve([]string{"x"}, false, false); !errors.As(err, &ue) || !ue.Markers {
		t.Fatalf("resolve with markers left: %v, want UnresolvedError with Markers", err)
	}
	if _, err := wt.Resolve([]string{"y"}, false, false); !errors.Is(err, worktree.ErrNotConflicted) {
		t.Fatalf("resolve of a clean path: %v, want ErrNotConflicted", err)
	}
	writeMem(t, m, "/w/x", "1\nboth\n3\n")
	if got, err := wt.Resolve(nil, true, false); err != nil || !eq(got, []string{"x"}) {
		t.Fatalf("resolve --all: %v, %v", got, err)
	}
	id := f.commitDir("/w", f.opts())
	if d := diffMaps(files(t, f.snap(), id), map[string]string{"x": "1\nboth\n3\n", "y": "Y\n"}); d != "" {
		t.Fatalf("the commit after resolving: %s", d)
	}
}

// TestUpdateKeepsOursWhereItCannotMerge: binary content both sides changed,
// a file we changed that they deleted, one we deleted that they changed,
// an executable bit both set differently with a link: each keeps the work
// tree's side on disk and is recorded.
func TestUpdateKeepsOursWhereItCannotMerge(t *testing.T) {
	f, m, a := checkedOut(t, put("bin", "\x00a"), put("mod", "m\n"), put("gone", "g\n"), link("l", "x"), put("keep", "k\n"))
	writeMem(t, m, "/w/bin", "\x00ours")
	writeMem(t, m, "/w/mod", "ours\n")
	if err := m.Remove("/w/gone"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/w/l"); err != nil {
		t.Fatal(err)
	}
	writeMem(t, m, "/w/l", "now a file\n")
	b := f.commit(a, put("bin", "\x00theirs"), del("mod"), put("gone", "G\n"), link("l", "y"), put("keep", "K\n"))
	before := treeFiles(t, m, "/w")
	res := updateTo(t, f, b)
	if !eq(conflictPaths(res.Conflicts), []string{"bin", "gone", "l", "mod"}) {
		t.Fatalf("conflicts %v", conflictPaths(res.Conflicts))
	}
	before["keep"] = "K\n"
	if d := diffMaps(treeFiles(t, m, "/w"), before); d != "" {
		t.Fatalf("after update: %s", d)
	}
	st := statusOf(t, "/w", f.opts())
	if !eq(kinds(st), []string{"bin:conflicted", "gone:conflicted", "l:conflicted", "mod:conflicted"}) {
		t.Fatalf("status %v", kinds(st))
	}
}

// TestUpdateCarriesCommittedChanges: the tree committed a change that is
// not on the revision it updates onto; the merge base is their common
// ancestor, so the committed change stays in the tree (not reverted) and
// the next commit records it against the new base.
func TestUpdateCarriesCommittedChanges(t *testing.T) {
	f, m, a := checkedOut(t, put("x", "x\n"), put("y", "y\n"))
	writeMem(t, m, "/w/x", "mine\n")
	f.commitDir("/w", f.opts())
	main := f.commit(a, put("y", "theirs\n"))
	res := updateTo(t, f, main)
	if res.MergeBase != a || len(res.Conflicts) != 0 {
		t.Fatalf("merge base %s (want %s), conflicts %v", res.MergeBase, a, conflictPaths(res.Conflicts))
	}
	want := map[string]string{"x": "mine\n", "y": "theirs\n"}
	if d := diffMaps(treeFiles(t, m, "/w"), want); d != "" {
		t.Fatalf("after update: %s", d)
	}
	id := f.commitDir("/w", f.opts())
	cs, err := f.snap().Changeset(id)
	if err != nil || cs.Parents[0] != main {
		t.Fatalf("the next commit's parents %v, want [%s] (%v)", cs.Parents, main, err)
	}
	if d := diffMaps(files(t, f.snap(), id), want); d != "" {
		t.Fatalf("the next commit: %s", d)
	}
}

// TestUpdateOntoAnAncestorIsUpToDate: a tree that committed past REV and
// is updated onto REV (main before its branch landed) keeps its base and
// files, as git's merge of an ancestor is "already up to date": moving the
// base back made its committed work look uncommitted.
func TestUpdateOntoAnAncestorIsUpToDate(t *testing.T) {
	f, m, a := checkedOut(t, put("x", "x\n"), put("y", "y\n"))
	writeMem(t, m, "/w/x", "mine\n")
	mine := f.commitDir("/w", f.opts())
	res := updateTo(t, f, a)
	if res.Changeset != mine || res.Written != 0 || len(res.Conflicts) != 0 {
		t.Fatalf("update onto an ancestor: on %s (want %s), written %v, conflicts %v", res.Changeset, mine, res.Written, conflictPaths(res.Conflicts))
	}
	wt := mustOpen(t, "/w", f.opts())
	if st := mustStatus(t, wt); wt.Base() != mine || len(kinds(st)) != 0 {
		t.Fatalf("after the update: base %s (want %s), status %v", wt.Base(), mine, kinds(st))
	}
}

// TestAnUpdateRemembersTheCommitsItCarried: a tree that committed x (not
// landed) and is updated onto main carries x: the index keeps it through
// a refreshing status and a further update, and a commit clears it; an
// update onto a revision that holds x clears it too, and a tree with only
// uncommitted changes carries nothing.
func TestAnUpdateRemembersTheCommitsItCarried(t *testing.T) {
	carried := func(f *fixture) objects.ID {
		t.Helper()
		return mustOpen(t, "/w", f.opts()).Carried()
	}
	setup := func() (*fixture, *faultfs.MemFS, objects.ID, objects.ID) {
		f, m, a := checkedOut(t, put("x", "x\n"), put("y", "y\n"))
		writeMem(t, m, "/w/x", "mine\n")
		mine := f.commitDir("/w", f.opts())
		main := f.commit(a, put("y", "theirs\n"))
		updateTo(t, f, main)
		if got := carried(f); got != mine {
			t.Fatalf("carried %s after the update, want %s", got, mine)
		}
		return f, m, mine, main
	}
	t.Run("kept, then cleared by a commit", func(t *testing.T) {
		f, m, mine, main := setup()
		mustStatus(t, mustOpen(t, "/w", f.opts()))
		updateTo(t, f, f.commit(main, put("z", "z\n")))
		if got := carried(f); got != mine {
			t.Fatalf("carried %s after a status and an update onto a revision that lacks it, want %s", got, mine)
		}
		writeMem(t, m, "/w/z", "Z\n")
		f.commitDir("/w", f.opts())
		if got := carried(f); !got.IsZero() {
			t.Fatalf("carried %s after a commit, want none", got)
		}
	})
	t.Run("cleared by an update onto a revision that holds it", func(t *testing.T) {
		f, _, mine, main := setup()
		landed, err := f.store.Commit(core.CommitRequest{Parents: []objects.ID{main, mine}, Changes: []core.Change{put("x", "mine\n")}})
		if err != nil {
			t.Fatal(err)
		}
		updateTo(t, f, landed)
		if got := carried(f); !got.IsZero() {
			t.Fatalf("carried %s after an update onto a revision that holds it, want none", got)
		}
	})
	t.Run("nothing carried for uncommitted changes", func(t *testing.T) {
		f, m, a := checkedOut(t, put("x", "x\n"))
		writeMem(t, m, "/w/x", "mine\n")
		updateTo(t, f, f.commit(a, put("y", "y\n")))
		if got := carried(f); !got.IsZero() {
			t.Fatalf("carried %s with only uncommitted changes, want none", got)
		}
	})
}

// TestUpdateOntoAnUnrelatedChangeset: with no common ancestor the tree's
// base is the merge base.
func TestUpdateOntoAnUnrelatedChangeset(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("x", "x\n"), put("same", "s\n"))
	u := f.commit(objects.ZeroID, put("x", "x\n"), put("u", "u\n"), put("same", "s\n"))
	f.checkout(a, "/w")
	writeMem(t, m, "/w/x", "mine\n")
	res := updateTo(t, f, u)
	if res.MergeBase != a || len(res.Conflicts) != 0 {
		t.Fatalf("merge base %s (want the tree's base %s), conflicts %v", res.MergeBase, a, conflictPaths(res.Conflicts))
	}
	if d := diffMaps(treeFiles(t, m, "/w"), map[string]string{"x": "mine\n", "u": "u\n", "same": "s\n"}); d != "" {
		t.Fatalf("after update: %s", d)
	}
}

// TestUpdateWritesOnlyThePathsThatChange counts the renames into the tree:
// of 30 files, theirs changed 5, ours 5 others, one both (merged): 6
// files are written, plus the index.
func TestUpdateWritesOnlyThePathsThatChange(t *testing.T) {
	f, m := memFixture(t)
	var base, theirs []core.Change
	for i := 0; i < 30; i++ {
		base = append(base, put(string(rune('a'+i%26))+string(rune('0'+i/26)), "l1\nl2\nl3\n"))
	}
	a := f.commit(objects.ZeroID, base...)
	for i := 0; i < 6; i++ {
		theirs = append(theirs, put(base[i].Path, "l1\nl2\nTHEIRS\n"))
	}
	b := f.commit(a, theirs...)
	f.checkout(a, "/w")
	for i := 5; i < 11; i++ {
		writeMem(t, m, "/w/"+base[i].Path, "OURS\nl2\nl3\n")
	}
	c := faultfs.NewCounting(m)
	wt := mustOpen(t, "/w", worktree.Options{FS: c, StoreDir: "/s"})
	res, err := wt.Update(f.snap(), b, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 6 || len(res.Merged) != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("written %d (want 6), merged %v, conflicts %v", res.Written, res.Merged, conflictPaths(res.Conflicts))
	}
	if got := c.Count(faultfs.OpRename); got != 7 {
		t.Fatalf("%d renames, want 7 (6 files and the index)", got)
	}
	if got := content(t, m, "/w/"+base[5].Path); got != "OURS\nl2\nTHEIRS\n" {
		t.Fatalf("the file both changed holds %q", got)
	}
}

// TestConflictsSurviveLaterIndexWrites: a status refresh and the
// resolution of another path rewrite the index; a recorded conflict stays.
func TestConflictsSurviveLaterIndexWrites(t *testing.T) {
	f, m, a := checkedOut(t, put("x", "1\n"), put("y", "1\n"), put("s", "1\n"))
	writeMem(t, m, "/w/x", "ours\n")
	writeMem(t, m, "/w/y", "ours\n")
	writeMem(t, m, "/w/s", "same\n")
	updateTo(t, f, f.commit(a, put("x", "theirs\n"), put("y", "theirs\n"), put("s", "same\n")))
	wt := mustOpen(t, "/w", f.opts())
	st := mustStatus(t, wt)
	// s, changed alike on both sides, is re-hashed clean: the refresh
	// rewrites the index.
	if len(st.Refreshed) != 1 {
		t.Fatalf("status refreshed %d entries, want 1 (s)", len(st.Refreshed))
	}
	if err := wt.Refresh(st); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Resolve([]string{"y"}, false, true); err != nil {
		t.Fatal(err)
	}
	if got := conflictPaths(mustOpen(t, "/w", f.opts()).Index().Conflicts); !eq(got, []string{"x"}) {
		t.Fatalf("conflicts after a refresh and resolving y: %v, want [x]", got)
	}
	// A forced switch (checkout --force) drops them with the local changes.
	o := f.opts()
	o.Force = true
	if _, err := mustOpen(t, "/w", o).Switch(f.snap(), a); err != nil {
		t.Fatal(err)
	}
	if wt := mustOpen(t, "/w", f.opts()); len(wt.Index().Conflicts) != 0 || content(t, m, "/w/x") != "1\n" {
		t.Fatalf("after a forced switch: conflicts %v, x holds %q", conflictPaths(wt.Index().Conflicts), content(t, m, "/w/x"))
	}
}

// TestUpdateNeverWritesThroughAPlantedLink: the tree's directory d was
// replaced by a link to a directory outside; theirs changes d/f and adds
// d/new. Both are conflicts that keep ours, and nothing outside is written.
func TestUpdateNeverWritesThroughAPlantedLink(t *testing.T) {
	root := t.TempDir()
	f := newFixture(t, vfs.OS(), root+"/s")
	a := f.commit(objects.ZeroID, put("d/f", "f\n"), put("x", "x\n"))
	w := root + "/w"
	f.checkout(a, w)
	write(t, root+"/outside/f", "outside\n", 0o644)
	if err := os.RemoveAll(w + "/d"); err != nil {
		t.Fatal(err)
	}
	symlink(t, root+"/outside", w+"/d")
	b := f.commit(a, put("d/f", "theirs\n"), put("d/new", "n\n"), put("x", "X\n"))
	wt := mustOpen(t, w, f.opts())
	res, err := wt.Update(f.snap(), b, "")
	if err != nil {
		t.Fatal(err)
	}
	if !eq(conflictPaths(res.Conflicts), []string{"d/f", "d/new"}) {
		t.Fatalf("conflicts %v, want [d/f d/new]", conflictPaths(res.Conflicts))
	}
	if d := diffListings(listing(t, root+"/outside"), map[string]string{"f": "f - " + objects.BlobID([]byte("outside\n")).String()[:12]}); len(d) > 0 {
		t.Fatalf("outside the tree: %v", d)
	}
	if b, _ := os.ReadFile(w + "/x"); string(b) != "X\n" {
		t.Fatalf("x holds %q, want theirs", b)
	}
}

// TestUpdateReplacesFilesAndDirectoriesOrKeepsOursInTheWay: theirs turns
// a file into a directory and a directory into a file. Where the tree holds
// only what the base had, update takes theirs; where an untracked file
// lies in the directory theirs replaces, that path is a conflict keeping
// ours, and the untracked file stays.
func TestUpdateReplacesFilesAndDirectoriesOrKeepsOursInTheWay(t *testing.T) {
	f, m, a := checkedOut(t, put("f2d", "file\n"), put("d2f/a", "a\n"), put("busy/a", "a\n"))
	writeMem(t, m, "/w/busy/untracked", "mine\n")
	b1 := f.commit(a, del("f2d"), del("d2f/a"), del("busy/a"), put("f2d/x", "x\n"))
	b := f.commit(b1, put("d2f", "now a file\n"), put("busy", "file\n"))
	res := updateTo(t, f, b)
	if !eq(conflictPaths(res.Conflicts), []string{"busy"}) {
		t.Fatalf("conflicts %v, want [busy]", conflictPaths(res.Conflicts))
	}
	want := map[string]string{"f2d/x": "x\n", "d2f": "now a file\n", "busy/untracked": "mine\n"}
	if d := diffMaps(treeFiles(t, m, "/w"), want); d != "" {
		t.Fatalf("after update: %s", d)
	}
	if r := res.Conflicts[0]; r.Ours.Mode != objects.ModeDir || r.Theirs.Mode != objects.ModeFile {
		t.Fatalf("conflict record %+v: want ours a directory, theirs a file", r)
	}
}
