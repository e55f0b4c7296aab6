package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestACommitRetriedAfterItsAnswerWasLostRecordsTheFirst: a commit --dir
// whose first try became durable while the tree never recorded it (its
// answer lost with a killed server) must not fail its retries for good:
// the retry finds the ref at a changeset with its parents and its
// changes, and records that. The tree copied before the first commit
// stands for the tree the lost answer left.
func TestACommitRetriedAfterItsAnswerWasLostRecordsTheFirst(t *testing.T) {
	dir := t.TempDir()
	sw := jsonRunner(t, inProcessEnv(filepath.Join(dir, "s"), false))
	wt, lost := filepath.Join(dir, "wt"), filepath.Join(dir, "lost")
	for _, args := range [][]string{{"init"}, {"commit", "-F", "-", "--advance", "main", "--create"}, {"checkout", "main", wt}} {
		if code, env := sw("put a = \"1\\n\"\n", args...); code != 0 {
			t.Fatalf("%v: %v", args, env)
		}
	}
	if err := os.WriteFile(filepath.Join(wt, "a"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", wt, lost).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	code, env := sw("", "commit", "--dir", wt, "--advance", "agent/1", "--create", "-m", "work")
	if code != 0 {
		t.Fatalf("first commit: %v", env)
	}
	first := env["data"].(map[string]any)["id"].(string)
	code, env = sw("", "commit", "--dir", lost, "--advance", "agent/1", "--create", "-m", "work")
	if code != 0 {
		t.Fatalf("the retry: %v, want the first try recorded", env)
	}
	d := env["data"].(map[string]any)
	if d["id"] != first || d["committed_before"] != true {
		t.Fatalf("the retry: %v, want id %s with committed_before", d, first)
	}
	if code, env := sw("", "status", lost); code != 0 || env["data"].(map[string]any)["base"] != first {
		t.Fatalf("status of the retried tree: %v, want base %s", env, first)
	}
	// A tree with other changes still loses the race.
	if err := os.WriteFile(filepath.Join(lost, "a"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt2 := filepath.Join(dir, "wt2")
	if code, env := sw("", "checkout", "main", wt2); code != 0 {
		t.Fatalf("checkout: %v", env)
	}
	if err := os.WriteFile(filepath.Join(wt2, "a"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, env := sw("", "commit", "--dir", wt2, "--advance", "agent/1", "-m", "other"); code != 4 {
		t.Fatalf("a commit of other changes onto the moved ref: %d %v, want E_CONFLICT", code, env)
	}
}
