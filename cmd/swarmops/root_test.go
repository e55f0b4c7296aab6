package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCommandTableNamesItsCommands checks that every name in the table
// builds the command of that name and that help lists them all, so a
// command line that names a command parses against the right subtree.
func TestCommandTableNamesItsCommands(t *testing.T) {
	a := &app{}
	table := commandTable
	if len(table) != len(commandOrder) {
		t.Fatalf("the table has %d commands, the help order %d", len(table), len(commandOrder))
	}
	for _, name := range commandOrder {
		build, ok := table[name]
		if !ok {
			t.Fatalf("%q is in the help order but not in the table", name)
		}
		if got := build(a).Name(); got != name {
			t.Errorf("table entry %q builds the command %q", name, got)
		}
	}
}

// TestANamedCommandRunsTheSameOnItsOwnSubtree runs command lines that
// fail before they touch a store (help, flag and argument errors, in
// text and JSON) once on the whole tree and once as run builds it, and
// compares exit status, stdout and stderr.
func TestANamedCommandRunsTheSameOnItsOwnSubtree(t *testing.T) {
	lines := [][]string{
		{"commit", "--help"},
		{"--json", "commit", "--parnet", "x"},
		{"log", "-n", "x"},
		{"--store", "/nonexistent", "ref", "bogus"},
		{"ref", "get"},
		{"--lock-timeout=1s", "show"},
		{"--store=/nonexistent", "--json", "land", "a", "b"},
		{"watch", "--poll", "soon"},
		{"diff", "--stat", "--name-status", "a"},
		{"--", "log"},
		{"--bogus", "log"},
		{"lgo"},
		{"help", "commit"},
		{},
	}
	for _, args := range lines {
		full := runOn(t, args, true)
		pruned := runOn(t, args, false)
		if full != pruned {
			t.Errorf("swarmops %s:\nwhole tree: %s\nas run:     %s", strings.Join(args, " "), full, pruned)
		}
	}
}

// runOn runs args on the whole command tree or as run builds it, and
// renders what came out (the elapsed time masked).
func runOn(t *testing.T, args []string, whole bool) string {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, start: time.Now(),
		getenv: func(string) string { return "" }}
	var status int
	if whole {
		status = a.runTree(a.rootCmd(nil), args)
	} else {
		status = a.run(args)
	}
	o := elapsedRE.ReplaceAllString(out.String(), `"elapsed_ms":0`)
	return fmt.Sprintf("%d|%s|%s", status, o, errb.String())
}

var elapsedRE = regexp.MustCompile(`"elapsed_ms":[0-9.e+-]+`)

// TestServeCPUProfileThatCannotBeWrittenIsAUsageError: the hidden
// diagnostic flag fails before anything is served.
func TestServeCPUProfileThatCannotBeWrittenIsAUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	st := run([]string{"serve", "--cpuprofile", "/nonexistent/dir/cpu.prof", "--json"}, strings.NewReader(""), &out, &errb,
		func(string) string { return "" })
	if st != kindUsage.Exit || !strings.Contains(out.String(), `"code":"E_USAGE"`) || !strings.Contains(out.String(), "cpuprofile") {
		t.Fatalf("status %d, stdout %s", st, out.String())
	}
}
