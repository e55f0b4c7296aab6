package faultfs

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/vfs"
)

// Crashing simulates a crash inside the process: call n (1-based, counting
// every call as Counting numbers them) and every later call fail with an
// error wrapping vfs.ErrCrashed and never reach the inner FS, so the inner
// state is frozen as it was just before call n. Take a CrashClone of the
// inner MemFS afterwards to see what the crash left.
type Crashing struct {
	wrapFS
	n       int64
	calls   atomic.Int64
	crashed atomic.Bool
}

// NewCrashing wraps inner so that call n and later calls crash. n <= 0
// never crashes (the wrapper then only counts calls).
func NewCrashing(inner vfs.FS, n int64) *Crashing {
	c := &Crashing{n: n}
	c.wrapFS = wrapFS{inner: inner, before: c.before}
	return c
}

func (c *Crashing) before(op Op, path, to string) error {
	k := c.calls.Add(1)
	if c.n > 0 && k >= c.n {
		c.crashed.Store(true)
		return perr(op.String(), path, vfs.ErrCrashed)
	}
	return nil
}

// Calls returns how many calls were made, including crashed ones.
func (c *Crashing) Calls() int64 { return c.calls.Load() }

// Crashed reports whether the crash point was reached.
func (c *Crashing) Crashed() bool { return c.crashed.Load() }

// CrashAtEnv names the environment variable read by CrashAtFromEnv.
const CrashAtEnv = "SWARMOPS_TEST_CRASH_AT"

// CrashExitStatus is the exit status of a process killed by a CrashExit
// wrapper. It is distinct from every status the CLI uses and from a signal
// death (128+n), so a test can tell a simulated crash from a real failure.
const CrashExitStatus = 197

// CrashExit makes the process exit at once with CrashExitStatus at call n,
// before the call reaches the inner FS, as a SIGKILL would: no deferred
// function runs and nothing is written or flushed. It is a Crashing whose
// crash ends the process, so a call racing call n from another goroutine
// does not reach the inner FS either.
type CrashExit struct {
	Crashing
}

// NewCrashExit wraps inner so that call n (1-based) ends the process. n <= 0
// never does.
func NewCrashExit(inner vfs.FS, n int64) *CrashExit {
	c := &CrashExit{Crashing{n: n}}
	c.wrapFS = wrapFS{inner: inner, before: c.before}
	return c
}

func (c *CrashExit) before(op Op, path, to string) error {
	if c.Crashing.before(op, path, to) != nil {
		os.Exit(CrashExitStatus)
	}
	return nil
}

var crashAtEnv = sync.OnceValues(func() (int64, error) {
	v, ok := os.LookupEnv(CrashAtEnv)
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("faultfs: %s=%q: want a positive call number (1-based) or empty", CrashAtEnv, v)
	}
	return n, nil
})

// CrashAtFromEnv reads SWARMOPS_TEST_CRASH_AT (once per process). Empty or
// unset returns inner unchanged; a positive integer N returns a CrashExit
// wrapper that ends the process at call N; anything else is an error naming
// the variable, never a silent default.
func CrashAtFromEnv(inner vfs.FS) (vfs.FS, error) {
	n, err := crashAtEnv()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return inner, nil
	}
	return NewCrashExit(inner, n), nil
}
