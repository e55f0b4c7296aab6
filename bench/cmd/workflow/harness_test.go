package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the harness's spawner, as the
// workflow binary does.
func TestMain(m *testing.M) {
	if os.Getenv(spawnerVar) == "1" {
		if err := spawnerMain(); err != nil {
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func TestMalformedKnobsAreErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--runs", "0"}, {"--runs", "x"}, {"--agents", "-1"}, {"--changes", "0"}, {"--reads", "0"},
		{"--edits", "0"}, {"--switches", "0"}, {"--min-free-gib", "-1"}, {"--git", ""},
		{"--steps", "import,bogus"}, {"--steps", ""}, {"--steps", "import,,size"}, {"--steps", "size,size"},
		{"--flavours", "dir,zz"}, {"--swarmops-label", "x"}, {"--symlinks=maybe"}, {"stray"}, {"--no-such-flag"},
	} {
		if _, err := parseConfig(args); err == nil {
			t.Errorf("parseConfig(%q) = nil error, want a refusal", args)
		}
	}
}

func TestDefaultsChooseEveryStepAndFlavour(t *testing.T) {
	c, err := parseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Steps, Steps) || !slices.Equal(c.Flavours, Flavours) || c.Runs != 3 || c.Agents != 32 || !c.Serve || !c.Symlinks {
		t.Fatalf("defaults = %+v", c)
	}
	c, err = parseConfig([]string{"--steps", " status , import"})
	if err != nil || !slices.Equal(c.Steps, []string{"status", "import"}) || !c.has("status") || c.has("edit") {
		t.Fatalf("--steps ' status , import' = %v, %v", c.Steps, err)
	}
}

func TestSystemsAlternateOrderFromRunToRun(t *testing.T) {
	var got []string
	for r := 0; r < 3; r++ {
		got = append(got, order(workflowSystems, r)...)
	}
	want := []string{"swarmops", "git", "git-fsync", "git-fsync", "git", "swarmops", "swarmops", "git", "git-fsync"}
	if !slices.Equal(got, want) {
		t.Fatalf("order over 3 runs = %v, want %v", got, want)
	}
}

// TestTouchedCountsEveryRewriteAndNothingElse checks the count the switch
// target is judged on: a file replaced by rename (as swarmops writes), a
// file rewritten in place, a new file and a removed one, while untouched
// files and the two systems' metadata directories are not counted.
func TestTouchedCountsEveryRewriteAndNothingElse(t *testing.T) {
	d := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(d, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "b", "c", "d", "sub/e", ".git/index", ".swarmops-tree/index"} {
		write(f, "old "+f)
	}
	before, err := stamps(d)
	if err != nil {
		t.Fatal(err)
	}
	write("tmp", "old a") // same size and content as a: only the inode tells
	if err := os.Rename(filepath.Join(d, "tmp"), filepath.Join(d, "a")); err != nil {
		t.Fatal(err)
	}
	write("sub/e", "new e!")
	write("f", "new")
	write(".git/index", "changed")
	write(".swarmops-tree/index", "changed")
	if err := os.Remove(filepath.Join(d, "b")); err != nil {
		t.Fatal(err)
	}
	after, err := stamps(d)
	if err != nil {
		t.Fatal(err)
	}
	if w, rm := touched(before, after); w != 3 || rm != 1 {
		t.Fatalf("touched = %d written, %d removed; want 3 (a by rename, sub/e, f) and 1 (b)", w, rm)
	}
}

// TestSettleWaitsForWhatACommandLeftRunning checks that the harness waits
// for a tagged process that outlives the command that started it (git
// commit's detached gc), and does not wait when there is none.
func TestSettleWaitsForWhatACommandLeftRunning(t *testing.T) {
	tag := "test-" + t.Name()
	if d, err := settle(tag, time.Second); err != nil || d != 0 {
		t.Fatalf("settle with nothing running = %v, %v; want 0, nil", d, err)
	}
	cmd := exec.Command("sleep", "0.4")
	cmd.Env = append(os.Environ(), tagVar+"="+tag)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	// Just after exec, /proc/PID/environ can still read empty (the kernel
	// sets the new environment's bounds late in exec), so wait until the
	// child is visible before asking settle to wait for it.
	for deadline := time.Now().Add(2 * time.Second); len(tagged(tag)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tagged child never showed in /proc")
		}
	}
	d, err := settle(tag, 10*time.Second)
	if err != nil || d < 200*time.Millisecond {
		t.Fatalf("settle = %v, %v; want about 400ms, nil", d, err)
	}
}

func TestQuoteEscapesWhatTheChangeListReserves(t *testing.T) {
	if got, want := quote("a b\"c\\d\te"), `"a b\"c\\d\x09e"`; got != want {
		t.Fatalf("quote = %s, want %s", got, want)
	}
}

func TestDataNumbersKeepsCountsAndListLengths(t *testing.T) {
	m := dataNumbers([]byte(`{"ok":true,"data":{"id":"ab","files":12,"written":10,"changes":[1,2,3]}}`))
	if m["out_files"] != 12 || m["out_written"] != 10 || m["out_changes"] != 3 || len(m) != 3 {
		t.Fatalf("dataNumbers = %v", m)
	}
	if dataNumbers([]byte("not json")) != nil || dataNumbers([]byte(`{"ok":true,"data":[1]}`)) != nil {
		t.Fatal("dataNumbers of what is not an object's data must be nil")
	}
}

func TestPickedPathsAreDistinctOrdinaryFiles(t *testing.T) {
	var files []string
	for i := 0; i < 100; i++ {
		files = append(files, filepath.ToSlash(filepath.Join("p", string(rune('a'+i%26)), strings.Repeat("x", i%7+1)+".go")))
	}
	files = append(files, "p/testdata/t.go", ".hidden/x.go")
	slices.Sort(files)
	files = slices.Compact(files)
	cat, edit, ten, err := pickPaths(files)
	if err != nil {
		t.Fatal(err)
	}
	tr := &TreeInfo{CatPath: cat, EditPath: edit, TenPaths: ten}
	ag, err := agentPaths(files, tr, 8)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]string{cat, edit}, ten...), ag...)
	seen := map[string]bool{}
	for _, p := range all {
		if seen[p] || strings.Contains(p, "testdata") || strings.HasPrefix(p, ".") {
			t.Fatalf("picked %q twice or from testdata or a hidden directory: %v", p, all)
		}
		seen[p] = true
	}
	if _, err := agentPaths(files, tr, 1000); err == nil {
		t.Fatal("agentPaths for more agents than files = nil error")
	}
}

func TestAgentsSummaryGivesRateSpreadAndRetries(t *testing.T) {
	s := summarizeAgents([]agentResult{
		{done: 10, busy: 2, finish: 2 * time.Second, ms: []float64{1, 2}},
		{done: 10, failed: 1, firstErr: "exit 7: E_IO", finish: 4 * time.Second, ms: []float64{3}},
	}, 4*time.Second)
	m := s.Metrics
	if m["commits"] != 20 || m["commits_per_s"] != 5 || m["spread"] != 2 || m["busy"] != 2 || m["failed"] != 1 || m["p50_ms"] != 2 {
		t.Fatalf("summary = %v", m)
	}
	if s.Error != "" || !strings.Contains(s.Note, "E_IO") {
		t.Fatalf("a partly failed run must be measured, its first failure noted: %+v", s)
	}
	if s := summarizeAgents([]agentResult{{failed: 1, firstErr: "exit 2: E_USAGE"}}, time.Second); s.Error == "" {
		t.Fatal("a run without one commit must be n/a with the reason")
	}
}

// sink keeps the test's large allocation reachable.
var sink []byte

// TestPeakRSSIsTheCommandsOwnNotTheHarnesss checks the claim the memory
// columns rest on: a small command's peak RSS is its own, however large
// the harness has grown (Linux records the replaced image's peak at exec,
// so a child the harness started itself would report at least the
// harness's peak).
func TestPeakRSSIsTheCommandsOwnNotTheHarnesss(t *testing.T) {
	sink = make([]byte, 96<<20)
	for i := range sink {
		sink[i] = byte(i)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &spawners{self: self, dir: t.TempDir()}
	defer s.close()
	p, err := s.run(cmdSpec{bin: "/bin/sh", args: []string{"-c", "echo hi; echo there >&2; exit 3"}, stdin: []byte("in")}, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	if string(p.stdout) != "hi\n" || string(p.stderr) != "there\n" || p.exit != 3 || p.ms <= 0 {
		t.Fatalf("spawned sh: stdout %q, stderr %q, exit %d, %v ms; want hi, there, 3, > 0", p.stdout, p.stderr, p.exit, p.ms)
	}
	if p.rssKiB <= 0 || p.rssKiB > 16<<10 {
		t.Fatalf("sh's peak RSS = %d KiB, want its own (a few MiB), not the harness's 96 MiB or more", p.rssKiB)
	}
	if _, err := s.run(cmdSpec{bin: "/no/such/binary"}, os.Environ()); err == nil {
		t.Fatal("a command that cannot start must be an error")
	}
}
