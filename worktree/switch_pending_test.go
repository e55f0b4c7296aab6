package worktree_test

import (
	"errors"
	"fmt"
	"testing"

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
			checkCleanAt(t, pc, to, where)
		}
	}
	if named == 0 {
		t.Fatal("no crash point left a pending switch")
	}
	t.Logf("%d crash points, %d with the switch pending", total-1, named/2)
}

// checkCleanAt checks that the work tree /w on fsys is at base with a
// clean status and no pending switch.
func checkCleanAt(t *testing.T, fsys vfs.FS, base objects.ID, where string) {
	t.Helper()
	err := treeOp(worktree.Options{StoreDir: "/s"}, func(wt *worktree.Tree) error {
		st, err := wt.Status()
		if err != nil {
			return err
		}
		if st.Base != base || len(st.Changes) != 0 || !st.Switching.IsZero() {
			return fmt.Errorf("status: base %v (want %v), %d changes %v, switching %v", st.Base, base, len(st.Changes), st.Changes, st.Switching)
		}
		return nil
	})(fsys)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// TestANestedWorkTreeOverTrackedPathsKeepsThemTracked: a directory that
// holds a metadata directory of its own is another work tree, left out of
// this one's status and commits, unless this tree tracks paths below it:
// skipped, those would read as deleted and a commit would delete them.
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
	wt := mustOpen(t, "/w", f.opts())
	defer wt.Close()
	st, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Changes) != 0 || len(st.Skipped) != 1 || st.Skipped[0].Path != "agent" {
		t.Fatalf("status: changes %v, skipped %v; want none, and agent skipped", kinds(st), st.Skipped)
	}
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
	checkCleanAt(t, m, a, "after the forced switch back")
}
