package mergequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// fixture is a store with a target "main" holding base.txt.
type fixture struct {
	t    *testing.T
	s    *core.Store
	main core.ID
	log  string // the file a check appends the tips it passed to
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := core.Create(filepath.Join(dir, "store"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{t: t, s: s, log: filepath.Join(dir, "passed.log")}
	f.main, err = s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "base.txt", Data: []byte("1\n2\n3\n")}},
		Advance: "main", Message: "base"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// change commits files onto main's first value, on no ref.
func (f *fixture) change(files ...string) core.ID {
	f.t.Helper()
	var cs []core.Change
	for i := 0; i < len(files); i += 2 {
		cs = append(cs, core.Change{Path: files[i], Data: []byte(files[i+1])})
	}
	id, err := f.s.Commit(core.CommitRequest{Parents: []core.ID{f.main}, Changes: cs, Message: "change " + files[0]})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// opts is a check that fails while the tree holds a file named BAD*, and
// logs every tip it passes.
func (f *fixture) opts() Options {
	return Options{Check: fmt.Sprintf(`echo "checking $SWARMOPS_CHECK_TIP"; if ls | grep -q '^BAD'; then echo "BAD file found" >&2; exit 3; fi; echo "$SWARMOPS_CHECK_TIP" >> %q`, f.log),
		TempDir: f.t.TempDir()}
}

// files lists the paths of main's tree.
func (f *fixture) files() []string {
	f.t.Helper()
	sn, err := f.s.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	head, err := sn.Ref("main")
	if err != nil {
		f.t.Fatal(err)
	}
	flat, err := sn.Flatten(head)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for p := range flat {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// assertOnlyCheckedTrees checks the queue's promise: every value main
// took after its first is a tip the check passed on, and no queue ref is
// left behind.
func (f *fixture) assertOnlyCheckedTrees() {
	f.t.Helper()
	sn, err := f.s.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := os.ReadFile(f.log)
	passed := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		passed[l] = true
	}
	moves, err := sn.RefLog("main")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, m := range moves[1:] {
		if !passed[m.New.String()] {
			f.t.Errorf("main moved to %s, which no check passed (passed: %v)", m.New, passed)
		}
	}
	refs, err := sn.Refs()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range refs {
		if strings.HasPrefix(r.Name, "queue") {
			f.t.Errorf("ref %s left behind", r.Name)
		}
	}
}

func TestAPassingCheckLandsTheChange(t *testing.T) {
	f := newFixture(t)
	c := f.change("a.txt", "a\n")
	out, err := Land(f.s, c, "main", f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if !out.Landed || out.Batch != 1 || out.Checks != 1 || out.Head != c {
		t.Fatalf("outcome %+v, want landed by fast-forward in a batch of 1 after 1 check", out)
	}
	if got := f.files(); strings.Join(got, " ") != "a.txt base.txt" {
		t.Fatalf("main holds %v", got)
	}
	f.assertOnlyCheckedTrees()
}

func TestAFailingCheckEjectsTheChangeWithItsOutput(t *testing.T) {
	f := newFixture(t)
	c := f.change("BAD", "x\n")
	out, err := Land(f.s, c, "main", f.opts())
	var cf *CheckFailedError
	if !errors.As(err, &cf) || cf.Outcome != out {
		t.Fatalf("err %v, want a *CheckFailedError with the outcome", err)
	}
	if out.Landed || out.Exit != 3 || out.Reason != "check" || !strings.Contains(out.Output, "BAD file found") {
		t.Fatalf("outcome %+v, output %q", out, out.Output)
	}
	if got := f.files(); strings.Join(got, " ") != "base.txt" {
		t.Fatalf("main holds %v", got)
	}
	f.assertOnlyCheckedTrees()
}

// TestABatchIsBisectedToTheBreakingChanges queues eight changes, two of
// them failing the check, as eight agents would before one of them runs
// the queue: one batch, searched for its breakers, lands the six and
// ejects the two.
func TestABatchIsBisectedToTheBreakingChanges(t *testing.T) {
	f := newFixture(t)
	var ids []core.ID
	var ns []uint64
	for i := 0; i < 8; i++ {
		files := []string{fmt.Sprintf("f%d.txt", i), "x\n"}
		if i == 2 || i == 5 {
			files = append(files, fmt.Sprintf("BAD%d", i), "x\n")
		}
		ids = append(ids, f.change(files...))
		if i < 7 {
			n, err := enqueue(f.s, ids[i], "main")
			if err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
		}
	}
	last, err := Land(f.s, ids[7], "main", f.opts())
	if err != nil || !last.Landed {
		t.Fatalf("last land: %+v, %v", last, err)
	}
	for i, n := range ns {
		out, err := collect(f.s, "main", n)
		if err != nil {
			t.Fatal(err)
		}
		bad := i == 2 || i == 5
		if out == nil || out.Landed == bad || out.Change != ids[i] {
			t.Fatalf("entry %d: outcome %+v, want ejected=%v", i, out, bad)
		}
		if bad && (out.Exit != 3 || !strings.Contains(out.Output, "BAD file found")) {
			t.Errorf("entry %d: exit %d, output %q", i, out.Exit, out.Output)
		}
	}
	want := "base.txt f0.txt f1.txt f3.txt f4.txt f6.txt f7.txt"
	if got := strings.Join(f.files(), " "); got != want {
		t.Fatalf("main holds %s, want %s", got, want)
	}
	// The prefix search finds k breakers among n in about
	// k·(log2(n)+1) + 1 checks: here 8.
	if last.Checks > 8 {
		t.Errorf("%d checks for a batch of 8 with 2 breakers, want at most 8", last.Checks)
	}
	f.assertOnlyCheckedTrees()
}

// TestOneBreakerAmongSixteenCostsALogarithmicSearch: the batch's check,
// then log2(16) = 4 checks of prefixes, and nothing left to check after
// the breaker, the last of the batch.
func TestOneBreakerAmongSixteenCostsALogarithmicSearch(t *testing.T) {
	f := newFixture(t)
	var last *Outcome
	var ns []uint64
	for i := 0; i < 16; i++ {
		files := []string{fmt.Sprintf("f%02d.txt", i), "x\n"}
		if i == 15 {
			files = append(files, "BAD", "x\n")
		}
		c := f.change(files...)
		if i < 15 {
			n, err := enqueue(f.s, c, "main")
			if err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
			continue
		}
		var err error
		last, err = Land(f.s, c, "main", f.opts())
		if !errors.Is(err, ErrCheckFailed) {
			t.Fatalf("the breaker's land: %v", err)
		}
	}
	for _, n := range ns {
		if out, err := collect(f.s, "main", n); err != nil || !out.Landed {
			t.Fatalf("entry %d: %+v, %v", n, out, err)
		}
	}
	if last.Checks != 5 {
		t.Fatalf("%d checks, want 5", last.Checks)
	}
	if got := len(f.files()); got != 16 {
		t.Fatalf("main holds %d files, want 16", got)
	}
	f.assertOnlyCheckedTrees()
}

func TestABatchThatPassesIsCheckedOnce(t *testing.T) {
	f := newFixture(t)
	var last *Outcome
	for i := 0; i < 8; i++ {
		c := f.change(fmt.Sprintf("f%d.txt", i), "x\n")
		if i < 7 {
			if _, err := enqueue(f.s, c, "main"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var err error
		if last, err = Land(f.s, c, "main", f.opts()); err != nil {
			t.Fatal(err)
		}
	}
	if last.Checks != 1 || last.Batch != 8 {
		t.Fatalf("outcome %+v, want one check for a batch of 8", last)
	}
	if got := len(f.files()); got != 9 {
		t.Fatalf("main holds %d files, want 9", got)
	}
}

func TestAConflictingChangeIsEjectedWithTheConflict(t *testing.T) {
	f := newFixture(t)
	a := f.change("base.txt", "1\nA\n3\n")
	b := f.change("base.txt", "1\nB\n3\n")
	n, err := enqueue(f.s, a, "main")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Land(f.s, b, "main", f.opts())
	var mc *core.MergeConflictError
	if !errors.As(err, &mc) || len(mc.Paths) != 1 || mc.Paths[0] != "base.txt" || len(mc.Hunks["base.txt"]) != 1 {
		t.Fatalf("err %v, want a merge conflict on base.txt with its hunk", err)
	}
	if out, err := collect(f.s, "main", n); err != nil || !out.Landed {
		t.Fatalf("first change: %+v, %v", out, err)
	}
	f.assertOnlyCheckedTrees()
}

func TestALandAlreadyOnTheTargetIsANoOpWithoutACheck(t *testing.T) {
	f := newFixture(t)
	c := f.change("a.txt", "a\n")
	if _, err := Land(f.s, c, "main", f.opts()); err != nil {
		t.Fatal(err)
	}
	out, err := Land(f.s, c, "main", f.opts())
	if err != nil || !out.Landed || !out.NoOp || out.Checks != 0 {
		t.Fatalf("second land: %+v, %v", out, err)
	}
	f.assertOnlyCheckedTrees()
}

func TestACheckPastItsTimeoutFails(t *testing.T) {
	f := newFixture(t)
	o := f.opts()
	o.Check, o.Timeout = "echo started; sleep 10", 200_000_000
	out, err := Land(f.s, f.change("a.txt", "a\n"), "main", o)
	if !errors.Is(err, ErrCheckFailed) || !out.TimedOut || !strings.Contains(out.Output, "started") {
		t.Fatalf("outcome %+v, %v", out, err)
	}
}

func TestTheOutputKeptIsItsTail(t *testing.T) {
	tl := &tail{limit: 4}
	tl.Write([]byte("abc"))
	tl.Write([]byte("defg"))
	if got := tl.String(); !strings.HasSuffix(got, "\ndefg") || !strings.HasPrefix(got, "[... output cut") {
		t.Fatalf("tail %q", got)
	}
}

func TestAnEntryBelongsToItsTargetOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		n    uint64
		ok   bool
	}{
		{"queue/main/00000000000000000007", 7, true},
		{"queue/main/x/00000000000000000007", 0, false}, // target main/x's entry
		{"queue/main/7", 0, false},
		{"queue/mainline/00000000000000000007", 0, false},
		{"queue-done/main/00000000000000000007", 0, false},
	} {
		n, ok := entryNumber(c.name, PendingPrefix, "main")
		if n != c.n || ok != c.ok {
			t.Errorf("entryNumber(%q) = %d, %v; want %d, %v", c.name, n, ok, c.n, c.ok)
		}
	}
}

// TestConcurrentLandsOnOneHandleAgree: goroutines sharing a store handle
// (as a server's requests do) queue at once; each learns its own outcome.
func TestConcurrentLandsOnOneHandleAgree(t *testing.T) {
	f := newFixture(t)
	const n = 6
	ids := make([]core.ID, n)
	for i := range ids {
		files := []string{fmt.Sprintf("f%d.txt", i), "x\n"}
		if i == 3 {
			files = append(files, "BAD", "x\n")
		}
		ids[i] = f.change(files...)
	}
	errs := make(chan error, n)
	for i := range ids {
		go func() {
			out, err := Land(f.s, ids[i], "main", f.opts())
			switch {
			case i == 3 && !errors.Is(err, ErrCheckFailed):
				errs <- fmt.Errorf("the breaker: %+v, %v", out, err)
			case i != 3 && (err != nil || !out.Landed):
				errs <- fmt.Errorf("change %d: %+v, %v", i, out, err)
			default:
				errs <- nil
			}
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := len(f.files()); got != n {
		t.Fatalf("main holds %d files, want %d", got, n)
	}
	f.assertOnlyCheckedTrees()
}

// TestAQueuedMoveRecordsTheAgentOfItsChange: with no Options.Agent, the
// move that lands a change records the change's agent, as a plain land
// does, so the operation log finds an agent's lands.
func TestAQueuedMoveRecordsTheAgentOfItsChange(t *testing.T) {
	f := newFixture(t)
	c, err := f.s.Commit(core.CommitRequest{Parents: []core.ID{f.main}, Agent: "agent-5",
		Changes: []core.Change{{Path: "a.txt", Data: []byte("a\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Land(f.s, c, "main", f.opts()); err != nil {
		t.Fatal(err)
	}
	sn, err := f.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	moves, err := sn.RefLog("main")
	if err != nil {
		t.Fatal(err)
	}
	if last := moves[len(moves)-1]; last.New != c || last.Agent != "agent-5" {
		t.Fatalf("main's last move: to %s by %q, want to %s by agent-5", last.New, last.Agent, c)
	}
}
