package pipeline

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/faultfs"
)

// fakeStore is a store of one process, in memory: a ref table, the frames
// appended and made durable, and counts of what the pipeline asked.
type fakeStore struct {
	mu      sync.Mutex
	refs    *refs.Table
	next    uint64 // next frame
	durable uint64 // frames below this are durable
	// early makes EarlyRefs answer (else it reports it cannot).
	early bool
	// hold, if not nil, is waited on by the first Sync: the batch that
	// arrives meanwhile forms behind it.
	hold    chan struct{}
	appends int // Append calls (each under a turn of the writer lock)
	syncs   int // Sync calls that had work to do
	acks    int
}

func newFakeStore() *fakeStore { return &fakeStore{refs: refs.New(), next: 1, durable: 1} }

func (f *fakeStore) end() state.Rec {
	return state.Rec{Epoch: 1, Pos: journal.Pos{Seg: 1, Off: journal.FirstFrame}, NextSeq: f.next}
}

func (f *fakeStore) ReadState() (*state.Both, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &state.Both{End: f.end(), EOK: true}, nil
}

func (f *fakeStore) CatchUp(*state.Both) error { return nil }

func (f *fakeStore) EarlyRefs(st *state.Both) *refs.Table {
	f.mu.Lock()
	if !f.early || st.End.NextSeq != f.next {
		f.mu.Unlock()
		return nil
	}
	return f.refs
}

func (f *fakeStore) EarlyDone() { f.mu.Unlock() }

func (f *fakeStore) Append(r *Request) (uint64, uint64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appends++
	if err := f.refs.Check(r.Txn.Moves); err != nil {
		return f.next - 1, 1, false, errs.Ref(err)
	}
	seq := f.next
	f.refs.Apply(seq, r.Txn.Time, r.Txn.Origin, r.Txn.Moves)
	f.next++
	return seq, 1, f.durable < seq, nil
}

func (f *fakeStore) Sync(seq, epoch uint64, peek bool) error {
	f.mu.Lock()
	hold := f.hold
	f.hold = nil
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.durable <= seq {
		f.syncs++
		f.durable = f.next
	}
	return nil
}

func (f *fakeStore) Acked() { f.mu.Lock(); f.acks++; f.mu.Unlock() }

// newPipeline returns a pipeline over the fake store, with a real writer
// lock on a memory filesystem; the counting wrapper sees its turns (one
// lock of LOCK each).
func newPipeline(t *testing.T, f *fakeStore) (*Pipeline, *faultfs.Counting) {
	t.Helper()
	m := faultfs.NewMem()
	if err := m.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	c := faultfs.NewCounting(m)
	l := writelock.New(writelock.Config{FS: c, Dir: "/s", Timeout: time.Second, RetryPlace: -1,
		CatchUp: func() error { return nil }, Closed: new(atomic.Bool)})
	t.Cleanup(l.Close)
	return New(Config{Env: f, Lock: l}), c
}

// turns counts the turns of the writer lock taken since c was reset.
func turns(c *faultfs.Counting) int64 { return c.PathCount(faultfs.OpLock, "/s/"+writelock.LockName) }

func move(name string, old, new objects.ID) *txn.Txn {
	return &txn.Txn{Time: time.Unix(1, 0), Moves: []refs.Move{{Name: name, Old: old, New: new}}}
}

func id(b byte) (x objects.ID) {
	x[0] = b
	return x
}

// TestOwnRefsQueueWithoutLookahead checks when a commit queues with
// lookahead: only when it moves a ref from a value this process did not
// set. Queueing with lookahead when nobody else moves the ref costs a
// second blocking wait a commit (13 % of the rate of 32 writers on their
// own refs); queueing without it when another writer does would keep
// losers in the queue to the end.
func TestOwnRefsQueueWithoutLookahead(t *testing.T) {
	p, _ := newPipeline(t, newFakeStore())
	req := func(name string, old objects.ID) []*Request {
		return []*Request{{Txn: move(name, old, id(9))}}
	}
	if p.contended(req("a", objects.ID{})) {
		t.Fatal("creating a ref this process never saw counts as contended")
	}
	if err := p.Commit(move("a", objects.ID{}, id(1)), nil); err != nil {
		t.Fatal(err)
	}
	if p.contended(req("a", id(1))) {
		t.Fatal("moving a ref from the value this process set counts as contended")
	}
	if !p.contended(req("a", id(7))) {
		t.Fatal("moving a ref from a value another writer set does not count as contended")
	}
	if !p.contended(req("a", id(1))) {
		t.Fatal("a ref another writer moved counts as uncontended again when this process won the last race")
	}
}

// TestALostMoveFailsBeforeItsTurn: a move whose expected value the
// projection already contradicts fails with a ConflictError naming the
// current value without a turn of the writer lock, and its conflict goes
// through the sync step. Without the early check it takes a turn.
func TestALostMoveFailsBeforeItsTurn(t *testing.T) {
	f := newFakeStore()
	p, c := newPipeline(t, f)
	if err := p.Commit(move("main", objects.ID{}, id(1)), nil); err != nil {
		t.Fatal(err)
	}
	f.early = true
	c.Reset()
	err := p.Commit(move("main", objects.ID{}, id(2)), nil)
	var ce *errs.ConflictError
	if !errors.As(err, &ce) || ce.Current != id(1) {
		t.Fatalf("a lost move: %v; want a conflict with current %s", err, errs.Short(id(1)))
	}
	if n := turns(c); n != 0 || f.appends != 1 {
		t.Fatalf("the lost move took %d turns of the writer lock (%d appends in all); want none", n, f.appends)
	}
	if f.acks != 1 {
		t.Fatalf("%d acknowledged batches; want 1 (a conflict acknowledges nothing)", f.acks)
	}
}

// TestABatchSharesOneTurnAndOneSync: transactions that arrive while a batch
// is in its sync step form the next batch, which takes one turn of the
// writer lock and one sync for all of them.
func TestABatchSharesOneTurnAndOneSync(t *testing.T) {
	const n = 8
	f := newFakeStore()
	p, c := newPipeline(t, f)
	hold := make(chan struct{})
	f.hold = hold
	first := make(chan error, 1)
	go func() { first <- p.Commit(move("r0", objects.ID{}, id(1)), nil) }()
	for !f.holding() {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- p.Commit(move(string(rune('a'+i)), objects.ID{}, id(byte(i))), nil)
		}()
	}
	for p.Pending() < n {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	if tn := turns(c); tn != 2 || f.syncs != 2 {
		t.Fatalf("%d turns and %d syncs for a batch of 1 and one of %d; want 2 and 2", tn, f.syncs, n)
	}
}

// holding reports whether the first Sync has taken the hold (it is then
// waiting on it).
func (f *fakeStore) holding() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.hold == nil }
