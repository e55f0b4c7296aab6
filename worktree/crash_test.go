package worktree_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/worktree"
)

const absent = crashsweep.Absent

// content returns what p holds for the crash oracle (crashsweep.FileContent).
func content(t testing.TB, fsys vfs.FS, p string) string {
	t.Helper()
	return crashsweep.FileContent(fsys, p)
}

// treeFiles maps every file and link below dir (the metadata directory
// left out) to what content returns (crashsweep.TreeFiles).
func treeFiles(t testing.TB, fsys vfs.FS, dir string) map[string]string {
	t.Helper()
	out, err := crashsweep.TreeFiles(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// files maps every file path of changeset id to what content returns.
func files(t testing.TB, sn *core.Snapshot, id objects.ID) map[string]string {
	t.Helper()
	flat, err := sn.Flatten(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, e := range flat {
		b, err := sn.Blob(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Mode == objects.ModeSymlink {
			out[p] = "->" + string(b)
		} else {
			out[p] = string(b)
		}
	}
	return out
}

// statusIsTruthful opens the work tree /w on fsys and checks that every
// path its status calls clean holds exactly its index entry's object
// (crashsweep.StatusLie, the oracle crashsim's work-tree part uses).
//
// A power loss without Sync may tear the index itself; it is then refused as
// corrupt (nothing is called clean), which tornIndexOK allows.
func statusIsTruthful(t testing.TB, fsys vfs.FS, where string, tornIndexOK bool) {
	t.Helper()
	if msg := crashsweep.StatusLie(fsys, tornIndexOK); msg != "" {
		t.Fatalf("%s: %s", where, msg)
	}
}

// countCalls runs op uncrashed on a process-crash copy of base, counting
// its filesystem calls; it returns the copy and the count.
func countCalls(t testing.TB, base *faultfs.MemFS, op func(vfs.FS) error) (*faultfs.MemFS, int64) {
	t.Helper()
	done := base.CrashClone(faultfs.ProcessCrash, 0)
	c := faultfs.NewCounting(done)
	if err := op(c); err != nil {
		t.Fatal(err)
	}
	return done, c.Total()
}

// crashedAt runs op on a process-crash copy of base crashed at its call n;
// it returns the copy and op's error.
func crashedAt(base *faultfs.MemFS, n int64, op func(vfs.FS) error) (*faultfs.MemFS, error) {
	m := base.CrashClone(faultfs.ProcessCrash, 0)
	return m, op(faultfs.NewCrashing(m, n))
}

// treeOp is do on the work tree /w, opened with o on the filesystem the op
// is given.
func treeOp(o worktree.Options, do func(*worktree.Tree) error) func(vfs.FS) error {
	return func(fsys vfs.FS) error {
		o.FS = fsys
		return onTree("/w", o, do)
	}
}

// crashSweep runs op (a checkout or switch of /w on the given FS) against a
// process-crash copy of base, crashing it at every filesystem call in
// turn, and checks every crashed state: in the process-crash state each
// file holds its old or its new content (never a part, never anything
// else), and under every crash model a status calls clean only files that
// hold their index's object.
func crashSweep(t *testing.T, base *faultfs.MemFS, old, new map[string]string, sync bool, op func(fsys vfs.FS) error) {
	_, total := countCalls(t, base, op)
	for n := int64(1); n <= total; n++ {
		m, err := crashedAt(base, n, op)
		// The last call releases the work tree's lock, after the work is
		// done; its failure is not the operation's.
		if !errors.Is(err, vfs.ErrCrashed) && !(err == nil && n == total) {
			t.Fatalf("crash at call %d of %d: %v, want ErrCrashed", n, total, err)
		}
		pc := m.CrashClone(faultfs.ProcessCrash, 0)
		if msg := crashsweep.NeitherOldNorNew(pc, old, new); msg != "" {
			t.Fatalf("crash at call %d of %d: %s", n, total, msg)
		}
		statusIsTruthful(t, pc, fmt.Sprintf("crash at call %d, process", n), false)
		statusIsTruthful(t, m.CrashClone(faultfs.Strict, 0), fmt.Sprintf("crash at call %d, strict", n), !sync)
		for seed := int64(1); seed <= 3; seed++ {
			statusIsTruthful(t, m.CrashClone(faultfs.Torn, seed), fmt.Sprintf("crash at call %d, torn seed %d", n, seed), !sync)
		}
	}
	t.Logf("%d crash points", total)
}

// crashRevisions commits two revisions differing in every way a switch
// handles: changed, added and deleted files, an executable bit, links
// changed and turned into files, a file turned into a directory and back.
func crashRevisions(t *testing.T) (*fixture, *faultfs.MemFS, objects.ID, objects.ID) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("a", "alpha"), put("dir/b", "beta"), exe("dir/run", "#!/bin/sh"),
		link("l", "a"), put("f2d", "file"), put("gone", "bye"), put("big", string(make([]byte, 3000))))
	b1 := f.commit(a, put("a", "ALPHA"), put("dir/new", "new"), del("gone"), link("l", "dir/b"),
		del("f2d"), put("f2d/x", "in a dir"), put("big", "short now"), del("dir/b"))
	b := f.commit(b1, put("dir2/c", "gamma"))
	return f, m, a, b
}

// TestCheckoutAndSwitchSurviveACrashAtEveryCall sweeps a first checkout
// and a switch, with and without Sync.
func TestCheckoutAndSwitchSurviveACrashAtEveryCall(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			f, m, a, b := crashRevisions(t)
			sn := f.snap()
			old, new := files(t, sn, a), files(t, sn, b)
			if err := m.SyncDir("/"); err != nil {
				t.Fatal(err)
			}
			crashSweep(t, m, nil, old, sync, func(fsys vfs.FS) error {
				_, err := worktree.Checkout(sn, a, "/w", worktree.Options{FS: fsys, StoreDir: "/s", Sync: sync})
				return err
			})
			f.checkoutWith(a, "/w", f.syncOpts())
			crashSweep(t, m, old, new, sync, treeOp(worktree.Options{StoreDir: "/s", Sync: sync}, func(wt *worktree.Tree) error {
				_, err := wt.Switch(sn, b)
				return err
			}))
		})
	}
}

// TestStatusTrustsNoStatDataAfterAPowerLoss: a switch without Sync, after
// which the system happened to write back the index and every directory
// but not the files' data (writeback has no order), then a torn power
// loss: files keep their names and stat data with torn content. Status
// must re-hash every file (the boot id changed) and call none of them
// clean.
func TestStatusTrustsNoStatDataAfterAPowerLoss(t *testing.T) {
	f, m, a, b := crashRevisions(t)
	f.checkoutWith(a, "/w", f.syncOpts())
	wt := mustOpen(t, "/w", f.opts())
	if _, err := wt.Switch(f.snap(), b); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/w", "/w/dir", "/w/dir2", "/w/f2d", "/w/" + worktree.MetaDir, "/w/" + worktree.MetaDir + "/tmp"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := m.OpenFile("/w/"+worktree.MetaDir+"/index", 0o2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ix.Sync()
	ix.Close()
	for seed := int64(1); seed <= 40; seed++ {
		statusIsTruthful(t, m.CrashClone(faultfs.Torn, seed), fmt.Sprintf("torn seed %d", seed), false)
	}
}

// checkedOutInOneTick is checkedOut on a filesystem whose clock stands
// still, as within one tick of a coarse timestamp clock, until the test
// calls tick: every time the checkout records is as new as its index, so
// racy. tick moves the clock on by a second.
func checkedOutInOneTick(t testing.TB, changes ...core.Change) (f *fixture, m *faultfs.MemFS, tick func()) {
	t.Helper()
	f, m = memFixture(t)
	id := f.commit(objects.ZeroID, changes...)
	now := time.Unix(1000, 0)
	m.SetClock(func() time.Time { return now })
	f.checkout(id, "/w")
	return f, m, func() { now = now.Add(time.Second) }
}

// TestRacyEntriesAreRehashed: on a filesystem whose clock did not move
// between the checkout and an edit (a coarse timestamp tick), an edit that
// keeps the size leaves the stat data as the index has it; the entry is
// racy (its mtime is not older than the index) and status reads it.
func TestRacyEntriesAreRehashed(t *testing.T) {
	f, m, tick := checkedOutInOneTick(t, put("a", "1111"), put("b", "2222"))
	g, err := m.OpenFile("/w/a", 0o1, 0) // O_WRONLY, in place
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("9999"))
	g.Close()
	if got := kinds(statusOf(t, "/w", f.opts())); !eq(got, []string{"a:modified"}) {
		t.Fatalf("status after a same-tick edit: %v, want [a:modified]", got)
	}
	tick()
	wt := mustOpen(t, "/w", f.opts())
	st, _ := wt.Status()
	if err := wt.Refresh(st); err != nil {
		t.Fatal(err)
	}
	st = statusOf(t, "/w", f.opts())
	if st.Stats.Hashed != 1 || !eq(kinds(st), []string{"a:modified"}) {
		t.Fatalf("after a refresh at a later tick: hashed %d (want 1: the modified file), %v", st.Stats.Hashed, kinds(st))
	}
}

// updateRevisions checks out a, edits the tree (a line both sides change,
// a line only ours changes, a deleted and an added file) and commits b on
// a with another agent's changes, for the update crash sweeps.
func updateRevisions(t *testing.T) (*fixture, *faultfs.MemFS, objects.ID) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("x", "1\n2\n3\n"), put("y", "1\n2\n3\n4\n5\n"), put("z", "z\n"),
		put("d/gone", "g\n"), put("bin", "\x00b"), put("keep", "k\n"))
	f.checkoutWith(a, "/w", f.syncOpts())
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	writeMem(t, m, "/w/x", "1\nours\n3\n")
	writeMem(t, m, "/w/y", "ONE\n2\n3\n4\n5\n")
	writeMem(t, m, "/w/n", "new\n")
	writeMem(t, m, "/w/bin", "\x00ours")
	if err := m.Remove("/w/z"); err != nil {
		t.Fatal(err)
	}
	b := f.commit(a, put("x", "1\ntheirs\n3\n"), put("y", "1\n2\n3\n4\nFIVE\n"), put("keep", "K\n"),
		del("d/gone"), put("d2/new", "n2\n"), put("bin", "\x00B"), link("l", "keep"))
	return f, m, b
}

// TestUpdateSurvivesACrashAtEveryCall crashes an update with a conflict,
// a line merge, writes, removals and directories made and pruned, at every
// filesystem call, with and without Sync: each file holds what it held
// before or what the update writes, and no status calls a file clean that
// is not. A conflict the update recorded survives a process crash once it
// returned, and a power loss too with Sync; resolving another path,
// crashed at every call, never loses it.
func TestUpdateSurvivesACrashAtEveryCall(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			f, m, b := updateRevisions(t)
			sn := f.snap()
			run := treeOp(worktree.Options{StoreDir: "/s", Sync: sync}, func(wt *worktree.Tree) error {
				_, err := wt.Update(sn, b, "")
				return err
			})
			done, _ := countCalls(t, m, run)
			crashSweep(t, m, treeFiles(t, m, "/w"), treeFiles(t, done, "/w"), sync, run)
			want := []string{"bin", "x"}
			clones := map[string]vfs.FS{"process": done.CrashClone(faultfs.ProcessCrash, 0)}
			if sync {
				clones["strict"] = done.CrashClone(faultfs.Strict, 0)
			}
			for model, c := range clones {
				wt, err := worktree.Open("/w", worktree.Options{FS: c, StoreDir: "/s"})
				if err != nil {
					t.Fatalf("%s crash after update returned: %v", model, err)
				}
				if got := conflictPaths(wt.Index().Conflicts); !eq(got, want) {
					t.Fatalf("%s crash after update returned: conflicts %v, want %v", model, got, want)
				}
				wt.Close()
			}
			if sync {
				resolveSweep(t, done, want)
			}
		})
	}
}

// resolveSweep crashes the resolution of the first of the conflicted
// paths at every call: the index records every conflict or all but that
// one, never fewer, under a process crash and a strict power loss.
func resolveSweep(t *testing.T, m *faultfs.MemFS, conflicts []string) {
	run := treeOp(worktree.Options{StoreDir: "/s", Sync: true}, func(wt *worktree.Tree) error {
		_, err := wt.Resolve(conflicts[:1], false, true)
		return err
	})
	_, total := countCalls(t, m, run)
	for n := int64(1); n <= total; n++ {
		mm, _ := crashedAt(m, n, run)
		for _, model := range []faultfs.Model{faultfs.ProcessCrash, faultfs.Strict} {
			wt, err := worktree.Open("/w", worktree.Options{FS: mm.CrashClone(model, 0), StoreDir: "/s"})
			if err != nil {
				t.Fatalf("resolve crashed at call %d, %v: %v", n, model, err)
			}
			got := conflictPaths(wt.Index().Conflicts)
			wt.Close()
			if !eq(got, conflicts) && !eq(got, conflicts[1:]) {
				t.Fatalf("resolve crashed at call %d, %v: conflicts %v, want %v or %v", n, model, got, conflicts, conflicts[1:])
			}
		}
	}
	t.Logf("resolve: %d crash points", total)
}

// TestAnUpdateRunAgainAfterACrashFinishesIt: a clean update (a line merge,
// files taken from theirs, removals, a directory made and one pruned) is
// crashed at every call; running it again on what the process crash left
// gives the same files, the same base and a clean status but for the
// tree's own changes, as the uncrashed update.
func TestAnUpdateRunAgainAfterACrashFinishesIt(t *testing.T) {
	f, m, a := checkedOut(t, put("y", "1\n2\n3\n4\n5\n"), put("d/gone", "g\n"), put("keep", "k\n"), put("z", "z\n"))
	writeMem(t, m, "/w/y", "ONE\n2\n3\n4\n5\n")
	writeMem(t, m, "/w/n", "new\n")
	b := f.commit(a, put("y", "1\n2\n3\n4\nFIVE\n"), put("keep", "K\n"), del("d/gone"), put("d2/new", "n2\n"), del("z"))
	sn := f.snap()
	run := treeOp(worktree.Options{StoreDir: "/s"}, func(wt *worktree.Tree) error {
		_, err := wt.Update(sn, b, "")
		return err
	})
	status := func(fsys vfs.FS) (out []string) {
		err := treeOp(f.opts(), func(wt *worktree.Tree) error {
			st, err := wt.Status()
			if err == nil {
				out = append(kinds(st), wt.Base().String())
			}
			return err
		})(fsys)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	done, total := countCalls(t, m, run)
	want, wantStatus := treeFiles(t, done, "/w"), status(done)
	for n := int64(1); n < total; n++ {
		mm, _ := crashedAt(m, n, run)
		again := mm.CrashClone(faultfs.ProcessCrash, 0)
		if err := run(again); err != nil {
			t.Fatalf("crash at call %d, then update again: %v", n, err)
		}
		if d := diffMaps(treeFiles(t, again, "/w"), want); d != "" {
			t.Fatalf("crash at call %d, then update again: %s", n, d)
		}
		if got := status(again); !eq(got, wantStatus) {
			t.Fatalf("crash at call %d, then update again: status %v, want %v", n, got, wantStatus)
		}
	}
	t.Logf("%d crash points", total)
}

// TestAnUpdateWithConflictsRunAgainAfterACrashFinishesIt: an update that
// writes conflict markers is crashed at every call. Until it is run again,
// no commit may take a marker file for the tree's own edit (the snapshot
// is refused, or the conflict is recorded); run again, it gives the files
// and the conflicts of the uncrashed update, markers not nested.
func TestAnUpdateWithConflictsRunAgainAfterACrashFinishesIt(t *testing.T) {
	f, m, b := updateRevisions(t)
	sn := f.snap()
	run := treeOp(worktree.Options{StoreDir: "/s"}, func(wt *worktree.Tree) error {
		_, err := wt.Update(sn, b, "")
		return err
	})
	done, total := countCalls(t, m, run)
	want := treeFiles(t, done, "/w")
	for n := int64(1); n < total; n++ {
		mm, _ := crashedAt(m, n, run)
		crashed := mm.CrashClone(faultfs.ProcessCrash, 0)
		finished := false
		err := treeOp(f.opts(), func(wt *worktree.Tree) error {
			if len(wt.Index().Conflicts) > 0 {
				finished = true // its index is written: a commit is refused for them
				return nil
			}
			if !strings.Contains(content(t, crashed, "/w/x"), "<<<<<<<") {
				return nil
			}
			if _, err := wt.Snapshot(); !errors.Is(err, worktree.ErrUnresolved) {
				return fmt.Errorf("a snapshot took x, holding markers no conflict records, for an edit: %v", err)
			}
			st, err := wt.Status()
			if err != nil || !slices.Contains(st.Interrupted, "x") {
				return fmt.Errorf("status of x, holding markers no conflict records: interrupted %v, %v", st.Interrupted, err)
			}
			return nil
		})(crashed)
		if err != nil {
			t.Fatalf("crash at call %d of %d: %v", n, total, err)
		}
		if !finished {
			if err := run(crashed); err != nil {
				t.Fatalf("crash at call %d, then update again: %v", n, err)
			}
		}
		if d := diffMaps(treeFiles(t, crashed, "/w"), want); d != "" {
			t.Fatalf("crash at call %d, then update again: %s", n, d)
		}
	}
	t.Logf("%d crash points", total)
}

// TestAnInterruptedFirstCheckoutIsFinishedByCheckingOutAgain: after a
// process crash at any call of a first checkout, the same checkout without
// Force leaves the directory a work tree of the revision, file for file.
func TestAnInterruptedFirstCheckoutIsFinishedByCheckingOutAgain(t *testing.T) {
	f, m, a, _ := crashRevisions(t)
	sn := f.snap()
	want := files(t, sn, a)
	op := func(fsys vfs.FS) error {
		_, err := worktree.Checkout(sn, a, "/w", worktree.Options{FS: fsys, StoreDir: "/s"})
		return err
	}
	_, total := countCalls(t, m, op)
	for n := int64(1); n < total; n++ {
		c, _ := crashedAt(m, n, op)
		pc := c.CrashClone(faultfs.ProcessCrash, 0)
		if err := op(pc); err != nil {
			t.Fatalf("crash at call %d of %d: checking out again: %v", n, total, err)
		}
		if msg := crashsweep.NeitherOldNorNew(pc, want, want); msg != "" {
			t.Fatalf("crash at call %d of %d, then a checkout: %s", n, total, msg)
		}
		statusIsTruthful(t, pc, fmt.Sprintf("crash at call %d, then a checkout", n), false)
	}
}
