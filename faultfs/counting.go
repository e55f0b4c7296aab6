package faultfs

import (
	"sync"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/vfs"
)

// Counting counts every call by Op and by path and can record the call
// trace. It feeds the deterministic cost tests ("one data sync per commit")
// and crash-point enumeration. It never changes a call.
type Counting struct {
	wrapFS
	n      atomic.Int64
	counts [numOps]atomic.Int64

	// readBytes is the bytes every read returned, readPaths per path.
	readBytes atomic.Int64

	mu        sync.Mutex
	paths     map[pathKey]int64
	readPaths map[string]int64
	tracing   bool
	trace     []Call
}

type pathKey struct {
	op   Op
	path string
}

// Call is one traced call. N is its 1-based sequence number among every
// call the Counting has seen since it was made or Reset, the same numbering
// Crashing uses, so a trace names the crash points.
type Call struct {
	Op   Op
	Path string
	To   string // the second path of Rename and Link
	N    int64
}

// NewCounting wraps inner.
func NewCounting(inner vfs.FS) *Counting {
	c := &Counting{paths: map[pathKey]int64{}, readPaths: map[string]int64{}}
	c.wrapFS = wrapFS{inner: inner, before: c.before, read: c.sawBytes}
	return c
}

func (c *Counting) sawBytes(path string, n int) {
	c.readBytes.Add(int64(n))
	c.mu.Lock()
	c.readPaths[path] += int64(n)
	c.mu.Unlock()
}

// BytesRead returns how many bytes the reads of files returned.
func (c *Counting) BytesRead() int64 { return c.readBytes.Load() }

// PathBytesRead returns how many bytes the reads of the file at path (named
// as the caller named it) returned.
func (c *Counting) PathBytesRead(path string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readPaths[path]
}

func (c *Counting) before(op Op, path, to string) error {
	n := c.n.Add(1)
	c.counts[op].Add(1)
	c.mu.Lock()
	c.paths[pathKey{op, path}]++
	if c.tracing {
		c.trace = append(c.trace, Call{Op: op, Path: path, To: to, N: n})
	}
	c.mu.Unlock()
	return nil
}

// Count returns how many calls of op were made.
func (c *Counting) Count(op Op) int64 {
	if op >= numOps {
		return 0
	}
	return c.counts[op].Load()
}

// CountKind returns how many calls of any Op of kind k were made.
func (c *Counting) CountKind(k Kind) int64 {
	var t int64
	for op := Op(0); op < numOps; op++ {
		if op.Is(k) {
			t += c.counts[op].Load()
		}
	}
	return t
}

// Total returns how many calls were made.
func (c *Counting) Total() int64 { return c.n.Load() }

// PathCount returns how many calls of op (OpAny: of every op) were made on
// path, named as the caller named it.
func (c *Counting) PathCount(op Op, path string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op != OpAny {
		return c.paths[pathKey{op, path}]
	}
	var t int64
	for k, v := range c.paths {
		if k.path == path {
			t += v
		}
	}
	return t
}

// Paths returns the number of calls per path.
func (c *Counting) Paths() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int64{}
	for k, v := range c.paths {
		m[k.path] += v
	}
	return m
}

// Snapshot returns the counts of every Op called at least once.
func (c *Counting) Snapshot() map[Op]int64 {
	m := map[Op]int64{}
	for op := Op(0); op < numOps; op++ {
		if v := c.counts[op].Load(); v != 0 {
			m[op] = v
		}
	}
	return m
}

// Reset zeroes every count, the sequence numbers and the trace; tracing
// stays on if it was on.
func (c *Counting) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n.Store(0)
	c.readBytes.Store(0)
	clear(c.readPaths)
	for i := range c.counts {
		c.counts[i].Store(0)
	}
	clear(c.paths)
	c.trace = nil
}

// StartTrace starts recording calls (dropping any earlier trace).
func (c *Counting) StartTrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracing = true
	c.trace = nil
}

// StopTrace stops recording; Trace still returns what was recorded.
func (c *Counting) StopTrace() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tracing = false
}

// Trace returns a copy of the recorded calls in order.
func (c *Counting) Trace() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.trace...)
}
