package crashsweep

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// writerQueueGuard is the base name of the store's writer-queue guard
// (core/internal/lockq.GuardName).
const writerQueueGuard = "GUARD"

// storeDir is where every sweep puts the store on its memory filesystem.
const storeDir = "/store"

// epoch is the scenario clock's origin. Every time the store sees comes from
// this clock, so ids are the same in every run of a scenario.
var epoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// lockTimeout bounds every lock wait in a sweep. Scenarios never contend for
// real (races are interleaved deterministically at a lock call), so a wait
// this long means a lock leaked, which the reference run reports.
const lockTimeout = 2 * time.Second

// opRecord is what the oracle knows about one operation of a run.
type opRecord struct {
	step    *scenarios.Step
	started bool
	acked   bool  // returned, with the outcome the scenario expects
	err     error // the error it returned, if any
	id      core.ID
	land    *core.LandResult
	effect  effect
	read    *state // for read steps: what the reader saw
}

// effect is what an acknowledged operation adds to the store's state: its
// ref moves are recorded with origin (each move's old value is the ref's
// value in the state before).
type effect struct {
	createsStore bool
	changesets   []core.ID
	set          map[string]core.ID
	del          []string
	origin       core.Origin
	protect      map[string]bool // pattern: protected (true) or cleared
	drop         []core.ID       // changesets a gc removes: those no ref or lease reaches
}

// move records a move of ref to id (zero: its deletion).
func (e *effect) move(ref string, id core.ID) {
	if id.IsZero() {
		e.del = []string{ref}
	} else {
		e.set = map[string]core.ID{ref: id}
	}
}

// run executes a scenario once against fs. It stops at the first operation
// that does not end with its expected outcome (a crash, an injected fault),
// because after a crash every later call fails anyway and after a fault the
// sweep checks the state the failure left.
type run struct {
	sc     *scenarios.Scenario
	fs     vfs.FS
	weaken testknobs.Weakening
	hooks  [2]*hookFS
	stores [2]*core.Store
	labels map[string]core.ID
	ops    []*opRecord
	order  []int // op indices in journal-frame order
	// known lists the changesets a reader probes (the reference run's; nil
	// while the reference run itself executes: then the ones made so far).
	known []core.ID
	now   time.Time
	// check is called with every error an operation returns (Injecting.Check).
	check func(error)
	// stopped is the first unexpected error; the run is over.
	stopped error
}

func newRun(sc *scenarios.Scenario, fs vfs.FS, weaken testknobs.Weakening) *run {
	r := &run{sc: sc, fs: fs, weaken: weaken, labels: map[string]core.ID{}, now: epoch}
	for i := range r.hooks {
		r.hooks[i] = &hookFS{FS: fs}
	}
	return r
}

// options returns the store options for writer w.
func (r *run) options(w int) core.Options {
	return storeOptions(r.sc, r.hooks[w], r.weaken, func() time.Time { return r.now })
}

func storeOptions(sc *scenarios.Scenario, fs vfs.FS, weaken testknobs.Weakening, now func() time.Time) core.Options {
	o := core.Options{
		FS:              fs,
		LockTimeout:     lockTimeout,
		CheckpointEvery: sc.Options.CheckpointEvery,
		CheckpointBytes: sc.Options.CheckpointBytes,
		InlineThreshold: sc.Options.InlineThreshold,
		SegmentSize:     sc.Options.SegmentSize,
		Now:             now,
		// Checkpoints run in the committing call, so call numbers are the same in every run.
		InlineCheckpoint: true,
	}
	testknobs.Weaken(&o, weaken)
	return o
}

// store returns writer w's handle, opening it on first use as a second
// process would.
func (r *run) store(w int) (*core.Store, error) {
	if r.stores[w] != nil {
		return r.stores[w], nil
	}
	s, err := core.Open(storeDir, r.options(w))
	if err != nil {
		return nil, err
	}
	r.stores[w] = s
	return s, nil
}

// steps runs steps in order until one stops the run.
func (r *run) steps(steps []scenarios.Step) {
	for i := range steps {
		if r.stopped != nil {
			return
		}
		st := &steps[i]
		switch st.Kind {
		case scenarios.KindRepeat:
			for k := 0; k < st.Times && r.stopped == nil; k++ {
				r.steps(st.Body)
			}
		case scenarios.KindRace:
			r.race(st)
		default:
			op := r.begin(st)
			r.order = append(r.order, op)
			r.exec(op)
		}
	}
}

func (r *run) begin(st *scenarios.Step) int {
	r.ops = append(r.ops, &opRecord{step: st})
	return len(r.ops) - 1
}

// race runs st.First; when it first takes the lock file named st.At, st.Second
// runs to completion before First goes on. At LOCK the second's frame is
// appended first (a lost race for the first); at SYNCLOCK the first's frame is
// already appended and the second's sync covers it (group commit).
func (r *run) race(st *scenarios.Step) {
	first, second := r.begin(st.First), r.begin(st.Second)
	if st.At == "LOCK" {
		r.order = append(r.order, second, first)
	} else {
		r.order = append(r.order, first, second)
	}
	h := r.hooks[st.First.Writer]
	h.at = st.At
	h.fire = func() error {
		r.exec(second)
		if op := r.ops[second]; !op.acked {
			// The partner failed (a crash or an injected fault). The first
			// side gives up at the lock: had it gone on, its frame would
			// differ from the reference's and the oracle could not judge it.
			return fmt.Errorf("crashsweep: the racing partner (%s) failed: %w", op.step.Pos, op.err)
		}
		return nil
	}
	r.exec(first)
	h.fire = nil
}

// hookFS runs fire once, just before the first Lock of a file whose base
// name is at: the seam that interleaves two writers deterministically. For
// at LOCK it fires at the writer queue's guard, the first lock a writer
// takes on its way to LOCK: had the first writer already taken its place in
// the queue, the second would queue behind it and never run to completion.

type hookFS struct {
	vfs.FS
	at   string
	fire func() error
}

func (h *hookFS) Lock(name string, timeout time.Duration) (vfs.Locked, error) {
	if h.fire != nil && (path.Base(name) == h.at || h.at == "LOCK" && path.Base(name) == writerQueueGuard) {
		f := h.fire
		h.fire = nil
		if err := f(); err != nil {
			return nil, err
		}
	}
	return h.FS.Lock(name, timeout)
}

// exec runs one operation and records its result. The clock moves one second
// per operation, so two runs that reach an operation give it the same time.
func (r *run) exec(i int) {
	op := r.ops[i]
	st := op.step
	op.started = true
	r.now = epoch.Add(time.Duration(i+1) * time.Second)
	err := r.do(op)
	if err != nil && r.check != nil {
		r.check(err)
	}
	op.err = err
	want := st.Outcome
	switch {
	case err == nil && (want == scenarios.OutcomeOK || want == ""):
		op.acked = true
	case err == nil && want == scenarios.OutcomeNoop && op.land != nil && op.land.NoOp:
		op.acked = true
	case err != nil && want == scenarios.OutcomeConflict && errors.Is(err, core.ErrConflict) && !isFault(err),
		err != nil && want == scenarios.OutcomeProtected && errors.Is(err, core.ErrProtected) && !isFault(err):
		op.acked = true
		op.effect = effect{}
	default:
		if err == nil {
			err = fmt.Errorf("returned success, scenario expects %s", want)
			op.err = err
		}
		op.effect = effect{}
		if r.stopped == nil {
			r.stopped = fmt.Errorf("%s (%s): %w", st.Kind, st.Pos, err)
		}
	}
}

// isFault reports whether err comes from the filesystem rather than from the
// store's own logic (a crash is never a conflict).
func isFault(err error) bool {
	return errors.Is(err, vfs.ErrCrashed) || errors.Is(err, core.ErrIO) || errors.Is(err, core.ErrNoSpace)
}

func (r *run) resolve(w int, rev scenarios.Rev) (core.ID, error) {
	switch {
	case rev.None:
		return core.ID{}, nil
	case rev.Ref != "":
		s, err := r.store(w)
		if err != nil {
			return core.ID{}, err
		}
		return RefOrZero(s, rev.Ref)
	}
	id, ok := r.labels[rev.Label]
	if !ok {
		// The step defining the label did not run (or did not succeed): the
		// run stopped before, so this is unreachable in a valid scenario.
		return core.ID{}, fmt.Errorf("%w: label %q has no value", core.ErrInvalid, rev.Label)
	}
	return id, nil
}

// RefOrZero reads ref through a fresh snapshot of s: its value, or the
// zero id when there is no such ref.
func RefOrZero(s *core.Store, ref string) (core.ID, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return core.ID{}, err
	}
	id, err := sn.Ref(ref)
	if errors.Is(err, core.ErrNotFound) {
		return core.ID{}, nil
	}
	return id, err
}

// do runs one step of the scenario on the store and records its effect on
// op, which the oracle compares the recovered state with.
func (r *run) do(op *opRecord) error {
	st := op.step
	switch st.Kind {
	case scenarios.KindInit:
		s, err := core.Create(storeDir, r.options(0))
		if err != nil {
			return err
		}
		r.stores[0] = s
		op.effect.createsStore = true
		return nil
	case scenarios.KindRecover, scenarios.KindReopen:
		r.closeAll()
		if st.Kind == scenarios.KindRecover {
			if _, err := core.Recover(storeDir, r.options(0)); err != nil {
				return err
			}
		}
		_, err := r.store(0)
		return err
	}
	// Every other step runs on its writer's handle.
	s, err := r.store(st.Writer)
	if err != nil {
		return err
	}
	switch st.Kind {
	case scenarios.KindCommit:
		return r.doCommit(op, s)
	case scenarios.KindRefCreate, scenarios.KindRefSet, scenarios.KindRefDelete:
		return r.doRef(op, s)
	case scenarios.KindLand:
		return r.doLand(op, s)
	case scenarios.KindUndo:
		return r.doUndo(op, s)
	case scenarios.KindProtect:
		if err := s.Protect(st.Pattern, !st.Off); err != nil {
			return err
		}
		op.effect.protect = map[string]bool{st.Pattern: !st.Off}
		return nil
	case scenarios.KindRead:
		return r.doRead(op, s)
	case scenarios.KindGC:
		return r.doGC(op, s)
	case scenarios.KindCheckpoint:
		return s.Checkpoint()
	}
	return fmt.Errorf("crashsweep: step kind %q not implemented", st.Kind)
}

// doCommit runs a commit step.
func (r *run) doCommit(op *opRecord, s *core.Store) error {
	st := op.step
	req := core.CommitRequest{Agent: st.Agent, Message: st.Message, Time: r.now, Advance: st.Advance}
	if req.Agent == "" {
		req.Agent = "scenario"
	}
	for _, p := range st.Parents {
		id, err := r.resolve(st.Writer, p)
		if err != nil {
			return err
		}
		if !id.IsZero() {
			req.Parents = append(req.Parents, id)
		}
	}
	for _, f := range st.Files {
		req.Changes = append(req.Changes, core.Change{Path: f.Path, Data: f.Data()})
	}
	for _, d := range st.Deletes {
		req.Changes = append(req.Changes, core.Change{Path: d, Delete: true})
	}
	id, err := s.Commit(req)
	if err != nil {
		return err
	}
	op.id = id
	if st.Label != "" {
		r.labels[st.Label] = id
	}
	op.effect.changesets = []core.ID{id}
	if st.Advance != "" {
		op.effect.set = map[string]core.ID{st.Advance: id}
		op.effect.origin = core.Origin{Agent: req.Agent, Op: core.OpCommit}
	}
	return nil
}

// doRef runs a ref_create, ref_set or ref_delete step.
func (r *run) doRef(op *opRecord, s *core.Store) error {
	st := op.step
	u := core.RefUpdate{Name: st.Ref}
	var err error
	if st.Kind != scenarios.KindRefCreate {
		if u.Old, err = r.resolve(st.Writer, st.Expect); err != nil {
			return err
		}
	}
	if st.Kind != scenarios.KindRefDelete {
		if u.New, err = r.resolve(st.Writer, st.To); err != nil {
			return err
		}
	}
	if err := s.UpdateRefs(u); err != nil {
		return err
	}
	op.effect.move(st.Ref, u.New)
	op.effect.origin.Op = map[scenarios.Kind]core.Op{scenarios.KindRefCreate: core.OpRefCreate,
		scenarios.KindRefSet: core.OpRefSet, scenarios.KindRefDelete: core.OpRefDelete}[st.Kind]
	if st.Kind == scenarios.KindRefSet && u.Old.IsZero() {
		op.effect.origin.Op = core.OpRefCreate // a set from absence creates
	}
	return nil
}

// doUndo runs an undo step: the move of st.Ref st.Back moves before its
// newest is undone by the agent "undoer".
func (r *run) doUndo(op *opRecord, s *core.Store) error {
	st := op.step
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	ms, err := sn.Moves(core.MoveQuery{Refs: []string{st.Ref}, Limit: st.Back + 1})
	if err != nil {
		return err
	}
	if len(ms) <= st.Back {
		return fmt.Errorf("%w: undo: ref %s has %d moves, the step undoes the one %d back", core.ErrInvalid, st.Ref, len(ms), st.Back)
	}
	m := ms[len(ms)-1-st.Back]
	u, err := s.Undo(m.ID(), "undoer")
	if err != nil {
		return err
	}
	op.effect.move(st.Ref, u.New)
	op.effect.origin = u.Origin
	return nil
}

// doLand runs a land step.
func (r *run) doLand(op *opRecord, s *core.Store) error {
	st := op.step
	change, err := r.resolve(st.Writer, st.Change)
	if err != nil {
		return err
	}
	res, err := s.Land(change, st.Onto, core.LandOptions{Agent: "lander"})
	if err != nil {
		return err
	}
	op.land = res
	op.id = res.Changeset
	if st.Label != "" {
		r.labels[st.Label] = res.Changeset
	}
	if !res.NoOp {
		op.effect.changesets = []core.ID{res.Changeset}
		op.effect.set = map[string]core.ID{st.Onto: res.Changeset}
		op.effect.origin = core.Origin{Agent: "lander", Op: core.OpLand}
	}
	return nil
}

// doRead runs a read step: it observes every changeset the run knows of.
func (r *run) doRead(op *opRecord, s *core.Store) error {
	known := r.known
	if known == nil {
		for _, o := range r.ops {
			known = append(known, o.effect.changesets...)
		}
	}
	seen, err := observeStore(s, known)
	if err != nil {
		return err
	}
	op.read = seen
	return nil
}

// closeAll closes every open handle (errors are not the step's concern: a
// handle poisoned by an earlier fault reports it on its own operations).
func (r *run) closeAll() {
	for i, s := range r.stores {
		if s != nil {
			if err := s.Close(); err != nil && r.check != nil {
				r.check(err)
			}
			r.stores[i] = nil
		}
	}
}
