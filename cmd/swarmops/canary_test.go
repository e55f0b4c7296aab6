package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCanaryEnvOnlyInTaggedBuild: the only non-test file that names
// SWARMOPS_TEST_CANARY is built only with the swarmops_canary tag, so a
// normal binary has no reader of the variable and no way to be weakened;
// and in a build without the tag the hook stays nil.
func TestCanaryEnvOnlyInTaggedBuild(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	readers := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "SWARMOPS_TEST_CANARY") && !strings.Contains(string(b), "weakenHook =") {
			continue
		}
		readers++
		if !strings.HasPrefix(string(b), "//go:build swarmops_canary\n") {
			t.Errorf("%s names SWARMOPS_TEST_CANARY or sets weakenHook without the swarmops_canary build tag", f)
		}
	}
	if readers != 1 {
		t.Errorf("%d tagged files read the variable, want 1 (canary.go)", readers)
	}
	if !canaryBuild && weakenHook != nil {
		t.Error("a build without the swarmops_canary tag has a weakenHook")
	}
}

// TestCanaryNormalBuildIgnoresEnv runs a command with the variable set to a
// name no build knows: a normal build never reads it, so the command
// succeeds; a canary build refuses it as a usage error.
func TestCanaryNormalBuildIgnoresEnv(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	getenv := func(k string) string {
		if k == "SWARMOPS_TEST_CANARY" {
			return "no-such-canary"
		}
		return ""
	}
	var out, errb bytes.Buffer
	code := run([]string{"--store", store, "init"}, strings.NewReader(""), &out, &errb, getenv)
	switch {
	case !canaryBuild && code != 0:
		t.Fatalf("a normal build read SWARMOPS_TEST_CANARY: exit %d\n%s%s", code, out.String(), errb.String())
	case canaryBuild && code != kindUsage.Exit:
		t.Fatalf("a canary build ran with an unknown canary: exit %d, want %d\n%s%s", code, kindUsage.Exit, out.String(), errb.String())
	}
}
