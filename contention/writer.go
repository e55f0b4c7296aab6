package contention

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// LockFile is the base name of the store's writer lock file, the one lock
// whose waits C8 bounds. The sync and checkpoint locks are not timed.
const LockFile = "LOCK"

// Writer workloads (WriterConfig.Mode).
const (
	// ModeChain commits N changesets, each on the writer's own previous one
	// (the first on WriterConfig.Base, or on nothing).
	ModeChain = "chain"
	// ModeAdvance publishes N changesets onto a shared ref with
	// Commit{Advance}: the changeset and the ref move are one transaction,
	// and a loser's attempt leaves nothing behind.
	ModeAdvance = "advance"
	// ModeRefSet publishes N changesets onto a shared ref with a Commit and
	// then an UpdateRefs CAS: two transactions, and a loser's changeset stays
	// in the store unreferenced.
	ModeRefSet = "refset"
)

// WriterConfig is one writer's workload.
type WriterConfig struct {
	Store       string        // store directory
	ID          int           // writer number, unique in the run
	Mode        string        // ModeChain, ModeAdvance or ModeRefSet
	Count       int           // commits (chain) or publishes (advance, refset)
	Pause       time.Duration // pause between two commits or publishes
	LockTimeout time.Duration // Options.LockTimeout
	Base        core.ID       // parent of the first chain commit (zero: none)
	// Ref is the shared ref the publish modes move. With Refs > 1, publish i
	// moves Ref+"/"+strconv.Itoa((ID+i)%Refs) instead, which keeps each
	// ref's history small enough for the linearizability checker.
	Ref  string
	Refs int
	// RetryBusy makes a Busy operation count and retry; without it the
	// writer stops at the first Busy (the E_BUSY control).
	RetryBusy bool
	// BrokenCAS replaces UpdateRefs's atomic compare-and-swap by a read,
	// a client-side compare and a blind write. It exists only so the
	// linearizability check can be shown to fail; never set it otherwise.
	BrokenCAS bool
	// Ready and Go are the barrier: the writer opens the store, creates
	// Ready, and starts only once Go exists. Empty: no barrier.
	Ready, Go string
	FS        vfs.FS // nil: vfs.OS()
	Sink      *Sink
}

// ErrStoppedBusy is returned by RunWriter when RetryBusy is off and an
// operation failed with core.ErrBusy.
var ErrStoppedBusy = errors.New("contention: writer stopped on Busy")

// TimedFS counts and times the acquisitions of the writer lock made
// through it. Taking the writer lock is a wait in the store's FIFO queue
// (files in lockq/, starting with its guard) and then the flock on LockFile;
// the wait counted runs from the first queue call to LockFile's flock. One
// TimedFS serves one Store handle used by one goroutine at a time, so the
// deltas around a call are that call's own.
type TimedFS struct {
	vfs.FS
	waitNS atomic.Int64
	locks  atomic.Int64
	busy   atomic.Int64
	// queued is when the pending acquisition entered the queue (0: none).
	queued atomic.Int64
	// placed is when the pending acquisition took its ticket (0: none);
	// placing is set between the guard and the ticket.
	placed  atomic.Int64
	placing atomic.Bool
	mu      sync.Mutex
	acq     [][2]int64 // (ticket taken, acquired) of every acquisition so far
}

// NewTimedFS wraps inner.
func NewTimedFS(inner vfs.FS) *TimedFS { return &TimedFS{FS: inner} }

// queueDir is the base name of the store's writer-queue directory, and
// queueGuard that of the lock held while a ticket is taken.
const (
	queueDir   = "lockq"
	queueGuard = "GUARD"
)

// Lock times inner.Lock when name is part of taking the writer lock.
func (t *TimedFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	inQueue := filepath.Base(filepath.Dir(name)) == queueDir
	if !inQueue && filepath.Base(name) != LockFile {
		return t.FS.Lock(name, timeout)
	}
	start := time.Now()
	guard := inQueue && filepath.Base(name) == queueGuard
	switch {
	case guard:
		// Every entry into the queue starts at its guard. The store
		// leaves the queue before its turn when its compare-and-swap has
		// already lost (no acquisition, no Busy), or keeps its place for
		// the retry (core.Options.RetryPlace). A place given up ends
		// that entry, and its times must not carry over to the next one;
		// a kept place takes no new ticket, so the retry's wait and its
		// overtakes count from the first entry's.
		t.queued.Store(start.UnixNano())
		t.placed.Store(0)
	case inQueue:
		t.queued.CompareAndSwap(0, start.UnixNano())
	}
	l, err := t.FS.Lock(name, timeout)
	switch {
	case guard:
		// Holding the guard, the writer takes its ticket.
		t.placing.Store(err == nil)
	case inQueue && t.placing.Swap(false) && err == nil:
		// The first queue lock after the guard is the new ticket's own,
		// taken once NEXT counts it: its place is fixed from here. Not
		// from the guard: until NEXT counts the ticket the queue looks
		// idle, and a lone writer may take LOCK without queueing, as
		// often as it likes while this writer is descheduled between
		// the two (33 overtakes in one default run, against 31 others).
		t.placed.Store(time.Now().UnixNano())
	}
	switch {
	case err == nil && !inQueue:
		from := start.UnixNano()
		if q := t.queued.Swap(0); q != 0 && timeout > 0 {
			from = q
		}
		// The lone-writer fast path (one try, timeout 0) never queued:
		// an entry it follows (one the store left early) is not its wait.
		placed := t.placed.Swap(0)
		if placed == 0 || timeout <= 0 {
			placed = start.UnixNano()
		}
		now := time.Now().UnixNano()
		t.waitNS.Add(now - from)
		t.locks.Add(1)
		t.mu.Lock()
		t.acq = append(t.acq, [2]int64{placed, now})
		t.mu.Unlock()
	case errors.Is(err, vfs.ErrBusy) && timeout <= 0 && !inQueue:
		// The store's lone-writer fast path tried LOCK once; it queues
		// next. Not a Busy the caller sees.
	case errors.Is(err, vfs.ErrBusy):
		t.placed.Store(0)
		if from := t.queued.Swap(0); from != 0 {
			t.waitNS.Add(time.Now().UnixNano() - from)
		} else {
			t.waitNS.Add(int64(time.Since(start)))
		}
		t.busy.Add(1)
	case err != nil:
		t.queued.Store(0)
		t.placed.Store(0)
	}
	return l, err
}

// acquisitions returns the (wait start, acquired) pairs from index i on.
func (t *TimedFS) acquisitions(i int) [][2]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i >= len(t.acq) {
		return nil
	}
	return append([][2]int64(nil), t.acq[i:]...)
}

// Totals returns the lock wait, acquisitions and Busy results so far.
func (t *TimedFS) Totals() (wait time.Duration, locks, busy int64) {
	return time.Duration(t.waitNS.Load()), t.locks.Load(), t.busy.Load()
}

// writer is one running workload.
type writer struct {
	cfg WriterConfig
	st  *core.Store
	tfs *TimedFS
	seq int64
}

// RunWriter opens the store, passes the barrier and runs the workload,
// emitting one record per operation to cfg.Sink. It returns the first error
// that is neither a conflict (publishes retry on the winner) nor, with
// RetryBusy, a Busy.
func RunWriter(cfg WriterConfig) (err error) {
	if cfg.Sink == nil {
		return fmt.Errorf("%w: writer %d has no sink", core.ErrInvalid, cfg.ID)
	}
	inner := cfg.FS
	if inner == nil {
		inner = vfs.OS()
	}
	w := &writer{cfg: cfg, tfs: NewTimedFS(inner)}
	w.st, err = core.Open(cfg.Store, core.Options{FS: w.tfs, LockTimeout: cfg.LockTimeout})
	if err != nil {
		return fmt.Errorf("writer %d: open %s: %w", cfg.ID, cfg.Store, err)
	}
	defer func() {
		if cerr := w.st.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writer %d: close: %w", cfg.ID, cerr)
		}
	}()
	if err := barrier(cfg.Ready, cfg.Go); err != nil {
		return fmt.Errorf("writer %d: %w", cfg.ID, err)
	}
	if err := cfg.Sink.Emit(Record{Ev: EvGo, W: cfg.ID, Start: time.Now().UnixNano()}); err != nil {
		return err
	}
	switch cfg.Mode {
	case ModeChain:
		err = w.chain()
	case ModeAdvance, ModeRefSet:
		err = w.publishAll()
	default:
		err = fmt.Errorf("%w: writer mode %q", core.ErrInvalid, cfg.Mode)
	}
	if err != nil {
		return err
	}
	return cfg.Sink.Emit(Record{Ev: EvDone, W: cfg.ID, End: time.Now().UnixNano()})
}

// barrier creates ready and waits for goFile. Polling every 200 µs bounds the
// start skew between writers well below one commit.
func barrier(ready, goFile string) error {
	if ready == "" {
		return nil
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	for {
		if _, err := os.Stat(goFile); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("barrier: %w", err)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func hexOrEmpty(id core.ID) string {
	if id.IsZero() {
		return ""
	}
	return id.String()
}

// ParseHexID parses a record's id field (empty = absent).
func ParseHexID(s string) (core.ID, error) {
	if s == "" {
		return core.ID{}, nil
	}
	return objects.ParseID(s)
}

func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, core.ErrBusy):
		return ErrClassBusy
	case errors.Is(err, core.ErrConflict):
		return ErrClassConflict
	default:
		return err.Error()
	}
}

// measured runs op and fills the record's timing and lock fields.
func (w *writer) measured(r *Record, op func() error) error {
	w0, l0, _ := w.tfs.Totals()
	r.Start = time.Now().UnixNano()
	err := op()
	r.End = time.Now().UnixNano()
	w1, l1, _ := w.tfs.Totals()
	r.WaitNS, r.Locks = int64(w1-w0), l1-l0
	r.Acq = w.tfs.acquisitions(int(l0))
	r.Err = errClass(err)
	return err
}

// retryable reports whether err is a Busy the writer may retry, and stops
// the writer on one it may not.
func (w *writer) busy(err error) (retry bool, _ error) {
	if !errors.Is(err, core.ErrBusy) {
		return false, err
	}
	if !w.cfg.RetryBusy {
		return false, fmt.Errorf("writer %d: %w: %w", w.cfg.ID, ErrStoppedBusy, err)
	}
	return true, nil
}

func (w *writer) pause(i int) {
	if w.cfg.Pause > 0 && i+1 < w.cfg.Count {
		time.Sleep(w.cfg.Pause)
	}
}

func (w *writer) change(i, attempt int) []core.Change {
	return []core.Change{{
		Path: fmt.Sprintf("w%03d/i%05d", w.cfg.ID, i),
		Data: []byte(fmt.Sprintf("writer %d item %d attempt %d\n", w.cfg.ID, i, attempt)),
	}}
}

// Message is the commit message of writer w's item i: the key by which the
// checks find each publish exactly once on the shared ref.
func Message(w, i int) string { return fmt.Sprintf("w%03d-i%05d", w, i) }

// commit makes one changeset on parent, retrying Busy.
func (w *writer) commit(i, attempt int, parent core.ID, advance string) (core.ID, error) {
	req := core.CommitRequest{
		Changes: w.change(i, attempt),
		Agent:   "w" + strconv.Itoa(w.cfg.ID),
		Message: Message(w.cfg.ID, i),
		Advance: advance,
	}
	if !parent.IsZero() {
		req.Parents = []core.ID{parent}
	}
	kind := KindCommit
	if advance != "" {
		kind = KindAdvance
	}
	for {
		w.seq++
		r := Record{Ev: EvOp, W: w.cfg.ID, Seq: w.seq, I: i, Kind: kind, Parent: hexOrEmpty(parent), Msg: req.Message}
		if advance != "" {
			r.Ref, r.Old = advance, hexOrEmpty(parent)
			call := r
			call.Ev, call.Start = EvCall, time.Now().UnixNano()
			if err := w.cfg.Sink.Emit(call); err != nil {
				return core.ID{}, err
			}
		}
		var id core.ID
		err := w.measured(&r, func() (err error) {
			id, err = w.st.Commit(req)
			return err
		})
		r.New = hexOrEmpty(id)
		var ce *core.ConflictError
		if errors.As(err, &ce) {
			r.Cur = hexOrEmpty(ce.Current)
		}
		if eerr := w.cfg.Sink.Emit(r); eerr != nil {
			return core.ID{}, eerr
		}
		if err == nil {
			return id, nil
		}
		if retry, err := w.busy(err); !retry {
			return core.ID{}, err
		}
	}
}

func (w *writer) chain() error {
	parent := w.cfg.Base
	for i := 0; i < w.cfg.Count; i++ {
		id, err := w.commit(i, 0, parent, "")
		if err != nil {
			return fmt.Errorf("writer %d commit %d: %w", w.cfg.ID, i, err)
		}
		parent = id
		w.pause(i)
	}
	return nil
}

func (w *writer) refName(i int) string {
	if w.cfg.Refs <= 1 {
		return w.cfg.Ref
	}
	return w.cfg.Ref + "/" + strconv.Itoa((w.cfg.ID+i)%w.cfg.Refs)
}

// read reads a ref from a fresh snapshot, recording it as a history
// operation.
func (w *writer) read(ref string) (core.ID, error) {
	w.seq++
	r := Record{Ev: EvCall, W: w.cfg.ID, Seq: w.seq, Kind: KindRead, Ref: ref, Start: time.Now().UnixNano()}
	if err := w.cfg.Sink.Emit(r); err != nil {
		return core.ID{}, err
	}
	var id core.ID
	err := w.measured(&r, func() (err error) {
		id, err = w.refValue(ref)
		return err
	})
	r.Ev, r.Cur = EvOp, hexOrEmpty(id)
	if eerr := w.cfg.Sink.Emit(r); eerr != nil {
		return core.ID{}, eerr
	}
	return id, err
}

// cas moves ref from old to new, recording the call before it starts, so a
// writer killed in flight leaves an operation of unknown outcome.
func (w *writer) cas(i int, ref string, old, new core.ID) error {
	for {
		w.seq++
		r := Record{Ev: EvCall, W: w.cfg.ID, Seq: w.seq, I: i, Kind: KindCAS, Ref: ref, Old: hexOrEmpty(old), New: hexOrEmpty(new), Start: time.Now().UnixNano()}
		if err := w.cfg.Sink.Emit(r); err != nil {
			return err
		}
		err := w.measured(&r, func() error {
			if w.cfg.BrokenCAS {
				return w.brokenCAS(ref, old, new)
			}
			return w.st.UpdateRefs(core.RefUpdate{Name: ref, Old: old, New: new})
		})
		r.Ev = EvOp
		var ce *core.ConflictError
		if errors.As(err, &ce) {
			r.Cur = hexOrEmpty(ce.Current)
		}
		if eerr := w.cfg.Sink.Emit(r); eerr != nil {
			return eerr
		}
		if err == nil || !errors.Is(err, core.ErrBusy) {
			return err
		}
		if retry, err := w.busy(err); !retry {
			return err
		}
	}
}

// brokenCAS is a check-then-act compare-and-swap: it compares on a snapshot
// and then writes whatever the ref holds by then. Two writers that both see
// old both "win". The sleep widens the window so the race shows on any host.
func (w *writer) brokenCAS(ref string, old, new core.ID) error {
	cur, err := w.refValue(ref)
	if err != nil {
		return err
	}
	if cur != old {
		return &core.ConflictError{Ref: ref, Expected: old, Current: cur}
	}
	time.Sleep(2 * time.Millisecond)
	for {
		cur, err := w.refValue(ref)
		if err != nil {
			return err
		}
		err = w.st.UpdateRefs(core.RefUpdate{Name: ref, Old: cur, New: new})
		if !errors.Is(err, core.ErrConflict) {
			return err
		}
	}
}

// refValue reads ref through a fresh snapshot: its value, or the zero id
// when there is no such ref.
func (w *writer) refValue(ref string) (core.ID, error) {
	sn, err := w.st.Snapshot()
	if err != nil {
		return core.ID{}, err
	}
	id, err := sn.Ref(ref)
	if errors.Is(err, core.ErrNotFound) {
		return core.ID{}, nil
	}
	return id, err
}

// publishAll publishes Count items onto the shared ref(s). Every publish
// lands exactly once: a loser retries on the value the conflict reported.
func (w *writer) publishAll() error {
	for i := 0; i < w.cfg.Count; i++ {
		ref := w.refName(i)
		cur, err := w.read(ref)
		if err != nil {
			return fmt.Errorf("writer %d read %s: %w", w.cfg.ID, ref, err)
		}
		for attempt := 0; ; attempt++ {
			var err error
			if w.cfg.Mode == ModeAdvance {
				_, err = w.commit(i, attempt, cur, ref)
			} else {
				var id core.ID
				id, err = w.commit(i, attempt, cur, "")
				if err == nil {
					err = w.cas(i, ref, cur, id)
				}
			}
			if err == nil {
				break
			}
			var ce *core.ConflictError
			if !errors.As(err, &ce) {
				return fmt.Errorf("writer %d publish %d onto %s: %w", w.cfg.ID, i, ref, err)
			}
			cur = ce.Current
		}
		w.pause(i)
	}
	return nil
}
