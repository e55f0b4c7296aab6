package faultfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
)

// Fault is the error a Rule injects.
type Fault uint8

// The faults.
const (
	FaultNone     Fault = iota // no error: a latency-only rule
	FaultEIO                   // the call fails with EIO
	FaultENOSPC                // the call fails with ENOSPC
	FaultShort                 // a write stores the first half of its bytes, then fails (io.ErrShortWrite)
	FaultSyncFail              // a sync (Sync, Datasync, SyncDir) fails with EIO without syncing
	// FaultENOENT: the call fails with ENOENT, as it does when another
	// process unlinks a name between its lookup and the call (a FUSE
	// filesystem does lookup and open as two requests).
	FaultENOENT
)

var faultNames = map[string]Fault{"none": FaultNone, "eio": FaultEIO, "enospc": FaultENOSPC,
	"short": FaultShort, "syncfail": FaultSyncFail, "enoent": FaultENOENT}

func (f Fault) String() string {
	for k, v := range faultNames {
		if v == f {
			return k
		}
	}
	return fmt.Sprintf("fault(%d)", uint8(f))
}

func (f Fault) cause() error {
	switch f {
	case FaultENOSPC:
		return syscall.ENOSPC
	case FaultShort:
		return io.ErrShortWrite
	case FaultENOENT:
		return syscall.ENOENT
	}
	return syscall.EIO
}

// Rule says which calls fail and how.
//
// A call matches when its Op equals Op (OpAny: every Op; a FaultShort rule
// matches only writes and a FaultSyncFail rule only syncs) and its path, or
// the second path of Rename and Link, matches the glob Path ("" matches all).
// In a glob, '*' matches any run of characters including '/', '?' one
// character; everything else matches itself.
//
// Matching calls are numbered from 1 per rule. Without Prob, the call
// numbered Nth fires (Nth 0 means 1), and with Persistent every call from the
// Nth on fires. With Prob, every matching call from the Nth on fires with
// probability Prob, drawn from a generator seeded with Seed. A firing rule
// sleeps Latency, then fails the call with Err (FaultNone: the call goes on).
// The first firing rule with an error decides the call's error.
type Rule struct {
	Op         Op
	Path       string
	Nth        int64
	Prob       float64
	Seed       int64
	Err        Fault
	Latency    time.Duration
	Persistent bool
}

func (r *Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op=%s", r.Op)
	if r.Path != "" {
		fmt.Fprintf(&b, ",path=%s", r.Path)
	}
	if r.Nth != 0 {
		fmt.Fprintf(&b, ",nth=%d", r.Nth)
	}
	if r.Prob != 0 {
		fmt.Fprintf(&b, ",prob=%g,seed=%d", r.Prob, r.Seed)
	}
	if r.Err != FaultNone {
		fmt.Fprintf(&b, ",err=%s", r.Err)
	}
	if r.Latency != 0 {
		fmt.Fprintf(&b, ",latency=%s", r.Latency)
	}
	if r.Persistent {
		b.WriteString(",persistent")
	}
	return b.String()
}

// ParseRule reads a rule from its text form, comma-separated fields:
//
//	op=OP          an Op name (String) or "any"; default any
//	path=GLOB      default: every path
//	nth=N          positive integer; default 1
//	prob=P         0 < P <= 1
//	seed=S         integer seed for prob
//	err=E          eio, enospc, short, syncfail, enoent or none
//	latency=D      a Go duration, e.g. 5ms
//	persistent     every matching call from the Nth on fires
//
// For example "op=datasync,path=*/seg-*,nth=3,err=eio,persistent". A rule
// must inject an error or a latency. Any malformed field is an error that
// names it.
func ParseRule(s string) (Rule, error) {
	r := Rule{Op: OpAny}
	bad := func(field, val, want string) (Rule, error) {
		return Rule{}, fmt.Errorf("faultfs: rule %q: field %s: %q is not %s", s, field, val, want)
	}
	hasErr := false
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		key, val, hasVal := strings.Cut(f, "=")
		if seen[key] {
			return Rule{}, fmt.Errorf("faultfs: rule %q: field %s given twice", s, key)
		}
		seen[key] = true
		switch key {
		case "op":
			op, err := ParseOp(val)
			if err != nil {
				return bad(key, val, "an op name (open, write, datasync, syncdir, … or any)")
			}
			r.Op = op
		case "path":
			if val == "" {
				return bad(key, val, "a non-empty glob")
			}
			r.Path = val
		case "nth":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				return bad(key, val, "a positive integer")
			}
			r.Nth = n
		case "prob":
			p, err := strconv.ParseFloat(val, 64)
			if err != nil || !(p > 0 && p <= 1) {
				return bad(key, val, "a probability in (0, 1]")
			}
			r.Prob = p
		case "seed":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return bad(key, val, "an integer")
			}
			r.Seed = n
		case "err":
			fault, ok := faultNames[val]
			if !ok {
				return bad(key, val, "one of eio, enospc, short, syncfail, enoent, none")
			}
			r.Err = fault
			hasErr = true
		case "latency":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return bad(key, val, "a positive duration such as 5ms")
			}
			r.Latency = d
		case "persistent":
			if hasVal {
				return bad(key, val, "empty (persistent is a flag)")
			}
			r.Persistent = true
		case "":
			return Rule{}, fmt.Errorf("faultfs: rule %q: empty field", s)
		default:
			return Rule{}, fmt.Errorf("faultfs: rule %q: unknown field %q (want op, path, nth, prob, seed, err, latency, persistent)", s, key)
		}
	}
	if err := r.validate(); err != nil {
		return Rule{}, fmt.Errorf("faultfs: rule %q: %w", s, err)
	}
	if !hasErr && r.Latency == 0 {
		return Rule{}, fmt.Errorf("faultfs: rule %q: field err: missing (a rule needs err= or latency=)", s)
	}
	return r, nil
}

// MustParseRule is ParseRule for a rule written into a test or benchmark:
// it panics if s is malformed, as regexp.MustCompile does, so a typo in a
// literal rule fails the run that holds it instead of injecting nothing.
func MustParseRule(s string) Rule {
	r, err := ParseRule(s)
	if err != nil {
		panic(err)
	}
	return r
}

func (r *Rule) validate() error {
	switch {
	case r.Err == FaultShort && r.Op != OpAny && r.Op != OpWrite:
		return fmt.Errorf("field err: short applies to writes, not op=%s", r.Op)
	case r.Err == FaultSyncFail && r.Op != OpAny && !r.Op.Is(KindSync):
		return fmt.Errorf("field err: syncfail applies to sync, datasync or syncdir, not op=%s", r.Op)
	case r.Nth < 0:
		return fmt.Errorf("field nth: %d is negative", r.Nth)
	case r.Prob < 0 || r.Prob > 1:
		return fmt.Errorf("field prob: %g is outside [0, 1]", r.Prob)
	case r.Latency < 0:
		return fmt.Errorf("field latency: %s is negative", r.Latency)
	}
	return nil
}

func (r *Rule) matches(op Op, path, to string) bool {
	switch {
	case r.Err == FaultShort && op != OpWrite:
		return false
	case r.Err == FaultSyncFail && !op.Is(KindSync):
		return false
	case r.Op != OpAny && r.Op != op:
		return false
	case r.Path == "":
		return true
	}
	return Glob(r.Path, path) || to != "" && Glob(r.Path, to)
}

// Glob reports whether name matches pattern, where '*' matches any run of
// characters (including '/') and '?' any one character.
func Glob(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// InjectedError is the cause of an injected failure. Each injection has its
// own *InjectedError, so errors.Is tells whether a given error carries a
// given injection. It unwraps to the errno (or io.ErrShortWrite), so
// errors.Is(err, syscall.EIO) holds too.
type InjectedError struct {
	Rule  int   // index of the rule in NewInjecting's list
	Call  int64 // 1-based number of the call among all calls of the wrapper
	Fault Fault
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultfs: injected %s (rule %d, call %d): %v", e.Fault, e.Rule, e.Call, e.Fault.cause())
}

// Unwrap returns the errno the fault stands for.
func (e *InjectedError) Unwrap() error { return e.Fault.cause() }

// Injection records one injected failure.
type Injection struct {
	Err      *InjectedError
	Op       Op
	Path     string
	Surfaced bool
}

// Injecting fails calls chosen by rules.
//
// An injection is surfaced once an error that wraps its *InjectedError
// (errors.Is) has been handed to Check: the test passes every error it got
// from the code under test to Check, so an injection the code swallowed,
// or replaced by an error that does not wrap it, stays unsurfaced and
// Unsurfaced reports it.
type Injecting struct {
	wrapFS
	mu    sync.Mutex
	rules []ruleState
	calls int64
	inj   []*Injection
}

type ruleState struct {
	Rule
	n   int64
	rng *rand.Rand
}

// NewInjecting wraps inner with rules, applied in order.
func NewInjecting(inner vfs.FS, rules ...Rule) *Injecting {
	in := &Injecting{}
	for _, r := range rules {
		in.rules = append(in.rules, ruleState{Rule: r,
			rng: rand.New(rand.NewPCG(uint64(r.Seed), 0x1a7e_c7ed))})
	}
	in.wrapFS = wrapFS{inner: inner, before: in.before}
	return in
}

func (in *Injecting) before(op Op, path, to string) error {
	in.mu.Lock()
	in.calls++
	call := in.calls
	var fired *InjectedError
	var sleep time.Duration
	for i := range in.rules {
		r := &in.rules[i]
		if !r.matches(op, path, to) {
			continue
		}
		r.n++
		nth := r.Nth
		if nth == 0 {
			nth = 1
		}
		var fire bool
		switch {
		case r.Prob > 0:
			fire = r.n >= nth && r.rng.Float64() < r.Prob
		case r.Persistent:
			fire = r.n >= nth
		default:
			fire = r.n == nth
		}
		if !fire {
			continue
		}
		sleep += r.Latency
		if r.Err != FaultNone && fired == nil {
			fired = &InjectedError{Rule: i, Call: call, Fault: r.Err}
			in.inj = append(in.inj, &Injection{Err: fired, Op: op, Path: path})
		}
	}
	in.mu.Unlock()
	if sleep > 0 {
		time.Sleep(sleep)
	}
	if fired == nil {
		return nil
	}
	err := perr(op.String(), path, fired)
	if fired.Fault == FaultShort {
		return &shortWrite{err: err}
	}
	return err
}

// Check marks as surfaced every injection err carries and reports whether
// it carried any.
func (in *Injecting) Check(err error) bool {
	if err == nil {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	any := false
	for _, j := range in.inj {
		if errors.Is(err, j.Err) {
			j.Surfaced = true
			any = true
		}
	}
	return any
}

// Injections returns a copy of every injection so far.
func (in *Injecting) Injections() []Injection {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]Injection, len(in.inj))
	for i, j := range in.inj {
		out[i] = *j
	}
	return out
}

// Unsurfaced returns the injections no error passed to Check carried.
func (in *Injecting) Unsurfaced() []Injection {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Injection
	for _, j := range in.inj {
		if !j.Surfaced {
			out = append(out, *j)
		}
	}
	return out
}
