package faultfs_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// commit performs the call sequence of a tiny durable append: open, write,
// datasync, close. It returns the first error.
func commit(f vfs.FS, name string) error {
	h, err := f.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := h.WriteAt([]byte("frame"), 0); err != nil {
		h.Close()
		return err
	}
	if err := vfs.Datasync(h); err != nil {
		h.Close()
		return err
	}
	return h.Close()
}

func TestCountingCountsEveryCallByOpAndPath(t *testing.T) {
	c := faultfs.NewCounting(faultfs.NewMem())
	c.StartTrace()
	if err := commit(c, "/j"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	want := map[faultfs.Op]int64{faultfs.OpCreate: 1, faultfs.OpWrite: 1, faultfs.OpDatasync: 1,
		faultfs.OpClose: 1, faultfs.OpSyncDir: 1}
	got := c.Snapshot()
	if len(got) != len(want) {
		t.Errorf("Snapshot: got %v, want %v", got, want)
	}
	for op, n := range want {
		if got[op] != n || c.Count(op) != n {
			t.Errorf("count of %s: got %d (Count %d), want %d", op, got[op], c.Count(op), n)
		}
	}
	if n := c.CountKind(faultfs.KindSync); n != 2 {
		t.Errorf("CountKind(sync): got %d, want 2", n)
	}
	if n := c.PathCount(faultfs.OpAny, "/j"); n != 4 {
		t.Errorf("PathCount(any, /j): got %d, want 4", n)
	}
	tr := c.Trace()
	var ops []string
	for i, call := range tr {
		ops = append(ops, call.Op.String())
		if call.N != int64(i+1) {
			t.Errorf("trace[%d].N = %d, want %d", i, call.N, i+1)
		}
	}
	if s := strings.Join(ops, " "); s != "create write datasync close syncdir" {
		t.Errorf("trace: got %q", s)
	}
	c.Reset()
	if c.Total() != 0 || len(c.Snapshot()) != 0 || len(c.Trace()) != 0 {
		t.Errorf("after Reset: total %d, snapshot %v, trace %v", c.Total(), c.Snapshot(), c.Trace())
	}
}

// TestCrashingFreezesState checks that call n and every later call fail
// with ErrCrashed and never reach the inner filesystem.
func TestCrashingFreezesState(t *testing.T) {
	m := faultfs.NewMem()
	c := faultfs.NewCrashing(m, 3) // create, write, then the datasync crashes
	err := commit(c, "/j")
	if !errors.Is(err, vfs.ErrCrashed) {
		t.Fatalf("commit: got %v, want ErrCrashed", err)
	}
	if !c.Crashed() || c.Calls() != 4 { // create, write, datasync (crashed), close (crashed)
		t.Errorf("Crashed %v Calls %d, want true 4", c.Crashed(), c.Calls())
	}
	if err := c.Remove("/j"); !errors.Is(err, vfs.ErrCrashed) {
		t.Errorf("call after the crash: got %v, want ErrCrashed", err)
	}
	if _, err := m.Stat("/j"); err != nil {
		t.Errorf("the Remove after the crash reached the inner FS: %v", err)
	}
	// The datasync never happened: a strict clone of the inner state has no data.
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	st, err := m.CrashClone(faultfs.Strict, 1).Stat("/j")
	if err != nil || st.Size() != 0 {
		t.Errorf("strict clone after crash at datasync: %v, size %v; want an empty file", err, st)
	}
	if n := faultfs.NewCrashing(m, 0); commit(n, "/k") != nil || n.Crashed() {
		t.Errorf("NewCrashing(n=0) must never crash")
	}
}

func TestInjectingNthAndPersistent(t *testing.T) {
	for _, c := range []struct {
		rule string
		want string // per call of 5 datasyncs: . ok, x failed
	}{
		{"op=datasync,nth=3,err=eio", "..x.."},
		{"op=datasync,nth=3,err=eio,persistent", "..xxx"},
		{"op=datasync,err=enospc", "x...."},
		{"op=datasync,path=/other*,err=eio,persistent", "....."},
		{"op=sync,err=eio,persistent", "....."}, // Datasync is not Sync
		{"err=syncfail,persistent,nth=5", "....x"},
	} {
		in := faultfs.NewInjecting(faultfs.NewMem(), faultfs.MustParseRule(c.rule))
		f, err := in.Create("/seg-1")
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for i := 0; i < 5; i++ {
			if err := vfs.Datasync(f); err != nil {
				got.WriteByte('x')
				in.Check(err)
			} else {
				got.WriteByte('.')
			}
		}
		if got.String() != c.want {
			t.Errorf("rule %q: got %s, want %s", c.rule, got.String(), c.want)
		}
		if u := in.Unsurfaced(); len(u) != 0 {
			t.Errorf("rule %q: unsurfaced after Check: %v", c.rule, u)
		}
	}
}

func TestInjectedErrorsWrapErrnoAndPathError(t *testing.T) {
	in := faultfs.NewInjecting(faultfs.NewMem(), faultfs.MustParseRule("op=create,path=*/seg-*,err=enospc"))
	_, err := in.Create("/store/journal/seg-000001")
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("got %v, want ENOSPC", err)
	}
	var ie *faultfs.InjectedError
	if !errors.As(err, &ie) || ie.Call != 1 || ie.Rule != 0 {
		t.Errorf("got %#v, want an *InjectedError of rule 0 at call 1", ie)
	}
}

func TestInjectingShortWrite(t *testing.T) {
	m := faultfs.NewMem()
	in := faultfs.NewInjecting(m, faultfs.MustParseRule("err=short"))
	f, err := in.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.Write([]byte("abcdefgh"))
	if n != 4 || !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("short write: got %d, %v; want 4, io.ErrShortWrite", n, err)
	}
	if st, _ := m.Stat("/f"); st.Size() != 4 {
		t.Errorf("inner file size after short write: got %d, want 4", st.Size())
	}
	if n, err := f.Write([]byte("ij")); n != 2 || err != nil {
		t.Errorf("second write: got %d, %v; want 2, nil", n, err)
	}
}

// TestUnsurfacedReportsSwallowedErrors checks the surfacing contract: an
// injected error counts as surfaced only if an error wrapping it reaches
// Check.
func TestUnsurfacedReportsSwallowedErrors(t *testing.T) {
	in := faultfs.NewInjecting(faultfs.NewMem(), faultfs.MustParseRule("op=datasync,err=eio,persistent"))
	f, _ := in.Create("/f")
	swallowed := vfs.Datasync(f) // a buggy caller drops this one
	_ = swallowed
	replaced := vfs.Datasync(f)
	in.Check(errors.New("store: sync failed")) // lost the cause: not surfaced
	wrapped := vfs.Datasync(f)
	if !in.Check(errors.Join(errors.New("store: commit"), wrapped)) {
		t.Errorf("Check of a wrapped injected error returned false")
	}
	_ = replaced
	u := in.Unsurfaced()
	if len(u) != 2 || u[0].Err.Call != 2 || u[1].Err.Call != 3 {
		t.Errorf("Unsurfaced: got %+v, want the injections at calls 2 and 3", u)
	}
	if all := in.Injections(); len(all) != 3 || !all[2].Surfaced {
		t.Errorf("Injections: got %+v", all)
	}
}

func TestInjectingProbabilityIsSeeded(t *testing.T) {
	run := func(seed string) string {
		in := faultfs.NewInjecting(faultfs.NewMem(), faultfs.MustParseRule("op=stat,prob=0.5,err=eio,seed="+seed))
		var b strings.Builder
		for i := 0; i < 40; i++ {
			if _, err := in.Stat("/"); err != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b, c := run("1"), run("1"), run("2")
	if a != b {
		t.Errorf("same seed, different failures:\n%s\n%s", a, b)
	}
	if a == c || !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("seeds 1 and 2 give %s and %s, want two different mixes", a, c)
	}
}

func TestInjectingLatency(t *testing.T) {
	in := faultfs.NewInjecting(faultfs.NewMem(), faultfs.MustParseRule("op=bootid,latency=20ms,persistent"))
	start := time.Now()
	if _, err := in.BootID(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("latency rule: call took %v, want >= 20ms", d)
	}
}

func TestParseRuleNamesTheBadField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"op=fsync,err=eio", "field op"},
		{"op=write,nth=0,err=eio", "field nth"},
		{"op=write,nth=x,err=eio", "field nth"},
		{"prob=1.5,err=eio", "field prob"},
		{"seed=abc,err=eio", "field seed"},
		{"err=boom", "field err"},
		{"op=write", "field err: missing"},
		{"latency=fast", "field latency"},
		{"op=write,err=eio,persistent=yes", "field persistent"},
		{"op=write,err=eio,colour=red", `unknown field "colour"`},
		{"op=read,err=short", "field err: short applies to writes"},
		{"op=write,err=syncfail", "field err: syncfail applies"},
		{"op=write,op=read,err=eio", "field op given twice"},
		{"op=write,,err=eio", "empty field"},
		{"path,err=eio", "field path"},
		{"nth,err=eio", "field nth"},
	} {
		_, err := faultfs.ParseRule(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseRule(%q): got %v, want an error containing %q", c.in, err, c.want)
		}
	}
	r := faultfs.MustParseRule("op=datasync,path=*/seg-*,nth=3,err=eio,persistent")
	if r.String() != "op=datasync,path=*/seg-*,nth=3,err=eio,persistent" {
		t.Errorf("String: got %q", r.String())
	}
	if again, err := faultfs.ParseRule(r.String()); err != nil || again != r {
		t.Errorf("round trip: got %+v, %v; want %+v", again, err, r)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParseRule of a malformed rule did not panic")
		}
	}()
	faultfs.MustParseRule("op=datasync")
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, n string
		want bool
	}{
		{"*/seg-*", "/s/journal/seg-01", true},
		{"*/seg-*", "/s/journal/segx", false},
		{"/s/?", "/s/a", true},
		{"/s/?", "/s/ab", false},
		{"*", "", true},
		{"a*b*c", "a/x/b/y/c", true},
		{"a*b*c", "a/x/b/y/d", false},
	} {
		if got := faultfs.Glob(c.p, c.n); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.p, c.n, got, c.want)
		}
	}
}

func TestOpNamesRoundTrip(t *testing.T) {
	for _, op := range faultfs.Ops() {
		got, err := faultfs.ParseOp(op.String())
		if err != nil || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
		if op.Kind() == 0 {
			t.Errorf("op %s has no kind", op)
		}
	}
}

const crashChildEnv = "SWARMOPS_FAULTFS_CRASH_CHILD"

// TestCrashExitChild is not a test: it is the subprocess of
// TestCrashAtFromEnvExits.
func TestCrashExitChild(t *testing.T) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("subprocess only")
	}
	f, err := faultfs.CrashAtFromEnv(faultfs.NewMem())
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(2)
	}
	for i := 1; i <= 10; i++ {
		os.Stdout.WriteString("call\n")
		f.Stat("/")
	}
	os.Stdout.WriteString("finished\n")
	os.Exit(0)
}

func TestCrashAtFromEnvExits(t *testing.T) {
	run := func(val string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashExitChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"=1", faultfs.CrashAtEnv+"="+val)
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("4")
	if code != faultfs.CrashExitStatus || strings.Count(out, "call\n") != 4 || strings.Contains(out, "finished") {
		t.Errorf("CRASH_AT=4: exit %d, output %q; want exit %d after the 4th call", code, out, faultfs.CrashExitStatus)
	}
	out, code = run("")
	if code != 0 || !strings.Contains(out, "finished") {
		t.Errorf("CRASH_AT empty: exit %d, output %q; want a normal finish", code, out)
	}
	for _, bad := range []string{"x", "0", "-3", "1.5"} {
		out, code = run(bad)
		if code != 2 || !strings.Contains(out, faultfs.CrashAtEnv) {
			t.Errorf("CRASH_AT=%q: exit %d, output %q; want an error naming %s", bad, code, out, faultfs.CrashAtEnv)
		}
	}
}

// TestMemFSRefusesAbsurdSizes checks that offsets from a corrupt file
// cannot make MemFS allocate without bound: it answers EFBIG, as a real
// filesystem does past its size limit.
func TestMemFSRefusesAbsurdSizes(t *testing.T) {
	f, err := faultfs.NewMem().Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 1<<62); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("WriteAt at 2^62: got %v, want EFBIG", err)
	}
	if err := f.Truncate(1 << 62); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("Truncate to 2^62: got %v, want EFBIG", err)
	}
	if err := vfs.Allocate(f, 1<<62, 1<<62); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("Allocate overflowing int64: got %v, want EFBIG", err)
	}
	if _, err := f.WriteAt([]byte("x"), faultfs.MaxFileSize-1); err != nil {
		t.Errorf("WriteAt just below MaxFileSize: %v", err)
	}
}

// TestMemFSSparseHugeFileIsCheap checks that a write near MaxFileSize and
// a truncate back to zero cost work proportional to the data, not to the
// offset (the dirty-sector set and page table are sparse).
func TestMemFSSparseHugeFileIsCheap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := faultfs.NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("far"), faultfs.MaxFileSize-3); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	m.CrashClone(faultfs.Torn, 1)
	runtime.ReadMemStats(&after)
	// The page table of a 1 TiB sparse file is 2^20 chunk pointers (8 MiB,
	// copied a few times); a dense dirty bitmap alone would be 256 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("allocated %d MiB for one far write and a truncate, want < 64 MiB", got>>20)
	}
}
