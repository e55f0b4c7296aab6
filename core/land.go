package core

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
)

// DefaultLandAttempts bounds Land's retries after lost races when
// LandOptions.MaxAttempts is zero.
const DefaultLandAttempts = 16

// TestHookLandBeforeCommit, when non-nil, is called by Land after it has
// computed a merge (or chosen a fast-forward) and before it tries to commit
// it, with the 1-based attempt
// number. It exists so tests can make a race happen on purpose (the CLI sets
// it only from SWARMOPS_TEST_LAND_PAUSE). It is nil in normal operation.
var TestHookLandBeforeCommit func(attempt int)

// Land applies the change made by the changeset change onto the head of the
// ref onto, and moves the ref.
//
// Its contract, in order of precedence:
//
//   - If onto's first-parent history already holds a changeset with change's
//     delta hash (change itself, an earlier land of it, or any changeset that
//     made exactly the same change), or a merge whose parent is change, Land
//     does nothing and reports NoOp with Changeset = the head. Retrying a land
//     after a crash therefore never applies a change twice.
//   - If the head is change's first parent, onto is fast-forwarded to change
//     (one compare-and-swap, no new changeset).
//   - Otherwise Land merges three ways: base is the nearest common ancestor of
//     the head and change (highest generation; the empty tree if none), and
//     every path change made between base and change is applied to the head.
//     A path that both sides changed differently, or a file that would land
//     where the other side has a directory, is a conflict: Land fails with a
//     *MergeConflictError listing every such path and writes nothing. If every
//     path already has change's value, there is nothing to record and Land
//     reports NoOp. Otherwise it commits one changeset with Parents [head,
//     change] that advances onto in the same journal frame.
//
// When the compare-and-swap loses (another writer moved onto first), Land
// re-merges only the paths the target gained between the head it merged
// against and the new head (LandResult.Remerged records how many, per
// retry), and tries again, at most o.MaxAttempts times in all (0:
// DefaultLandAttempts). Running out of attempts is ErrBusy: the target is
// contended, and trying later is the remedy.
//
// The NoOp check walks onto's first-parent history down to the oldest other
// changeset sharing change's delta hash, so its cost grows with how far back
// such a changeset is, never with the store's size. Finding the nearest
// common ancestor walks both histories down to it, as git's merge-base does:
// a change forked long ago costs a walk over everything landed since. The
// merge itself costs what the change and the target's movement touch, not
// the size of the trees.
func (s *Store) Land(change ID, onto string, o LandOptions) (*LandResult, error) {
	maxAttempts := o.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultLandAttempts
	}
	fail := func(err error) (*LandResult, error) {
		return nil, fmt.Errorf("land %s onto %q: %w", errs.Short(change), onto, err)
	}
	sn, err := s.Snapshot()
	if err != nil {
		return fail(err)
	}
	cs, err := sn.Changeset(change)
	if err != nil {
		return fail(err)
	}
	head, err := sn.Ref(onto)
	if err != nil {
		return fail(err)
	}
	res := &LandResult{}
	agent := o.Agent
	if agent == "" {
		agent = cs.Agent
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("land %s onto %s", errs.Short(change), onto)
	}

	var (
		m        *pathMerge
		base     ID
		prevHead ID
		blobs    = make(map[ID][]byte)
		release  func()
	)
	defer func() {
		if release != nil {
			release()
		}
	}()
	// keepTurn is called after a lost race. The writer lock serves writers
	// in arrival order (C8), so a loser that queued again for each retry
	// would find, at its next turn, that every writer queued ahead of it
	// had moved the target again: with 32 landers, one would win per round.
	// The loser therefore takes the writer lock once more and keeps it
	// until it has landed: nothing else moves the target meanwhile, and its
	// next attempt (or, if the target moved while it queued, the one after)
	// wins.
	keepTurn := func() error {
		if release != nil {
			return nil
		}
		var err error
		release, err = s.writer.Hold()
		return err
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		res.Attempts = attempt
		if head.IsZero() {
			return fail(fmt.Errorf("%w: ref %q was deleted", ErrNotFound, onto))
		}
		done, err := landed(sn, cs, change, head, prevHead)
		if err != nil {
			return fail(err)
		}
		if done {
			res.NoOp, res.Changeset = true, head
			return res, nil
		}
		if len(cs.Parents) > 0 && cs.Parents[0] == head {
			if attempt > 1 {
				res.Remerged = append(res.Remerged, 0)
			}
			if TestHookLandBeforeCommit != nil {
				TestHookLandBeforeCommit(attempt)
			}
			err := s.UpdateRefs(RefUpdate{Name: onto, Old: head, New: change})
			if err == nil {
				res.Changeset = change
				return res, nil
			}
			cur, lost := lostRace(err, onto)
			if !lost {
				return fail(err)
			}
			if err := keepTurn(); err != nil {
				return fail(err)
			}
			// The fast-forward was the merge whose base and head are both
			// the old head: record it, so the retry re-merges only what
			// the target gained.
			base = head
			if m, err = buildMerge(sn, base, head, change); err != nil {
				return fail(err)
			}
			prevHead, head = head, cur
			if sn, err = s.snapshotWith(cur); err != nil {
				return fail(err)
			}
			continue
		}

		nb, err := mergeBase(sn, head, change)
		if err != nil {
			return fail(err)
		}
		switch {
		case m == nil || nb != base:
			base = nb
			if m, err = buildMerge(sn, base, head, change); err != nil {
				return fail(err)
			}
			if attempt > 1 {
				res.Remerged = append(res.Remerged, len(m.paths))
			}
		case prevHead != head:
			pcs, err := sn.Diff(prevHead, head)
			if err != nil {
				return fail(err)
			}
			res.Remerged = append(res.Remerged, m.advanceHead(headEdits(pcs)))
		case attempt > 1:
			res.Remerged = append(res.Remerged, 0)
		}

		edits, conflicts := m.result()
		if len(conflicts) > 0 {
			return fail(&MergeConflictError{Paths: conflicts})
		}
		if len(edits) == 0 {
			res.NoOp, res.Changeset = true, head
			return res, nil
		}
		changes := make([]Change, len(edits))
		for i, e := range edits {
			changes[i] = Change{Path: e.Path, Delete: e.Delete, Mode: e.Entry.Mode}
			if e.Delete {
				continue
			}
			data, ok := blobs[e.Entry.ID]
			if !ok {
				if data, err = sn.Blob(e.Entry.ID); err != nil {
					return fail(fmt.Errorf("path %q: %w", e.Path, err))
				}
				blobs[e.Entry.ID] = data
			}
			changes[i].Data = data
		}
		if TestHookLandBeforeCommit != nil {
			TestHookLandBeforeCommit(attempt)
		}
		id, err := s.Commit(CommitRequest{
			Parents: []ID{head, change},
			Changes: changes,
			Agent:   agent,
			Message: msg,
			Advance: onto,
		})
		if err == nil {
			res.Changeset = id
			return res, nil
		}
		cur, lost := lostRace(err, onto)
		if !lost {
			return fail(err)
		}
		if err := keepTurn(); err != nil {
			return fail(err)
		}
		prevHead, head = head, cur
		if sn, err = s.snapshotWith(cur); err != nil {
			return fail(err)
		}
	}
	return fail(fmt.Errorf("%w: the target moved during each of %d attempts", ErrBusy, maxAttempts))
}

// lostRace reports whether err is a failed compare-and-swap of ref, and the
// ref's current value.
func lostRace(err error, ref string) (ID, bool) {
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Ref == ref {
		return ce.Current, true
	}
	return ID{}, false
}

// snapshotWith returns a snapshot that holds changeset id (any snapshot if
// id is zero). A lost compare-and-swap makes the value it reports durable
// before returning (transact), so the first snapshot normally holds it; the
// wait (at most the store's lock timeout, then ErrBusy) is kept as a guard.
func (s *Store) snapshotWith(id ID) (*Snapshot, error) {
	deadline := time.Now().Add(s.o.LockTimeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		sn, err := s.Snapshot()
		if err != nil || id.IsZero() {
			return sn, err
		}
		_, err = sn.Changeset(id)
		switch {
		case err == nil:
			return sn, nil
		case !errors.Is(err, ErrNotFound):
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("%w: changeset %s, the target's new head, is not durable after %v", ErrBusy, errs.Short(id), s.o.LockTimeout)
		}
		time.Sleep(delay)
	}
}

// buildMerge decides every path change changed since base against head.
// It reads only what the decisions need: the diff from base to change,
// which skips the subtrees the two share, and head at those paths alone.
// Its cost therefore follows the size of the change, however large head's
// tree has grown. (It flattened all three trees once; with 32 landers
// racing onto a main of 32,000 files, a loser holding the writer lock
// spent most of the lock timeout there.)
func buildMerge(sn *Snapshot, base, head, change ID) (*pathMerge, error) {
	d, err := sn.Diff(base, change)
	if err != nil {
		return nil, err
	}
	b := make(map[string]objects.Entry, len(d))
	t := make(map[string]objects.Entry, len(d))
	paths := make([]string, len(d))
	for i, pc := range d {
		if pc.Op != "add" {
			b[pc.Path] = pc.Old
		}
		if pc.Op != "delete" {
			t[pc.Path] = pc.New
		}
		paths[i] = pc.Path
	}
	h, dirs, err := headAt(sn, head, paths)
	if err != nil {
		return nil, err
	}
	return newPathMergeAt(b, h, t, dirs), nil
}

// headEdits turns the target's diff between two heads into advanceHead's
// edits.
func headEdits(d []PathChange) []headEdit {
	edits := make([]headEdit, len(d))
	for i, pc := range d {
		edits[i] = headEdit{Path: pc.Path, Delete: pc.Op == "delete", Entry: pc.New, Had: pc.Op != "add"}
	}
	return edits
}

// headAt reads changeset head's tree at the given file paths: the file at
// each path and at each of its ancestor directories, where there is one,
// and for each path that is a directory, the number of files below it.
func headAt(sn *Snapshot, head ID, paths []string) (map[string]objects.Entry, map[string]int, error) {
	files := make(map[string]objects.Entry)
	dirs := make(map[string]int)
	if head.IsZero() || len(paths) == 0 {
		return files, dirs, nil
	}
	cs, err := sn.Changeset(head)
	if err != nil {
		return nil, nil, err
	}
	trees := make(map[ID]*objects.Tree)
	tree := func(id ID) (*objects.Tree, error) {
		if t, ok := trees[id]; ok {
			return t, nil
		}
		t, err := sn.Tree(id)
		if err != nil {
			return nil, err
		}
		trees[id] = t
		return t, nil
	}
	var count func(id ID) (int, error)
	count = func(id ID) (int, error) {
		t, err := tree(id)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, e := range t.Entries {
			if !e.Mode.IsDir() {
				n++
				continue
			}
			k, err := count(e.ID)
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	}
	for _, p := range paths {
		dir := cs.Root
		for end := 0; end < len(p); {
			next := strings.IndexByte(p[end:], '/')
			last := next < 0
			if last {
				next = len(p)
			} else {
				next += end
			}
			t, err := tree(dir)
			if err != nil {
				return nil, nil, err
			}
			e, ok := t.Lookup(p[end:next])
			if !ok {
				break
			}
			sub := p[:next]
			if !e.Mode.IsDir() {
				files[sub] = e // p itself, or a file where p needs a directory
				break
			}
			if last {
				if dirs[sub], err = count(e.ID); err != nil {
					return nil, nil, err
				}
				break
			}
			dir, end = e.ID, next+1
		}
	}
	return files, dirs, nil
}

// landed reports whether head is change, or head's first-parent history
// holds another changeset with change's delta hash (an earlier land of it,
// or a changeset that made the same change). The walk stops at stop (a head
// already checked) or below the oldest such changeset's generation, so it
// costs nothing when change's delta is its own. change itself, or a merge of
// it, deeper in head's history needs no walk: change is then an ancestor of
// head, the nearest common ancestor of the two is change, and the three-way
// merge is empty, which Land reports as NoOp all the same. (The walk went
// down to change's own generation once; for a change forked from an old
// head, that was every changeset landed since the fork.)
func landed(sn *Snapshot, cs *objects.Changeset, change, head, stop ID) (bool, error) {
	if head == change {
		return true, nil
	}
	cands, err := sn.ByDelta(cs.Delta)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	want := map[ID]bool{}
	var minGen uint64
	for _, c := range cands {
		if c == change {
			continue
		}
		ccs, err := sn.Changeset(c)
		if err != nil {
			return false, err
		}
		if len(want) == 0 || ccs.Generation < minGen {
			minGen = ccs.Generation
		}
		want[c] = true
	}
	if len(want) == 0 {
		return false, nil
	}
	for id := head; !id.IsZero() && id != stop; {
		if want[id] {
			return true, nil
		}
		hcs, err := sn.Changeset(id)
		if err != nil {
			return false, err
		}
		if hcs.Generation <= minGen {
			return false, nil
		}
		for _, p := range hcs.Parents[min(1, len(hcs.Parents)):] {
			if p == change {
				return true, nil
			}
		}
		if len(hcs.Parents) == 0 {
			return false, nil
		}
		id = hcs.Parents[0]
	}
	return false, nil
}

// mergeBase returns the common ancestor of a and b with the highest
// generation (ties broken by the smaller id), or ZeroID if they share none.
//
// It walks both histories at once in decreasing generation order. A
// changeset's generation exceeds each parent's, so every descendant of a
// changeset is visited before it: when a changeset comes off the queue, it
// carries every mark it will ever get, and the first one marked from both
// sides is the nearest common ancestor.
func mergeBase(sn *Snapshot, a, b ID) (ID, error) {
	const fromA, fromB = 1, 2
	marks := make(map[ID]uint8)
	q := &genQueue{}
	push := func(id ID, mark uint8) error {
		old, seen := marks[id]
		marks[id] = old | mark
		if seen {
			return nil
		}
		cs, err := sn.Changeset(id)
		if err != nil {
			return err
		}
		heap.Push(q, genItem{id: id, gen: cs.Generation, parents: cs.Parents})
		return nil
	}
	if err := push(a, fromA); err != nil {
		return ID{}, err
	}
	if err := push(b, fromB); err != nil {
		return ID{}, err
	}
	for q.Len() > 0 {
		it := heap.Pop(q).(genItem)
		mk := marks[it.id]
		if mk == fromA|fromB {
			return it.id, nil
		}
		for _, p := range it.parents {
			if err := push(p, mk); err != nil {
				return ID{}, err
			}
		}
	}
	return ID{}, nil
}

type genItem struct {
	id      ID
	gen     uint64
	parents []ID
}

// genQueue is a max-heap by generation, then min by id.
type genQueue []genItem

func (q genQueue) Len() int { return len(q) }
func (q genQueue) Less(i, j int) bool {
	if q[i].gen != q[j].gen {
		return q[i].gen > q[j].gen
	}
	return bytes.Compare(q[i].id[:], q[j].id[:]) < 0
}
func (q genQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *genQueue) Push(x any)   { *q = append(*q, x.(genItem)) }
func (q *genQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
