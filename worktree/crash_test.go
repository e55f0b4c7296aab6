package worktree_test

import (
	"errors"
	"fmt"
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

// statusIsTruthful opens the work tree on fsys and checks that every path
// its status calls clean holds exactly its index entry's object.
//
// A power loss without Sync may tear the index itself; it is then refused as
// corrupt (nothing is called clean), which tornIndexOK allows.
func statusIsTruthful(t testing.TB, fsys vfs.FS, where string, tornIndexOK bool) {
	t.Helper()
	wt, err := worktree.Open("/w", worktree.Options{FS: fsys, StoreDir: "/s"})
	if errors.Is(err, worktree.ErrNotWorkTree) || tornIndexOK && errors.Is(err, worktree.ErrIndexCorrupt) {
		return // no index: nothing is called clean
	}
	if err != nil {
		t.Fatalf("%s: open: %v", where, err)
	}
	defer wt.Close()
	st, err := wt.Status()
	if err != nil {
		t.Fatalf("%s: status: %v", where, err)
	}
	changed := map[string]bool{}
	for _, c := range st.Changes {
		changed[c.Path] = true
	}
	for _, e := range wt.Index().Entries {
		if changed[e.Path] {
			continue
		}
		got := content(t, fsys, "/w/"+e.Path)
		data := got
		if e.Mode == objects.ModeSymlink {
			data = got[min(2, len(got)):]
		}
		if objects.BlobID([]byte(data)) != e.ID {
			t.Fatalf("%s: status calls %s clean, but it holds %q, not the index's object", where, e.Path, got)
		}
	}
}

// crashSweep runs op (a checkout or switch of /w on the given FS) against a
// process-crash copy of base, crashing it at every filesystem call in
// turn, and checks every crashed state: in the process-crash state each
// file holds its old or its new content (never a part, never anything
// else), and under every crash model a status calls clean only files that
// hold their index's object.
func crashSweep(t *testing.T, base *faultfs.MemFS, old, new map[string]string, sync bool, op func(fsys vfs.FS) error) {
	c := faultfs.NewCounting(base.CrashClone(faultfs.ProcessCrash, 0))
	if err := op(c); err != nil {
		t.Fatal(err)
	}
	total := c.Total()
	for n := int64(1); n <= total; n++ {
		m := base.CrashClone(faultfs.ProcessCrash, 0)
		err := op(faultfs.NewCrashing(m, n))
		// The last call releases the work tree's lock, after the work is
		// done; its failure is not the operation's.
		if !errors.Is(err, vfs.ErrCrashed) && !(err == nil && n == total) {
			t.Fatalf("crash at call %d of %d: %v, want ErrCrashed", n, total, err)
		}
		pc := m.CrashClone(faultfs.ProcessCrash, 0)
		for p := range union(old, new) {
			got := content(t, pc, "/w/"+p)
			if got != or(old[p]) && got != or(new[p]) {
				t.Fatalf("crash at call %d of %d: %s holds %q, neither the old %q nor the new %q", n, total, p, got, or(old[p]), or(new[p]))
			}
		}
		statusIsTruthful(t, pc, fmt.Sprintf("crash at call %d, process", n), false)
		statusIsTruthful(t, m.CrashClone(faultfs.Strict, 0), fmt.Sprintf("crash at call %d, strict", n), !sync)
		for seed := int64(1); seed <= 3; seed++ {
			statusIsTruthful(t, m.CrashClone(faultfs.Torn, seed), fmt.Sprintf("crash at call %d, torn seed %d", n, seed), !sync)
		}
	}
	t.Logf("%d crash points", total)
}

func or(s string) string {
	if s == "" {
		return absent
	}
	return s
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
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
			if _, err := worktree.Checkout(sn, a, "/w", worktree.Options{FS: m, StoreDir: "/s", Sync: true}); err != nil {
				t.Fatal(err)
			}
			crashSweep(t, m, old, new, sync, func(fsys vfs.FS) error {
				wt, err := worktree.Open("/w", worktree.Options{FS: fsys, StoreDir: "/s", Sync: sync})
				if err != nil {
					return err
				}
				defer wt.Close()
				_, err = wt.Switch(sn, b)
				return err
			})
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
	sn := f.snap()
	if _, err := worktree.Checkout(sn, a, "/w", worktree.Options{FS: m, StoreDir: "/s", Sync: true}); err != nil {
		t.Fatal(err)
	}
	wt := mustOpen(t, "/w", worktree.Options{FS: m, StoreDir: "/s"})
	if _, err := wt.Switch(sn, b); err != nil {
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

// TestRacyEntriesAreRehashed: on a filesystem whose clock did not move
// between the checkout and an edit (a coarse timestamp tick), an edit that
// keeps the size leaves the stat data as the index has it; the entry is
// racy (its mtime is not older than the index) and status reads it.
func TestRacyEntriesAreRehashed(t *testing.T) {
	f, m := memFixture(t)
	id := f.commit(objects.ZeroID, put("a", "1111"), put("b", "2222"))
	tick := time.Unix(1000, 0)
	m.SetClock(func() time.Time { return tick })
	if _, err := worktree.Checkout(f.snap(), id, "/w", f.opts()); err != nil {
		t.Fatal(err)
	}
	g, err := m.OpenFile("/w/a", 0o1, 0) // O_WRONLY, in place
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("9999"))
	g.Close()
	st, err := mustOpen(t, "/w", f.opts()).Status()
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(st); !eq(got, []string{"a:modified"}) {
		t.Fatalf("status after a same-tick edit: %v, want [a:modified]", got)
	}
	tick = tick.Add(time.Second)
	wt := mustOpen(t, "/w", f.opts())
	st, _ = wt.Status()
	if err := wt.Refresh(st); err != nil {
		t.Fatal(err)
	}
	st, _ = mustOpen(t, "/w", f.opts()).Status()
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
	if _, err := worktree.Checkout(f.snap(), a, "/w", worktree.Options{FS: m, StoreDir: "/s", Sync: true}); err != nil {
		t.Fatal(err)
	}
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
			o := worktree.Options{StoreDir: "/s", Sync: sync}
			run := func(fsys vfs.FS) error {
				o.FS = fsys
				wt, err := worktree.Open("/w", o)
				if err != nil {
					return err
				}
				defer wt.Close()
				_, err = wt.Update(sn, b, "")
				return err
			}
			done := m.CrashClone(faultfs.ProcessCrash, 0)
			if err := run(done); err != nil {
				t.Fatal(err)
			}
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
	o := worktree.Options{StoreDir: "/s", Sync: true}
	run := func(fsys vfs.FS) error {
		o.FS = fsys
		wt, err := worktree.Open("/w", o)
		if err != nil {
			return err
		}
		defer wt.Close()
		_, err = wt.Resolve(conflicts[:1], false, true)
		return err
	}
	c := faultfs.NewCounting(m.CrashClone(faultfs.ProcessCrash, 0))
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	for n := int64(1); n <= c.Total(); n++ {
		mm := m.CrashClone(faultfs.ProcessCrash, 0)
		run(faultfs.NewCrashing(mm, n))
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
	t.Logf("resolve: %d crash points", c.Total())
}

// TestAnUpdateRunAgainAfterACrashFinishesIt: a clean update (a line merge,
// files taken from theirs, removals, a directory made and one pruned) is
// crashed at every call; running it again on what the process crash left
// gives the same files, the same base and a clean status but for the
// tree's own changes, as the uncrashed update.
func TestAnUpdateRunAgainAfterACrashFinishesIt(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("y", "1\n2\n3\n4\n5\n"), put("d/gone", "g\n"), put("keep", "k\n"), put("z", "z\n"))
	if _, err := worktree.Checkout(f.snap(), a, "/w", f.opts()); err != nil {
		t.Fatal(err)
	}
	writeMem(t, m, "/w/y", "ONE\n2\n3\n4\n5\n")
	writeMem(t, m, "/w/n", "new\n")
	b := f.commit(a, put("y", "1\n2\n3\n4\nFIVE\n"), put("keep", "K\n"), del("d/gone"), put("d2/new", "n2\n"), del("z"))
	sn := f.snap()
	run := func(fsys vfs.FS) error {
		wt, err := worktree.Open("/w", worktree.Options{FS: fsys, StoreDir: "/s"})
		if err != nil {
			return err
		}
		defer wt.Close()
		_, err = wt.Update(sn, b, "")
		return err
	}
	status := func(fsys vfs.FS) []string {
		wt, err := worktree.Open("/w", worktree.Options{FS: fsys, StoreDir: "/s"})
		if err != nil {
			t.Fatal(err)
		}
		defer wt.Close()
		st, err := wt.Status()
		if err != nil {
			t.Fatal(err)
		}
		return append(kinds(st), wt.Base().String())
	}
	done := m.CrashClone(faultfs.ProcessCrash, 0)
	c := faultfs.NewCounting(done)
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	want, wantStatus := treeFiles(t, done, "/w"), status(done)
	for n := int64(1); n < c.Total(); n++ {
		mm := m.CrashClone(faultfs.ProcessCrash, 0)
		run(faultfs.NewCrashing(mm, n))
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
	t.Logf("%d crash points", c.Total())
}
