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
	f, m, a, b := crashRevisions(t)
	sn := f.snap()
	f.checkout(a, "/w")
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
