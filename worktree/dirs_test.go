package worktree_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// refreshed runs a status of the tree at dir and writes what it found
// (the index's stat data and the directory records), as the CLI's status
// does, returning the status.
func refreshed(t *testing.T, dir string, o worktree.Options) *worktree.Status {
	t.Helper()
	wt := mustOpen(t, dir, o)
	st := mustStatus(t, wt)
	if err := wt.Refresh(st); err != nil {
		t.Fatal(err)
	}
	return st
}

// settle refreshes the tree at dir until a status reads only the root
// directory: records of directories changed within the filesystem's
// current clock tick are racy, and are trusted only once a later write of
// the records follows them.
func settle(t *testing.T, dir string, o worktree.Options) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if st := refreshed(t, dir, o); st.Stats.Listed == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("a status of an unchanged tree still reads more than its root after 100 refreshes")
}

// TestAWalkReadsOnlyTheDirectoriesItHasNoRecordOf: once its records are
// written, a status of an unchanged tree reads no directory but the root;
// a name created in a directory moves its times, so that directory is read
// again and the new file, or the new directory and what it holds, is seen.
func TestAWalkReadsOnlyTheDirectoriesItHasNoRecordOf(t *testing.T) {
	base := t.TempDir()
	f := newFixture(t, vfs.OS(), filepath.Join(base, "store"))
	var cs []core.Change
	for i := 0; i < 40; i++ {
		cs = append(cs, put(fmt.Sprintf("d%d/sub/f%02d", i%4, i), "x"))
	}
	id := f.commit(objects.ZeroID, cs...)
	dir := filepath.Join(base, "w")
	f.checkout(id, dir)
	if st := refreshed(t, dir, f.opts()); st.Stats.Listed != 9 {
		t.Fatalf("first status read %d directories, want all 9", st.Stats.Listed)
	}
	settle(t, dir, f.opts())

	if err := os.WriteFile(filepath.Join(dir, "d2/sub/new"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "d1/fresh/deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d1/fresh/deep/x"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "d3/sub/f03")); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, dir, f.opts())
	want := []string{"d1/fresh/deep/x:added", "d2/sub/new:added", "d3/sub/f03:deleted"}
	if !eq(kinds(st), want) {
		t.Fatalf("status after new names: %v, want %v", kinds(st), want)
	}
	// Read: the root, d1 and its two new directories, d2/sub and d3/sub.
	if st.Stats.Listed != 6 {
		t.Fatalf("status read %d directories, want 6", st.Stats.Listed)
	}

	o := f.opts()
	o.NoDirCache = true
	if st := statusOf(t, dir, o); st.Stats.Listed != 11 || !eq(kinds(st), want) {
		t.Fatalf("without records: read %d directories, want 11; %v", st.Stats.Listed, kinds(st))
	}
}

// TestARacyDirectoryRecordIsNotTrusted: on a filesystem whose clock does
// not move (a coarse tick), a file created after the records were written
// leaves its directory's times as recorded. The record is as new as the
// file that holds it, so it is racy and the directory is read: the file is
// seen.
func TestARacyDirectoryRecordIsNotTrusted(t *testing.T) {
	f, m, tick := checkedOutInOneTick(t, put("d/a", "1"), put("d/e/b", "2"))
	refreshed(t, "/w", f.opts())
	writeMem(t, m, "/w/d/new", "n")
	st := statusOf(t, "/w", f.opts())
	if !eq(kinds(st), []string{"d/new:added"}) {
		t.Fatalf("status after a same-tick create: %v, want [d/new:added]", kinds(st))
	}
	if st.Stats.Listed != 3 {
		t.Fatalf("status read %d directories, want all 3 (every record racy)", st.Stats.Listed)
	}

	// Records written at a later tick trust what is older than it: d/e
	// at once, d (changed at that tick) only once a write at the next
	// tick follows it.
	tick()
	m.Remove("/w/d/new")
	refreshed(t, "/w", f.opts())
	if st := refreshed(t, "/w", f.opts()); st.Stats.Listed != 2 {
		t.Fatalf("status at its records' tick read %d directories, want 2 (the root and d)", st.Stats.Listed)
	}
	tick()
	refreshed(t, "/w", f.opts())
	if st := statusOf(t, "/w", f.opts()); st.Stats.Listed != 1 {
		t.Fatalf("status past its records' tick read %d directories, want 1", st.Stats.Listed)
	}
	writeMem(t, m, "/w/d/e/new", "n")
	if st := statusOf(t, "/w", f.opts()); !eq(kinds(st), []string{"d/e/new:added"}) {
		t.Fatalf("status after a later create: %v, want [d/e/new:added]", kinds(st))
	}
}

// TestDirectoryRecordsAreDroppedWhenTheyCannotBeRead: a torn or foreign
// dirs file is no records at all, never an error.
func TestDirectoryRecordsAreDroppedWhenTheyCannotBeRead(t *testing.T) {
	f, m := memFixture(t)
	id := f.commit(objects.ZeroID, put("d/a", "1"), put("e/b", "2"))
	f.checkout(id, "/w")
	refreshed(t, "/w", f.opts())
	if st := statusOf(t, "/w", f.opts()); st.Stats.Listed != 1 {
		t.Fatalf("status read %d directories, want 1", st.Stats.Listed)
	}
	for _, junk := range []string{"", "SWTD", "not a dirs file at all, but long enough to be parsed as one........"} {
		writeMem(t, m, "/w/"+worktree.MetaDir+"/dirs", junk)
		writeMem(t, m, "/w/d/new", "n")
		st := statusOf(t, "/w", f.opts())
		if st.Stats.Listed != 3 || !eq(kinds(st), []string{"d/new:added"}) {
			t.Fatalf("dirs file %q: read %d directories (want 3), %v", junk, st.Stats.Listed, kinds(st))
		}
		m.Remove("/w/d/new")
	}
}

// TestADirectoryChangedJustBeforeTheWalkIsNotRecorded: a name created
// after a walk read its directory, in the same clock tick as the
// directory's last change, would leave the directory's times as recorded,
// so a walk records only directories that last changed well before it
// began. Here the filesystem's clock runs an hour ahead: nothing it
// changed is settled, so no record is made and every status reads every
// directory.
func TestADirectoryChangedJustBeforeTheWalkIsNotRecorded(t *testing.T) {
	f, m := memFixture(t)
	id := f.commit(objects.ZeroID, put("d/a", "1"), put("d/e/b", "2"))
	clock := time.Now().Add(time.Hour)
	m.SetClock(func() time.Time { clock = clock.Add(time.Microsecond); return clock })
	f.checkout(id, "/w")
	refreshed(t, "/w", f.opts())
	if st := refreshed(t, "/w", f.opts()); st.Stats.Listed != 3 {
		t.Fatalf("status read %d directories, want all 3: none may be recorded", st.Stats.Listed)
	}
}
