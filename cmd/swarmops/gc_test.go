package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGCCommand: gc --json reports what it kept and reclaimed, a checkout
// holds its base with a lease that gc reports, a dropped branch's
// changeset is gone afterwards and the kept one reads back; a negative or
// malformed --retention, or a bad SWARMOPS_TEST_SEGMENT_SIZE, is E_USAGE.
func TestGCCommand(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "s")
	getenv := inProcessEnv(store, false)
	sw := jsonRunner(t, getenv)
	id := func(env map[string]any) string { return env["data"].(map[string]any)["id"].(string) }
	if code, env := sw("", "init"); code != 0 {
		t.Fatalf("init: %v", env)
	}
	_, env := sw("put a = \"kept\\n\"\n", "commit", "-F", "-", "--advance", "main", "--create", "--root")
	kept := id(env)
	_, env = sw("put b = \"dropped\\n\"\n", "commit", "-F", "-", "--advance", "tmp", "--create", "--root")
	dropped := id(env)
	_, env = sw("put c = \"leased\\n\"\n", "commit", "-F", "-", "--advance", "wip", "--create", "--root")
	leased := id(env)
	if code, env := sw("", "checkout", "wip", filepath.Join(dir, "wt")); code != 0 {
		t.Fatalf("checkout: %v", env)
	}
	for _, r := range []string{"tmp", "wip"} {
		if code, env := sw("", "ref", "delete", r); code != 0 {
			t.Fatalf("ref delete %s: %v", r, env)
		}
	}
	code, env := sw("", "gc", "--retention", "0s")
	if code != 0 {
		t.Fatalf("gc: %v", env)
	}
	d := env["data"].(map[string]any)
	if d["refs"].(float64) != 1 || len(d["leases"].([]any)) != 1 || d["leased_roots"].(float64) != 1 {
		t.Fatalf("gc report: %v", d)
	}
	for rev, want := range map[string]int{kept: 0, leased: 0, dropped: 3} {
		if code, env := sw("", "cat", rev+":"+map[string]string{kept: "a", leased: "c", dropped: "b"}[rev]); code != want {
			t.Errorf("cat %s after gc: exit %d, want %d (%v)", rev[:12], code, want, env)
		}
	}
	if code, env := sw("", "verify", "--deep"); code != 0 {
		t.Fatalf("verify --deep after gc: %v", env)
	}
	for _, args := range [][]string{{"gc", "--retention", "-1s"}, {"gc", "--retention", "soon"}} {
		if code, env := sw("", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (E_USAGE): %v", args, code, env)
		}
	}
	bad := func(k string) string {
		if k == segmentSizeEnv {
			return "12k"
		}
		return getenv(k)
	}
	var out bytes.Buffer
	if code := run([]string{"--json", "gc"}, strings.NewReader(""), &out, &bytes.Buffer{}, bad); code != 2 {
		t.Errorf("gc with %s=12k: exit %d, want 2: %s", segmentSizeEnv, code, out.String())
	}
}

// TestGCKeepsTheBaseAWorkTreeCommittedWithoutARef: commit --dir without
// --advance makes the new changeset the tree's base, held by nothing but
// the tree; gc must leave it, and the tree must go on working.
func TestGCKeepsTheBaseAWorkTreeCommittedWithoutARef(t *testing.T) {
	dir := t.TempDir()
	getenv := inProcessEnv(filepath.Join(dir, "s"), false)
	sw := jsonRunner(t, getenv)
	wt := filepath.Join(dir, "wt")
	for _, args := range [][]string{{"init"}, {"commit", "-F", "-", "--advance", "main", "--create"}, {"checkout", "main", wt}} {
		if code, env := sw("put a = \"1\\n\"\n", args...); code != 0 {
			t.Fatalf("%v: %v", args, env)
		}
	}
	if err := os.WriteFile(filepath.Join(wt, "a"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, env := sw("", "commit", "--dir", wt, "-m", "work")
	if code != 0 {
		t.Fatalf("commit --dir: %v", env)
	}
	id := env["data"].(map[string]any)["id"].(string)
	if code, env := sw("", "gc", "--retention", "0s"); code != 0 {
		t.Fatalf("gc: %v", env)
	}
	if code, env := sw("", "show", id); code != 0 {
		t.Fatalf("show %s after gc: %v; the tree's base was collected", id[:12], env)
	}
	if err := os.WriteFile(filepath.Join(wt, "a"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, env := sw("", "commit", "--dir", wt, "-m", "more"); code != 0 {
		t.Fatalf("commit --dir after gc: %v", env)
	}
}

// jsonRunner runs command lines in process with --json and returns each
// one's exit status and envelope.
func jsonRunner(t *testing.T, getenv func(string) string) func(stdin string, args ...string) (int, map[string]any) {
	return func(stdin string, args ...string) (int, map[string]any) {
		t.Helper()
		var out bytes.Buffer
		code := run(append([]string{"--json"}, args...), strings.NewReader(stdin), &out, &bytes.Buffer{}, getenv)
		var env map[string]any
		if err := json.Unmarshal(out.Bytes(), &env); err != nil {
			t.Fatalf("swarmops %v: %v: %q", args, err, out.String())
		}
		return code, env
	}
}
