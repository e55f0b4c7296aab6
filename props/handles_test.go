package props

import (
	"errors"

	"time"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// twoHandles is the fixture of the ref machines (protect, undo): a store on
// a MemFS holding three changesets for refs to move between, and two
// handles on it, as two processes would have. It draws only
// "checkpointEvery", so the machines' saved failures replay unchanged.
type twoHandles struct {
	opts    core.Options
	handles []*core.Store
	values  []core.ID // the changesets refs move between
}

func newTwoHandles(t *rapid.T) twoHandles {
	h := twoHandles{opts: core.Options{FS: faultfs.NewMem(), LockTimeout: 5 * time.Second, InlineCheckpoint: true,
		CheckpointEvery: rapid.IntRange(2, 6).Draw(t, "checkpointEvery"), Now: func() time.Time { return epoch }}}
	s, err := core.Create(storeDir, h.opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for i := range 3 {
		id, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "f", Data: []byte{byte(i)}}}})
		if err != nil {
			t.Fatalf("Commit: %v", err)
		}
		h.values = append(h.values, id)
	}
	h.handles = []*core.Store{s}
	h.reopen(t, 1)
	return h
}

// handle draws which of the two handles makes the next call.
func (h *twoHandles) handle(t *rapid.T) *core.Store {
	return h.handles[rapid.IntRange(0, 1).Draw(t, "handle")]
}

// reopen closes the handles from index keep on and opens new ones until
// there are two again: keep 0 is a restart of both processes, keep 1 of
// the second only.
func (h *twoHandles) reopen(t *rapid.T, keep int) {
	for _, s := range h.handles[keep:] {
		_ = s.Close()
	}
	h.handles = h.handles[:keep]
	for len(h.handles) < 2 {
		s, err := core.Open(storeDir, h.opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		h.handles = append(h.handles, s)
	}
}

// checkpointOrReopen is the machines' checkpoint action: a drawn handle writes a
// checkpoint, or the handles from keep on are reopened.
func (h *twoHandles) checkpointOrReopen(t *rapid.T, keep int) {
	if rapid.Bool().Draw(t, "reopen") {
		h.reopen(t, keep)
		return
	}
	if err := h.handle(t).Checkpoint(); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
}

// machine is a state machine a property drives (see machineProp).
type machine interface {
	// actions are the machine's actions by name; rapid runs the one
	// named "" after every action, as the check.
	actions() map[string]func(*rapid.T)
	closeAll()
}

// machineProp is the property that makes a machine with newMachine(t,
// variant), runs a random sequence of its actions and closes its handles.
// variant picks a broken model or store for the canary tests.
func machineProp[V any, M machine](newMachine func(*rapid.T, V) M, variant V) func(*rapid.T) {
	return func(t *rapid.T) {
		m := newMachine(t, variant)
		defer m.closeAll()
		t.Repeat(m.actions())
	}
}

func (h *twoHandles) closeAll() {
	for _, s := range h.handles {
		_ = s.Close()
	}
	h.handles = nil
}

// refsAsModel fails unless each ref in names has on handle h's snapshot sn
// the value the model's refs give it (no entry: the ref is absent).
func refsAsModel(t *rapid.T, h int, sn *core.Snapshot, names []string, refs map[string]core.ID) {
	for _, ref := range names {
		id, err := sn.Ref(ref)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			t.Fatal(err)
		}
		if id != refs[ref] {
			t.Fatalf("handle %d: %s is %s; the model has %s", h, ref, short(id), short(refs[ref]))
		}
	}
}
