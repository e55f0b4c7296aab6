package props

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// storeDir is where every property keeps its store on the memory FS.
const storeDir = "/store"

// inlineThreshold is small so that both inline and loose blobs are cheap
// to draw.
const inlineThreshold = 64

// pathPool lists the paths commits touch. Directories ("d", "d/e", "f") are
// never files, so no change turns a directory into a file.
var pathPool = []string{"a", "b", "c.txt", "d/x", "d/y", "d/e/z", "f/g"}

// agentPool lists the agents commits are made by.
var agentPool = []string{"agent-1", "agent-2", "orchestrator"}

// epoch is the time of the first commit; each commit is one second later.
var epoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// storeMachine drives one store through random transactions, reopens and
// crashes, and holds it against the model after every step.
type storeMachine struct {
	fs      *faultfs.MemFS
	opts    core.Options
	handles []*core.Store // one or two handles on the same files, as two processes would have
	m       *storeModel
	commits int // commits attempted, which makes every message unique
	weaken  testknobs.Weakening
}

// newStoreMachine draws the store's shape (checkpoint interval, number of
// handles) and creates it.
func newStoreMachine(t *rapid.T, weaken testknobs.Weakening) *storeMachine {
	sm := &storeMachine{fs: faultfs.NewMem(), m: newStoreModel(), weaken: weaken}
	sm.opts = core.Options{
		FS:              sm.fs,
		LockTimeout:     5 * time.Second,
		CheckpointEvery: rapid.IntRange(2, 8).Draw(t, "checkpointEvery"),
		InlineThreshold: inlineThreshold,
		Now:             func() time.Time { return epoch },
	}
	testknobs.Weaken(&sm.opts, weaken)
	s, err := core.Create(storeDir, sm.opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	sm.handles = []*core.Store{s}
	if rapid.Bool().Draw(t, "twoHandles") {
		s2, err := core.Open(storeDir, sm.opts)
		if err != nil {
			t.Fatalf("Open of a second handle: %v", err)
		}
		sm.handles = append(sm.handles, s2)
	}
	return sm
}

// handle draws which handle performs the next operation.
func (sm *storeMachine) handle(t *rapid.T) *core.Store {
	return sm.handles[rapid.IntRange(0, len(sm.handles)-1).Draw(t, "handle")]
}

func (sm *storeMachine) closeAll() {
	for _, s := range sm.handles {
		_ = s.Close()
	}
	sm.handles = nil
}

// openAll opens as many handles as before on the machine's current FS.
func (sm *storeMachine) openAll(t *rapid.T, n int) {
	sm.opts.FS = sm.fs
	for i := 0; i < n; i++ {
		s, err := core.Open(storeDir, sm.opts)
		if err != nil {
			t.Fatalf("Open (handle %d): %v", i, err)
		}
		sm.handles = append(sm.handles, s)
	}
}

// drawChangeset picks an existing changeset.
func (sm *storeMachine) drawChangeset(t *rapid.T, label string) core.ID {
	if len(sm.m.order) == 0 {
		t.Skip("no changesets yet")
	}
	return rapid.SampledFrom(sm.m.order).Draw(t, label)
}

// drawContent draws file content: small (inline in the frame), large (a
// loose object) or one of a few shared values, so that blobs repeat across
// commits.
func drawContent(t *rapid.T, label string) []byte {
	switch rapid.IntRange(0, 2).Draw(t, label+"Kind") {
	case 0:
		return rapid.SliceOfN(rapid.Byte(), 0, inlineThreshold).Draw(t, label+"Small")
	case 1:
		return rapid.SliceOfN(rapid.Byte(), inlineThreshold+1, 4*inlineThreshold).Draw(t, label+"Large")
	default:
		return []byte(rapid.SampledFrom([]string{"", "hello\n", "shared content\n"}).Draw(t, label+"Shared"))
	}
}

// commit draws and performs a commit with 0–3 parents and 1–4 changes,
// sometimes advancing a ref (a CAS that may win or lose).
func (sm *storeMachine) commit(t *rapid.T) {
	m := sm.m
	np := rapid.IntRange(0, 3).Draw(t, "nParents")
	if np > len(m.order) {
		t.Skip("fewer changesets than parents")
	}
	var parents []core.ID
	if np > 0 {
		idx := rapid.SliceOfNDistinct(rapid.IntRange(0, len(m.order)-1), np, np, rapid.ID[int]).Draw(t, "parents")
		for _, i := range idx {
			parents = append(parents, m.order[i])
		}
	}
	advance := drawAdvance(t, m, parents)
	var base map[string]file
	if np > 0 {
		base = m.tree(parents[0])
	} else {
		base = map[string]file{}
	}
	paths := rapid.SliceOfNDistinct(rapid.SampledFrom(pathPool), 1, 4, rapid.ID[string]).Draw(t, "paths")
	var changes []core.Change
	for _, p := range paths {
		if _, exists := base[p]; exists && rapid.Bool().Draw(t, "delete "+p) {
			changes = append(changes, core.Change{Path: p, Delete: true})
			continue
		}
		mode := rapid.SampledFrom([]objects.Mode{0, objects.ModeFile, objects.ModeExec}).Draw(t, "mode "+p)
		changes = append(changes, core.Change{Path: p, Data: drawContent(t, "data "+p), Mode: mode})
	}

	sm.commits++
	req := core.CommitRequest{
		Parents: parents,
		Changes: changes,
		Agent:   rapid.SampledFrom(agentPool).Draw(t, "agent"),
		Message: fmt.Sprintf("commit %d", sm.commits),
		Time:    epoch.Add(time.Duration(sm.commits) * time.Second),
		Advance: advance,
	}
	files, key := applyChanges(base, changes)

	var expect core.ID
	if np > 0 {
		expect = parents[0]
	}
	cur := m.refs[advance]
	lose := advance != "" && cur != expect

	id, err := sm.handle(t).Commit(req)
	if lose {
		if cerr := isConflict(err, advance, cur); cerr != nil {
			t.Fatalf("commit advancing %q from %s (it is %s): %v", advance, short(expect), short(cur), cerr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Commit(%d parents, %d changes, advance %q): %v", np, len(changes), advance, err)
	}
	if _, dup := m.changesets[id]; dup {
		t.Fatalf("Commit returned %s, the id of an earlier, different commit", short(id))
	}
	m.changesets[id] = &csModel{
		id: id, parents: parents, files: files, gen: m.generation(parents),
		agent: req.Agent, message: req.Message, time: req.Time, changeKey: key,
	}
	m.order = append(m.order, id)
	if advance != "" {
		m.moveRef(advance, expect, id)
	}
}

// drawAdvance draws the ref a commit advances: none, one the commit should
// win (its first parent is the ref's value, or it has no parents and the
// ref is absent; parents is reordered or changed to make it so), or any.
func drawAdvance(t *rapid.T, m *storeModel, parents []core.ID) string {
	np := len(parents)
	advance := ""
	switch rapid.SampledFrom([]string{"none", "win", "any"}).Draw(t, "advanceMode") {
	case "win":
		advance = rapid.SampledFrom(refPool).Draw(t, "advance")
		cur, ok := m.refs[advance]
		switch {
		case !ok && np > 0:
			t.Skip("a winning advance of an absent ref needs a root commit")
		case ok && np == 0:
			t.Skip("a winning advance of an existing ref needs parents")
		case ok:
			for i, p := range parents {
				if p == cur {
					parents[0], parents[i] = parents[i], parents[0]
				}
			}
			if parents[0] != cur {
				parents[0] = cur
			}
		}
	case "any":
		advance = rapid.SampledFrom(refPool).Draw(t, "advance")
	}
	return advance
}

// update performs one UpdateRefs call of 1–3 updates on distinct refs, each
// drawn to win or to lose, and checks all-or-nothing.
func (sm *storeMachine) update(t *rapid.T) {
	m := sm.m
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(refPool), 1, 3, rapid.ID[string]).Draw(t, "refs")
	var ups []core.RefUpdate
	losers := map[string]core.ID{}
	for _, name := range names {
		cur, exists := m.refs[name]
		var u core.RefUpdate
		u.Name = name
		switch kind := rapid.SampledFrom([]string{"create", "move", "delete", "stale"}).Draw(t, "kind "+name); kind {
		case "create":
			u.New = sm.drawChangeset(t, "new "+name)
		case "move":
			if !exists {
				t.Skip("move of an absent ref")
			}
			u.Old = cur
			u.New = sm.drawChangeset(t, "new "+name)
		case "delete":
			if !exists {
				t.Skip("delete of an absent ref")
			}
			u.Old = cur
		case "stale":
			// An expectation that is wrong: a changeset the ref does not
			// hold (or absence when it exists).
			u.Old = sm.drawChangeset(t, "stale old "+name)
			if exists && rapid.Bool().Draw(t, "stale expects absence") {
				u.Old = core.ID{}
			}
			if u.Old == cur {
				t.Skip("the stale expectation happens to be right")
			}
			u.New = sm.drawChangeset(t, "new "+name)
		}
		if u.Old == u.New {
			t.Skip("a move to the same value")
		}
		if u.Old != cur {
			losers[name] = cur
		}
		ups = append(ups, u)
	}
	defer sm.snapshotStays(t, "UpdateRefs")()
	err := sm.handle(t).UpdateRefs(ups...)
	if len(losers) > 0 {
		var ce *core.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("UpdateRefs(%v) with stale expectations on %v: got %v, want *ConflictError", ups, losers, err)
		}
		want, ok := losers[ce.Ref]
		if !ok || ce.Current != want {
			t.Fatalf("UpdateRefs conflict names %q current %s; stale refs and their values are %v", ce.Ref, short(ce.Current), losers)
		}
		return
	}
	if err != nil {
		t.Fatalf("UpdateRefs(%v): %v", ups, err)
	}
	for _, u := range ups {
		m.moveRef(u.Name, u.Old, u.New)
	}
}

// snapshotStays takes a snapshot now and returns a check, to defer, that
// the snapshot still shows the refs it showed: an operation in between
// (what) must not change an earlier snapshot.
func (sm *storeMachine) snapshotStays(t *rapid.T, what string) func() {
	before, err := sm.handles[0].Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	beforeRefs := map[string]core.ID{}
	for n, id := range sm.m.refs {
		beforeRefs[n] = id
	}
	return func() {
		if r := recover(); r != nil {
			panic(r) // the step already failed; report that, not this
		}
		got, err := before.Refs()
		if err != nil {
			t.Fatalf("Refs of an earlier snapshot: %v", err)
		}
		gotRefs := map[string]core.ID{}
		for _, r := range got {
			gotRefs[r.Name] = r.ID
		}
		if err := sameRefs(gotRefs, beforeRefs); err != nil {
			t.Fatalf("a snapshot taken before %s changed: %v", what, err)
		}
	}
}

// reopen closes every handle and opens them again on the same files: a
// clean shutdown.
func (sm *storeMachine) reopen(t *rapid.T) {
	n := len(sm.handles)
	for i, s := range sm.handles {
		if err := s.Close(); err != nil {
			t.Fatalf("Close (handle %d): %v", i, err)
		}
	}
	sm.handles = nil
	sm.openAll(t, n)
}

// crash takes a crash clone of the files (strict: only synced state; torn:
// a seeded part of the unsynced sectors survives, zeroed or garbage;
// process: the page cache survives and the boot id stays), opens
// it twice from identical bytes to check that recovery is deterministic,
// and continues on the first. No operation is in flight when the clone is
// taken (only, perhaps, a background checkpoint, which changes no state the
// model sees), so the model after the crash is the model before it.
func (sm *storeMachine) crash(t *rapid.T) {
	model := rapid.SampledFrom([]faultfs.Model{faultfs.Strict, faultfs.Torn, faultfs.ProcessCrash}).Draw(t, "crashModel")
	seed := rapid.Int64().Draw(t, "crashSeed")
	// b is a process-crash clone of a, so the two hold identical bytes even
	// if a background checkpoint of the live handles writes between the
	// calls (two clones of sm.fs taken one after the other could differ).
	a := sm.fs.CrashClone(model, seed)
	b := a.CrashClone(faultfs.ProcessCrash, 0)
	n := len(sm.handles)
	sm.closeAll()

	opts := sm.opts
	opts.FS = b
	sb, err := core.Open(storeDir, opts)
	if err != nil {
		t.Fatalf("Open after a %v crash (seed %d), second clone: %v", model, seed, err)
	}
	sm.fs = a
	sm.openAll(t, n)
	da, err := dumpStore(sm.handles[0], sm.m.order)
	if err != nil {
		t.Fatalf("after a %v crash (seed %d): %v", model, seed, err)
	}
	db, err := dumpStore(sb, sm.m.order)
	if err != nil {
		t.Fatalf("after a %v crash (seed %d), second clone: %v", model, seed, err)
	}
	_ = sb.Close()
	if da != db {
		t.Fatalf("recovery of identical bytes (%v crash, seed %d) is not deterministic:\n--- first open\n%s--- second open\n%s", model, seed, da, db)
	}
}

// check is the invariant: every handle sees exactly the model.
func (sm *storeMachine) check(t *rapid.T) {
	for i, s := range sm.handles {
		if err := checkAgainstModel(s, sm.m); err != nil {
			t.Fatalf("handle %d of %d disagrees with the model: %v", i, len(sm.handles), err)
		}
	}
	if info, err := sm.handles[0].Info(); err == nil && info.CheckpointSeq > 0 {
		checkpointsSeen.Add(1)
	}
}

// checkpointsSeen counts invariant checks made after a checkpoint beyond
// the initial one was written, so the test can show its histories reach
// checkpoints at all.
var checkpointsSeen atomic.Int64

// storeMachineProp is the journal-replay property, parameterised by a
// weakening so that the canary tests can run it against a broken store.
func storeMachineProp(weaken testknobs.Weakening) func(*rapid.T) {
	return machineProp(newStoreMachine, weaken)
}

func (sm *storeMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"commit": sm.commit,
		"commits": func(t *rapid.T) {
			// A burst, so that checkpoints are crossed often.
			for i, n := 0, rapid.IntRange(2, 6).Draw(t, "burst"); i < n; i++ {
				sm.commit(t)
			}
		},
		"updateRefs": sm.update,
		"reopen":     sm.reopen,
		"crash":      sm.crash,
		"":           sm.check,
	}
}

// TestStoreMatchesModelOfAcknowledgedTransactions holds the journal, its
// replay and every projection (refs, reflogs, changesets, trees, blobs,
// index lookups, first-parent walks) against the model of acknowledged
// transactions, across checkpoints, clean reopens and strict and torn crash
// clones.
func TestStoreMatchesModelOfAcknowledgedTransactions(t *testing.T) {
	checkpointsSeen.Store(0)
	checkSteps(t, 100, 60, storeMachineProp(0))
	if checkpointsSeen.Load() == 0 {
		t.Fatal("no history reached a checkpoint; the property did not exercise checkpoint replay")
	}
	t.Logf("%d invariant checks ran on a store with a checkpoint past the initial one", checkpointsSeen.Load())
}

// FuzzStoreMachine runs the same state machine from fuzzer-chosen bytes.
func FuzzStoreMachine(f *testing.F) {
	f.Fuzz(rapid.MakeFuzz(storeMachineProp(0)))
}

// TestCanaryStorePropertyCatchesSkippedDatasync runs the journal property
// against the store's SkipDatasync canary: acknowledged commits are not
// durable, so a strict crash clone loses them and the model notices.
func TestCanaryStorePropertyCatchesSkippedDatasync(t *testing.T) {
	expectFailure(t, 40, "a store that never fdatasyncs the journal (SkipDatasync)", storeMachineProp(testknobs.SkipDatasync))
}

// TestCanaryStorePropertyCatchesSkippedDirSync runs it against
// SkipDirSync: a new segment or loose object name is not durable, so a
// crash clone loses acknowledged data.
func TestCanaryStorePropertyCatchesSkippedDirSync(t *testing.T) {
	expectFailure(t, 40, "a store that skips directory syncs (SkipDirSync)", storeMachineProp(testknobs.SkipDirSync))
}
