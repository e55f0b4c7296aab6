package core

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/merge"
	"github.com/swarmops/swarmops/core/objects"
)

// This file holds the history walks and tree reads of Land: whether the
// change is on the target already, the merge base, and the merge built
// from the trees without flattening them.

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
// before returning (internal/pipeline), so the first snapshot normally holds it; the
// wait (at most the store's lock timeout, then ErrBusy) is kept as a guard.
func (s *Store) snapshotWith(id ID) (*Snapshot, error) {
	deadline := time.Now().Add(s.opts.LockTimeout)
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
			return nil, fmt.Errorf("%w: changeset %s, the target's new head, is not durable after %v", ErrBusy, errs.Short(id), s.opts.LockTimeout)
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
func buildMerge(sn *Snapshot, base, head, change ID) (*merge.Merge, error) {
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
	return merge.NewAt(b, h, t, dirs), nil
}

// headEdits turns the target's diff between two heads into AdvanceHead's
// edits.
func headEdits(d []PathChange) []merge.HeadEdit {
	edits := make([]merge.HeadEdit, len(d))
	for i, pc := range d {
		edits[i] = merge.HeadEdit{Path: pc.Path, Delete: pc.Op == "delete", Entry: pc.New, Had: pc.Op != "add"}
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
