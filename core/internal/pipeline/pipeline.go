// Package pipeline is the commit pipeline of one store handle: it batches
// the transactions of a process's goroutines, queues each batch once for
// the writer lock, fails early the transactions whose compare-and-swap has
// already lost, appends the rest as one frame each, and makes the batch
// durable with one sync step.
//
// It reaches the store only through Env, the seam Pebble's commitEnv is the
// model of, and the writer lock (core/internal/writelock), so it can be
// tested alone with a fake of the store and a real lock on a memory
// filesystem. Both are called on every commit, the lock as a concrete type:
// the closures a turn takes (its work, its "still needed" check) then stay
// on the stack.
package pipeline

import (
	"errors"
	"fmt"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// Env is what the pipeline needs of the store.
type Env interface {
	// ReadState reads both state records in one read.
	ReadState() (*state.Both, error)
	// CatchUp replays, without the writer lock, the frames published up
	// to the end in st; it may do nothing (the projection is busy, or st
	// unreadable). Only an I/O error is returned.
	CatchUp(st *state.Both) error
	// EarlyRefs lends the ref table of the projection, until EarlyDone,
	// only if the store is healthy per st and the projection holds exactly
	// the frames up to st's end; it returns nil when that cannot be had at
	// once (and then EarlyDone is not called).
	EarlyRefs(st *state.Both) *refs.Table
	// EarlyDone ends the loan of EarlyRefs.
	EarlyDone()
	// Append appends r as one frame, under the writer lock: it checks r's
	// needed changesets and ref moves against the projection caught up to
	// the published end, appends and publishes the new end. seq and epoch
	// name the frame, or, for a ref conflict (a *errs.ConflictError), the
	// end the check saw; behind reports whether frames awaited a sync
	// when the store last appended.
	Append(r *Request) (seq, epoch uint64, behind bool, err error)
	// Sync returns once frame seq of epoch is durable (groupsync). peek:
	// look at the durable record before queueing for the sync lock.
	Sync(seq, epoch uint64, peek bool) error
	// Acked is called after a batch acknowledged at least one transaction.
	Acked()
}

// Config is what a Pipeline works with.
type Config struct {
	Env  Env
	Lock *writelock.Lock
	// AckBeforeSync is the test-only canary that acknowledges a batch
	// before its sync step, which Background then runs on a goroutine
	// the store waits for when it closes.
	AckBeforeSync bool
	Background    func(fn func())
	// CASIfExists is the test-only canary of refs.Table.CheckIf.
	CASIfExists bool
}

// Pipeline is the commit pipeline of one store handle. It is safe for
// concurrent use.
type Pipeline struct {
	env           Env
	lock          *writelock.Lock
	ackBeforeSync bool
	casIfExists   bool
	background    func(fn func())

	// queue holds the transactions waiting for a batch, and whether one
	// of them leads a batch now; mu guards both.
	queue struct {
		mu      lockorder.Mutex[lockorder.Leaf]
		pending []*Request
		leading bool
	}
	// owned is, for each ref this process's last acknowledged move set,
	// the value it set (heads), and the refs it has seen another writer
	// move (shared: see contended); mu guards both.
	owned struct {
		mu     lockorder.Mutex[lockorder.Leaf]
		heads  map[string]objects.ID
		shared map[string]bool
	}
}

// New returns a pipeline.
func New(c Config) *Pipeline {
	return &Pipeline{env: c.Env, lock: c.Lock, ackBeforeSync: c.AckBeforeSync, background: c.Background, casIfExists: c.CASIfExists}
}

// Request is one transaction in the pipeline.
type Request struct {
	Txn     *txn.Txn
	Payload []byte
	Digests journal.Digests // what the frame checksum covers (journal.PayloadDigests)
	Need    []objects.ID    // changesets that must exist (parents, ref targets)
	seq     uint64          // frame appended (or, on a conflict, the end the check saw)
	epoch   uint64
	err     error
	early   bool      // failed its compare-and-swap before its turn (earlyConflicts)
	behind  bool      // other frames awaited a sync when this one was appended
	turn    chan bool // true: lead the next batch; false: done, see err
}

// Pending returns how many transactions wait for a batch.
func (p *Pipeline) Pending() int {
	p.queue.mu.Lock()
	defer p.queue.mu.Unlock()
	return len(p.queue.pending)
}

// Commit appends t as one frame and returns once it is durable. need lists
// changesets that must exist (parents, ref targets).
//
// The first transaction to arrive leads a batch of every transaction
// waiting when it starts, takes the writer lock once for all of them,
// appends each as its own frame (each with its own checks, so one
// transaction's conflict is its alone), makes them durable with one sync
// step, and hands the lead to the first transaction that arrived
// meanwhile. Goroutines sharing a store handle thus pay one queue turn and
// one fdatasync per batch instead of one each, the way Pebble's commit
// pipeline batches its writers; across processes, the sync step groups the
// same way (groupsync).
//
// A batch keeps the lead through its sync on purpose: the sync is the
// window in which the next batch forms. Handing the lead on before the
// sync, so that the next batch appends meanwhile, splits the arrivals into
// small batches that each pay a turn of the writer lock and a wait for
// SYNCLOCK; 32 clients committing through one server then made 26–49 %
// fewer commits a second (paired runs of peerbench W2 through serve).
func (p *Pipeline) Commit(t *txn.Txn, need []objects.ID) error {
	payload, head := txn.EncodePayload(t)
	if len(payload) > journal.MaxPayload {
		return fmt.Errorf("%w: transaction of %d bytes exceeds the frame limit", errs.ErrInvalid, len(payload))
	}
	r := &Request{Txn: t, Payload: payload, Digests: journal.PayloadDigests(payload, head), Need: need, turn: make(chan bool, 1)}
	if p.lock.Held() {
		// This process holds the writer lock (writelock.Lock.Hold):
		// commit at once. Joining the pipeline could wait on a leader
		// that waits in the queue behind the held turn.
		p.commitBatch([]*Request{r})
		return r.err
	}
	p.queue.mu.Lock()
	p.queue.pending = append(p.queue.pending, r)
	lead := !p.queue.leading
	p.queue.leading = true
	p.queue.mu.Unlock()
	if !lead && !<-r.turn {
		return r.err
	}
	p.queue.mu.Lock()
	batch := p.queue.pending
	p.queue.pending = nil
	p.queue.mu.Unlock()
	p.commitBatch(batch)
	for _, o := range batch {
		if o != r {
			o.turn <- false
		}
	}
	p.queue.mu.Lock()
	if len(p.queue.pending) > 0 {
		p.queue.pending[0].turn <- true
	} else {
		p.queue.leading = false
	}
	p.queue.mu.Unlock()
	return r.err
}

// earlyConflicts fails, without the writer lock, every request of batch
// whose ref moves conflict with the store as of the published end, and
// returns how many requests still need their turn, or an I/O error. It
// decides only from a projection caught up to an end read in this call, on
// a healthy store (the precondition Append checks under the lock), so the
// value a loser is told of is one the ref held after the loser's call
// began, as under the lock. Like a conflict found under the lock, its seq
// is the end the check saw, which the sync step makes durable before the
// error is returned (C4, C5). Anything else (the projection busy or
// behind, a torn read, another epoch) leaves the decision to the turn. st
// is a read of both state records made for this call (nil: the call reads
// them).
func (p *Pipeline) earlyConflicts(batch []*Request, st *state.Both) (live int, err error) {
	moves := false
	for _, r := range batch {
		if !r.early {
			live++
			moves = moves || len(r.Txn.Moves) > 0
		}
	}
	if !moves {
		return live, nil
	}
	if st == nil {
		if st, err = p.env.ReadState(); err != nil {
			return live, err
		}
	}
	rt := p.env.EarlyRefs(st)
	if rt == nil {
		return live, nil
	}
	defer p.env.EarlyDone()
	end := st.End
	for _, r := range batch {
		if r.early || len(r.Txn.Moves) == 0 || rt.CheckProtected(r.Txn.Origin.Op, r.Txn.Moves) != nil {
			// A refused move of a protected ref is told so under the
			// lock, not as the conflict it may also be.
			continue
		}
		var c *refs.Conflict
		if err := rt.CheckIf(r.Txn.Moves, p.casIfExists); errors.As(err, &c) {
			r.early, r.err = true, errs.Ref(err)
			r.seq, r.epoch = end.NextSeq-1, end.Epoch
			live--
		}
	}
	return live, nil
}

// contended reports whether a request of batch moves a ref that another
// writer moves too: one this process has seen moved from a value it did
// not set, now or before (the mark stays: the winner of the last race for
// a shared ref starts the next from its own value). Such a request may
// lose its compare-and-swap while it queues, so it queues with lookahead
// (writelock.Lock.WithIf), which lets it find out and leave early. A writer
// on refs of its own waits once instead.
func (p *Pipeline) contended(batch []*Request) bool {
	p.owned.mu.Lock()
	defer p.owned.mu.Unlock()
	hit := false
	for _, r := range batch {
		if r.early {
			continue
		}
		for _, m := range r.Txn.Moves {
			if p.owned.shared[m.Name] {
				hit = true
			} else if p.owned.heads[m.Name] != m.Old {
				if p.owned.shared == nil {
					p.owned.shared = map[string]bool{}
				}
				p.owned.shared[m.Name] = true
				hit = true
			}
		}
	}
	return hit
}

// own records the ref moves of an acknowledged transaction as this
// process's.
func (p *Pipeline) own(moves []refs.Move) {
	p.owned.mu.Lock()
	defer p.owned.mu.Unlock()
	if p.owned.heads == nil {
		p.owned.heads = map[string]objects.ID{}
	}
	for _, m := range moves {
		p.owned.heads[m.Name] = m.New
	}
}

// commitBatch appends every transaction of batch under one hold of the
// writer lock and makes them durable; each request's err is its result.
func (p *Pipeline) commitBatch(batch []*Request) {
	// One read of the state serves the catch-up before queueing and the
	// first early conflict check (a system call less a commit).
	st, err := p.env.ReadState()
	if err == nil {
		err = p.env.CatchUp(st)
	}
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
		return
	}
	if err := p.appendBatch(batch, st); err != nil {
		for _, r := range batch {
			if r.err == nil {
				r.err = err
			}
		}
	}
	p.syncBatch(batch)
}

// appendBatch appends the requests of batch that have not lost their
// compare-and-swap yet, under one turn of the writer lock, unless every
// one of them loses before its turn. st is the state read for the batch.
// The error is one for every request still without a result.
func (p *Pipeline) appendBatch(batch []*Request, st *state.Both) error {
	// A transaction whose compare-and-swap has already lost, to a frame
	// published before it queued or while it queued, fails without its
	// turn: with 32 writers racing for one ref, each publish used to cost
	// a lock pass for every loser (about 30 per publish), and the winner,
	// who learns the new head first, was the likeliest to win again.
	// An I/O error on the way is the operation's (C9): it ends the wait
	// and fails every request still waiting.
	var nerr error
	needed := func() bool {
		live, err := p.earlyConflicts(batch, st)
		st = nil
		if err != nil {
			nerr = err
			return false
		}
		return live > 0
	}
	if !needed() {
		if nerr == nil {
			p.lock.RenewPlace()
		}
		return nerr
	}
	// A place lost in the queue is kept for a commit that advances a ref:
	// it is retried as one call, and its retry publishes next. A bare ref
	// update is not: its retry usually follows a new commit, and its
	// place would hold up the queue, front and all, until given up (a
	// fifth of the publishes per second of commit then ref CAS, 32
	// writers). Only a contended batch queues with the checks that can
	// lose it its turn.
	p.lock.FitPlace(func(yield func(string) bool) {
		for _, r := range batch {
			for _, m := range r.Txn.Moves {
				if !yield(m.Name) {
					return
				}
			}
		}
	})
	contended := p.contended(batch)
	var moves []string
	for _, r := range batch {
		if !contended || len(r.Txn.Objs) == 0 {
			continue
		}
		for _, m := range r.Txn.Moves {
			moves = append(moves, m.Name)
		}
	}
	err := p.lock.WithIf(func() error {
		for _, r := range batch {
			if !r.early {
				r.seq, r.epoch, r.behind, r.err = p.env.Append(r)
			}
		}
		return nil
	}, needed, contended, moves)
	if errors.Is(err, writelock.ErrNotNeeded) || err == nil {
		err = nerr
	}
	return err
}

// sawProjection reports whether err is a refusal decided on the
// projection up to the published end (a ref conflict, or a move of a
// protected ref): it is told only once that end is durable.
func sawProjection(err error) bool {
	var ce *errs.ConflictError
	return errors.As(err, &ce) || errors.Is(err, errs.ErrProtected)
}

// syncBatch is the sync step: one Sync for the highest frame of each epoch
// (one epoch, unless a recovery ran inside the batch). A conflict's seq is
// the end its check saw: a loser must be told only a value every later
// reader sees (C4, C5), so that end is made durable before the
// ConflictError is returned, by the same step.
func (p *Pipeline) syncBatch(batch []*Request) {
	top := map[uint64]uint64{}
	peek := map[uint64]bool{}
	for _, r := range batch {
		if (r.err == nil || sawProjection(r.err)) && r.seq > 0 && r.seq > top[r.epoch] {
			top[r.epoch] = r.seq
		}
		peek[r.epoch] = peek[r.epoch] || r.behind
	}
	if p.ackBeforeSync {
		p.background(func() {
			for epoch, seq := range top {
				p.env.Sync(seq, epoch, true)
			}
		})
		return
	}
	serr := map[uint64]error{}
	for epoch, seq := range top {
		serr[epoch] = p.env.Sync(seq, epoch, peek[epoch])
	}
	acked := false
	for _, r := range batch {
		switch {
		case sawProjection(r.err) && r.seq > 0 && serr[r.epoch] != nil:
			r.err = fmt.Errorf("%v, but the frames it saw could not be made durable: %w", r.err, serr[r.epoch])
		case r.err == nil:
			r.err = serr[r.epoch]
			acked = acked || r.err == nil
		}
		if r.err == nil && len(r.Txn.Moves) > 0 {
			p.own(r.Txn.Moves)
		}
	}
	if acked {
		p.env.Acked()
	}
}
