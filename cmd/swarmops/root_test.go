package main

import (
	"bytes"
	"fmt"
	"path/filepath"
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

// TestDirectRunMatchesExecute runs command lines on a store twice: as run
// runs them (directly when runDirect can) and through cobra's Execute on
// the whole tree, each on its own copy of the same store, and compares
// exit status, stdout and stderr (ids and times masked: a commit's id
// covers its time). The lines cover commands that succeed, that fail in
// their own code (a conflict, nothing to commit, a missing path) and that
// fail validation (an argument missing or extra, a bad flag), which
// runDirect must leave to Execute.
func TestDirectRunMatchesExecute(t *testing.T) {
	lines := []struct {
		stdin  string
		args   []string
		direct bool // runDirect runs it, rather than Execute
	}{
		{"", []string{"log"}, true},
		{"", []string{"--json", "log", "-n", "1", "main"}, true},
		{"", []string{"cat", "main:a.txt"}, true},
		{"", []string{"cat", "main:nope.txt"}, true},
		{"", []string{"cat"}, false},
		{"", []string{"cat", "main:a.txt", "extra"}, false},
		{"", []string{"ls", "--json", "main:"}, true},
		{"", []string{"show", "main"}, true},
		{"", []string{"diff", "main~1", "main"}, true},
		{"", []string{"info"}, true},
		{"put b.txt = \"b\\n\"\n", []string{"commit", "-F", "-", "--advance", "main", "-m", "b", "--agent", "t"}, true},
		{"put b.txt = \"b\\n\"\n", []string{"--json", "commit", "-F", "-", "--advance", "main", "--parent", "main~1", "-m", "b"}, true},
		{"put a.txt = \"a\\n\"\n", []string{"commit", "-F", "-", "--advance", "main", "-m", "same"}, true},
		{"put c.txt = \"c\\n\"\n", []string{"--store", "", "commit", "--json", "-F", "-", "--advance", "side", "--create", "-m", "c"}, true},
		{"", []string{"commit", "-F", "-", "--dir", "x"}, true},
		{"", []string{"commit", "-m"}, false},
		{"", []string{"commit", "stray"}, false},
		{"", []string{"log", "-h"}, false},
		{"", []string{"log", "--", "main"}, true},
		{"", []string{"--lock-timeout", "2s", "log", "-n", "1"}, true},
		{"", []string{"ref", "get", "main"}, false},
	}
	base := t.TempDir()
	for i, l := range lines {
		var got [2]string
		for j, whole := range []bool{false, true} {
			store := filepath.Join(base, fmt.Sprintf("s%d-%d", i, j))
			seedStore(t, store)
			var direct bool
			got[j], direct = runLine(t, store, l.stdin, l.args, whole)
			if !whole && direct != l.direct {
				t.Errorf("swarmops %s: ran directly %v, want %v", strings.Join(l.args, " "), direct, l.direct)
			}
		}
		if got[0] != got[1] {
			t.Errorf("swarmops %s:\nas run:     %s\nwhole tree: %s", strings.Join(l.args, " "), got[0], got[1])
		}
	}
}

// seedStore makes a store at dir with two changesets on main.
func seedStore(t testing.TB, dir string) {
	t.Helper()
	for _, c := range []struct{ stdin, args string }{
		{"", "init"},
		{"put a.txt = \"a\\n\"\n", "commit -F - --advance main -m one"},
		{"put a.txt = \"a\\nb\\n\"\n", "commit -F - --advance main -m two"},
	} {
		var out bytes.Buffer
		getenv := storeEnv(dir)
		if st := run(strings.Fields(c.args), strings.NewReader(c.stdin), &out, &out, getenv); st != 0 {
			t.Fatalf("swarmops %s: %d %s", c.args, st, out.String())
		}
	}
}

// runLine runs args on the store at dir, as run does or on the whole tree
// through Execute, and renders what came out with ids and times masked.
func runLine(t *testing.T, dir, stdin string, args []string, whole bool) (string, bool) {
	t.Helper()
	for i, a := range args {
		if a == "" && i > 0 && args[i-1] == "--store" {
			args = append(append([]string(nil), args[:i]...), append([]string{dir}, args[i+1:]...)...)
		}
	}
	var out, errb bytes.Buffer
	a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, start: time.Now(), cwd: dir,
		getenv: storeEnv(dir)}
	var status int
	var direct bool
	if whole {
		status = a.runTree(a.rootCmd(nil), args)
	} else {
		status, direct = a.runLine(args)
	}
	mask := func(s string) string {
		s = elapsedRE.ReplaceAllString(s, `"elapsed_ms":0`)
		s = strings.ReplaceAll(s, dir, "STORE")
		s = idRE.ReplaceAllString(s, "ID")
		return timeRE.ReplaceAllString(s, "TIME")
	}
	return fmt.Sprintf("%d|%s|%s", status, mask(out.String()), mask(errb.String())), direct
}

var (
	idRE   = regexp.MustCompile(`[0-9a-f]{12,64}`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?( [+-]\d{4})?`)
)
