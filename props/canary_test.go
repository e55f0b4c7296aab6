package props

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

var (
	runtimeGoexit = runtime.Goexit
	lookupEnv     = os.LookupEnv
)

// recordingTB is a rapid.TB that records a property's failure instead of
// failing the test, so that a canary test can demand that a property fails
// against a deliberately broken variant and show the shrunk counterexample.
type recordingTB struct {
	name   string
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (r *recordingTB) Helper()      {}
func (r *recordingTB) Name() string { return r.name }
func (r *recordingTB) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, format+"\n", args...)
}
func (r *recordingTB) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(&r.log, args...)
}
func (r *recordingTB) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recordingTB) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recordingTB) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }
func (r *recordingTB) Fatal(args ...any)                 { r.Error(args...); r.FailNow() }
func (r *recordingTB) Skipf(format string, args ...any)  { r.Logf(format, args...); r.SkipNow() }
func (r *recordingTB) Skip(args ...any)                  { r.Log(args...); r.SkipNow() }
func (r *recordingTB) SkipNow()                          { panic("props: rapid skipped a whole canary check") }
func (r *recordingTB) FailNow()                          { r.Fail(); runtimeGoexit() }
func (r *recordingTB) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// expectFailure runs prop (the property under a broken variant) with rapid
// and fails t unless rapid finds a counterexample. rapid's report, the
// shrunk counterexample included, is logged only if t fails anyway (see
// logOnFailure). No fail file is written: a canary's failure is the
// expected outcome, not a regression to replay.
func expectFailure(t *testing.T, checks int, what string, prop func(*rapid.T)) {
	t.Helper()
	scale, err := parseScale(lookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	restore := setFlags(t, map[string]string{
		"rapid.checks":     fmt.Sprint(checks * scale),
		"rapid.nofailfile": "true",
		"rapid.shrinktime": "10s",
	})
	defer restore()
	rec := &recordingTB{name: t.Name()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(rec, prop)
	}()
	<-done
	if !rec.Failed() {
		t.Fatalf("the property passed against %s; it cannot catch what it claims to", what)
	}
	// "flaky" counts: the property failed, but the shrunk replay did not,
	// because a store draws a random store id and epoch at Create, so a
	// replayed history writes different bytes (and a torn clone of them
	// keeps different garbage).
	if out := rec.log.String(); !strings.Contains(out, "[rapid] failed") && !strings.Contains(out, "[rapid] panic") && !strings.Contains(out, "[rapid] flaky test") {
		t.Fatalf("against %s rapid failed without a counterexample:\n%s", what, out)
	}
	logOnFailure(t, "as required, the property failed against %s; rapid's report:\n%s", what, rec.log.String())
}

// logOnFailure logs what a canary caught only if t fails: in a passing run
// a report that reads "failed" and "To reproduce" would look like a
// failure, while in a failing one it shows what the canaries did catch.
func logOnFailure(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(msg)
		}
	})
}

// setFlags sets flags for the duration of one test and returns a function
// that restores them.
func setFlags(t *testing.T, vals map[string]string) func() {
	t.Helper()
	old := map[string]string{}
	for name, v := range vals {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("flag -%s is not registered", name)
		}
		old[name] = f.Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatalf("setting -%s=%s: %v", name, v, err)
		}
	}
	return func() {
		for name, v := range old {
			_ = flag.Set(name, v)
		}
	}
}
