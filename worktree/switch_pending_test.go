package worktree_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/worktree"
)

// TestAnInterruptedSwitchIsNamedRefusedAndFinishedByAnyCheckout: after a
// process crash at any call of a switch from a to b, status names the
// switch whenever a path already left a, a commit's snapshot and an update
// refuse the tree, and a checkout of a, like one of b, leaves exactly that
// revision's files with a clean status. Without the record a checkout of
// a found nothing to do and left b's paths for the next commit to record.
func TestAnInterruptedSwitchIsNamedRefusedAndFinishedByAnyCheckout(t *testing.T) {
	f0, m0, a0, b0 := crashRevisions(t)
	// Both ways: b turns a file into a directory, a the directory back.
	for _, way := range [][2]objects.ID{{a0, b0}, {b0, a0}} {
		t.Run(fmt.Sprintf("from %s", map[objects.ID]string{a0: "a", b0: "b"}[way[0]]), func(t *testing.T) {
			interruptedSwitch(t, f0, m0.CrashClone(faultfs.ProcessCrash, 0), way[0], way[1])
		})
	}
}

// interruptedSwitch is TestAnInterruptedSwitchIsNamedRefusedAndFinishedByAnyCheckout
// for a switch from a to b.
func interruptedSwitch(t *testing.T, f *fixture, m *faultfs.MemFS, a, b objects.ID) {
	sn := f.snap()
	f.checkoutWith(a, "/w", worktree.Options{FS: m, StoreDir: "/s"})
	o := worktree.Options{StoreDir: "/s"}
	op := treeOp(o, func(wt *worktree.Tree) error {
		_, err := wt.Switch(sn, b)
		return err
	})
	_, total := countCalls(t, m, op)
	want := map[objects.ID]map[string]string{a: files(t, sn, a), b: files(t, sn, b)}
	named := 0
	for n := int64(1); n < total; n++ {
		c, _ := crashedAt(m, n, op)
		for _, to := range []objects.ID{b, a} {
			pc := c.CrashClone(faultfs.ProcessCrash, 0)
			where := fmt.Sprintf("crash at call %d of %d, then a checkout of %s", n, total, map[objects.ID]string{a: "a", b: "b"}[to])
			err := treeOp(o, func(wt *worktree.Tree) error {
				st, err := wt.Status()
				if err != nil {
					return err
				}
				mixed := st.Base == a && crashsweep.NeitherOldNorNew(pc, want[a], want[a]) != ""
				if mixed && st.Switching != b {
					return fmt.Errorf("status names no switch (%v) over files that left a", st.Switching)
				}
				if st.Switching.IsZero() {
					return nil
				}
				named++
				var se *worktree.SwitchError
				if _, err := wt.Snapshot(); !errors.As(err, &se) || se.Onto != b {
					return fmt.Errorf("snapshot: %v, want a *SwitchError to b", err)
				}
				if _, err := wt.Update(sn, a, ""); !errors.As(err, &se) {
					return fmt.Errorf("update: %v, want a *SwitchError", err)
				}
				return nil
			})(pc)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if err := treeOp(o, func(wt *worktree.Tree) error { _, err := wt.Switch(sn, to); return err })(pc); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if msg := crashsweep.NeitherOldNorNew(pc, want[to], want[to]); msg != "" {
				t.Fatalf("%s: %s", where, msg)
			}
			checkCleanAt(t, pc, to, where, false)
		}
	}
	if named == 0 {
		t.Fatal("no crash point left a pending switch")
	}
	t.Logf("%d crash points, %d with the switch pending", total-1, named/2)
}

// checkCleanAt checks that the work tree /w on fsys is at base with a
// clean status and nothing stopped; untrackedOK lets untracked files be.
func checkCleanAt(t *testing.T, fsys vfs.FS, base objects.ID, where string, untrackedOK bool) {
	t.Helper()
	err := treeOp(worktree.Options{StoreDir: "/s"}, func(wt *worktree.Tree) error {
		st, err := wt.Status()
		if err != nil {
			return err
		}
		for _, c := range st.Changes {
			if c.Kind != worktree.Added || !untrackedOK {
				return fmt.Errorf("status: %v", kinds(st))
			}
		}
		if st.Base != base || !st.Switching.IsZero() || len(st.Interrupted) > 0 {
			return fmt.Errorf("status: base %v (want %v), switching %v, interrupted %v", st.Base, base, st.Switching, st.Interrupted)
		}
		return nil
	})(fsys)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// TestANestedWorkTreeOverTrackedPathsKeepsThemTracked: a directory that
// holds a metadata directory of its own is another work tree: listed as
// skipped, and nothing untracked in it is this tree's. Paths this tree
// tracks below it stay tracked: skipped, they would read as deleted and a
// commit would delete them.
func TestANestedWorkTreeOverTrackedPathsKeepsThemTracked(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("top", "1"), put("pkg/x.go", "x"), put("pkg/sub/y.go", "y"))
	f.checkout(a, "/w")
	for _, d := range []string{"/w/pkg/" + worktree.MetaDir, "/w/agent/" + worktree.MetaDir} {
		if err := m.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeMem(t, m, "/w/agent/wip", "unfinished")
	writeMem(t, m, "/w/pkg/wip", "unfinished too")
	writeMem(t, m, "/w/pkg/x.go", "edited")
	wt := mustOpen(t, "/w", f.opts())
	defer wt.Close()
	st, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !eq(kinds(st), []string{"pkg/x.go:modified"}) || len(st.Skipped) != 2 || st.Skipped[0].Path != "agent" || st.Skipped[1].Path != "pkg" {
		t.Fatalf("status: changes %v, skipped %v; want pkg/x.go modified, and agent and pkg skipped", kinds(st), st.Skipped)
	}
	writeMem(t, m, "/w/pkg/x.go", "x")
	s, err := wt.Snapshot()
	if err != nil || len(s.Changes) != 0 {
		t.Fatalf("snapshot: %v %v; want no change", s.Changes, err)
	}
}

// TestASwitchThatCannotBeFinishedYieldsToForce: a switch that fails
// after its first write (here on a link with an empty target, which no
// checkout makes) leaves its record, and every later switch tries to
// finish it first and fails the same way. Forced, a switch goes where it
// was asked and rewrites every path the stopped one touched, so the tree
// is never held for good.
func TestASwitchThatCannotBeFinishedYieldsToForce(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("a", "1"), put("m", "1"))
	b := f.commit(a, put("a", "2"), link("m", ""))
	f.checkout(a, "/w")
	sn := f.snap()
	sw := func(o worktree.Options, to objects.ID) error {
		return onTree("/w", o, func(wt *worktree.Tree) error { _, err := wt.Switch(sn, to); return err })
	}
	if err := sw(f.opts(), b); err == nil {
		t.Fatal("the switch to a link with an empty target succeeded")
	}
	if err := sw(f.opts(), a); err == nil {
		t.Fatal("the stopped switch was finished, or not tried")
	}
	forced := f.opts()
	forced.Force = true
	if err := sw(forced, a); err != nil {
		t.Fatalf("forced switch back: %v", err)
	}
	if msg := crashsweep.NeitherOldNorNew(m, files(t, sn, a), files(t, sn, a)); msg != "" {
		t.Fatal(msg)
	}
	checkCleanAt(t, m, a, "after the forced switch back", false)
}

// TestAForcedCheckoutOfTheBaseAfterACrashedUpdateGivesTheBase: an update
// crashed at any call leaves the tree on its old base with files it
// already wrote, markers among them. A forced checkout of that base must
// leave exactly the base's files, as git's checkout -f does, markers and
// half merges gone; it found nothing to change, dropped the update's
// record, and the next commit took the markers for an edit. Untracked
// files stay, as with git.
func TestAForcedCheckoutOfTheBaseAfterACrashedUpdateGivesTheBase(t *testing.T) {
	f, m, b := updateRevisions(t)
	sn := f.snap()
	base := mustOpen(t, "/w", worktree.Options{FS: m, StoreDir: "/s"}).Base()
	want := files(t, sn, base)
	run := treeOp(worktree.Options{StoreDir: "/s"}, func(wt *worktree.Tree) error {
		_, err := wt.Update(sn, b, "")
		return err
	})
	_, total := countCalls(t, m, run)
	forced := worktree.Options{StoreDir: "/s", Force: true}
	for n := int64(1); n < total; n++ {
		mm, _ := crashedAt(m, n, run)
		crashed := mm.CrashClone(faultfs.ProcessCrash, 0)
		at := fmt.Sprintf("crash at call %d of %d, then a forced checkout of the base", n, total)
		var on objects.ID
		err := treeOp(forced, func(wt *worktree.Tree) error {
			on = wt.Base()
			_, err := wt.Switch(sn, base)
			return err
		})(crashed)
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		if on != base {
			continue // the update's index was written: the tree moved
		}
		got := treeFiles(t, crashed, "/w")
		for p := range got {
			// Untracked files stay, as git's checkout -f leaves them:
			// the agent's own (n), and what the update added before it
			// stopped. None holds markers.
			if _, tracked := want[p]; !tracked {
				if strings.Contains(got[p], "<<<<<<<") {
					t.Fatalf("%s: %s holds markers", at, p)
				}
				delete(got, p)
			}
		}
		if d := diffMaps(got, want); d != "" {
			t.Fatalf("%s: %s", at, d)
		}
		checkCleanAt(t, crashed, base, at, true)
	}
}

// TestAWriteThatFailsLeavesNoTemporaryFile: a file that fails to write on
// a full disk is removed from the metadata tmp directory, which would
// otherwise hold the space the next attempt needs.
func TestAWriteThatFailsLeavesNoTemporaryFile(t *testing.T) {
	f, m := memFixture(t)
	a := f.commit(objects.ZeroID, put("a", "1"))
	b := f.commit(a, put("a", "2"), put("b", "big"), put("c", "3"))
	f.checkout(a, "/w")
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("op=write,path=/w/"+worktree.MetaDir+"/tmp/*,nth=2,err=enospc"))
	err := onTree("/w", worktree.Options{FS: in, StoreDir: "/s"}, func(wt *worktree.Tree) error {
		_, err := wt.Switch(f.snap(), b)
		return err
	})
	if err == nil {
		t.Fatal("the switch succeeded on a full disk")
	}
	fis, err := afero.ReadDir(m, "/w/"+worktree.MetaDir+"/tmp")
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range fis {
		t.Errorf("left in tmp: %s (%d bytes)", fi.Name(), fi.Size())
	}
}
