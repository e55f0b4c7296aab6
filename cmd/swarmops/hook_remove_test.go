package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAHookRemovalCutShortLeavesNoPartialTree: a removal of a hook tree
// killed half-way (here: the deletion fails after taking some files)
// leaves no work tree under the tree's name, so the next tree of that
// name is whole; a partial one would keep the missing files missing, and
// the agent's next commit would record them as deleted (a land of that
// took 2,530 files off main in a 32-agent day).
func TestAHookRemovalCutShortLeavesNoPartialTree(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store")
	seedStore(t, store)
	getenv := storeEnv(store)
	hook := func(event string, args ...string) string {
		t.Helper()
		var out, errb strings.Builder
		if st := run(append([]string{"hook"}, args...), strings.NewReader(event), &out, &errb, getenv); st != 0 {
			t.Fatalf("hook %v: %d %s", args, st, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	dir := hook(`{"name":"a1","cwd":"`+root+`"}`, "worktree-create")
	if err := os.WriteFile(filepath.Join(dir, "work.txt"), []byte("w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeAll = func(p string) error {
		os.Remove(filepath.Join(p, "a.txt")) // some files go, then the kill
		return errors.New("killed")
	}
	var out, errb strings.Builder
	run([]string{"hook", "worktree-remove"}, strings.NewReader(`{"worktree_path":"`+dir+`"}`), &out, &errb, getenv)
	removeAll = os.RemoveAll
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a removal cut short left %s behind (%v): a partial work tree", dir, err)
	}
	again := hook(`{"name":"a1","cwd":"`+root+`"}`, "worktree-create")
	for _, f := range []string{"a.txt", "work.txt"} {
		if _, err := os.Stat(filepath.Join(again, f)); err != nil {
			t.Errorf("the next tree of the name lacks %s: %v", f, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".a1"+retiredMark+"*")); len(left) != 0 {
		t.Errorf("what the cut-short removal left is still there: %v", left)
	}
}
