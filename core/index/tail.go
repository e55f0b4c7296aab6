package index

import (
	"bytes"
	"slices"
	"sort"

	"github.com/swarmops/swarmops/core/objects"
)

// chunk is an immutable sorted set of records.
type chunk struct {
	cs  []CSRecord  // by id
	obj []ObjRecord // by id
	dl  []deltaRec  // by (delta, id)
}

func (c *chunk) size() int { return len(c.cs) + len(c.obj) }

// mergeChunks merges a (newer) and b (older) into a new chunk; on equal ids
// a's record wins.
func mergeChunks(a, b *chunk) *chunk {
	return &chunk{
		cs:  mergeSorted(a.cs, b.cs, cmpCS),
		obj: mergeSorted(a.obj, b.obj, cmpObj),
		dl:  mergeSorted(a.dl, b.dl, cmpDelta),
	}
}

func mergeSorted[T any](a, b []T, cmp func(x, y T) int) []T {
	out := make([]T, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch c := cmp(a[0], b[0]); {
		case c < 0:
			out, a = append(out, a[0]), a[1:]
		case c > 0:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// Tail is an immutable in-memory set of index records: the records added
// since the last run was written. Adding returns a new Tail and leaves the
// old one untouched, so a reader holding a View never sees a change and
// never takes a lock.
//
// It is a list of sorted chunks whose sizes at least double from newest to
// oldest (a binary counter, as in a log-structured merge): Add makes a
// chunk of the batch and merges it with the newest chunks while they are
// not larger, so each record is copied O(log n) times and a lookup
// binary-searches O(log n) chunks.
type Tail struct {
	chunks []*chunk // oldest (largest) first
	n      int
}

// Len returns the number of records in the tail.
func (t *Tail) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

func (t *Tail) with(b Batch) *Tail {
	cs := sortedCS(b.Changesets)
	c := &chunk{cs: cs, obj: sortedObj(b.Objects), dl: deltaRows(cs)}
	var old []*chunk
	if t != nil {
		old = t.chunks
	}
	k := len(old)
	for k > 0 && old[k-1].size() <= c.size() {
		c = mergeChunks(c, old[k-1])
		k--
	}
	out := make([]*chunk, k, k+1)
	copy(out, old[:k])
	out = append(out, c)
	n := 0
	for _, c := range out {
		n += c.size()
	}
	return &Tail{chunks: out, n: n}
}

// newestFirst calls f for each chunk from newest to oldest until it returns false.
func (t *Tail) newestFirst(f func(c *chunk) bool) {
	if t == nil {
		return
	}
	for i := len(t.chunks) - 1; i >= 0; i-- {
		if !f(t.chunks[i]) {
			return
		}
	}
}

func (t *Tail) changeset(id objects.ID) (CSRecord, bool) {
	var out CSRecord
	found := false
	t.newestFirst(func(c *chunk) bool {
		i, ok := slices.BinarySearchFunc(c.cs, id, func(r CSRecord, id objects.ID) int { return cmpID(r.ID, id) })
		if ok {
			out, found = c.cs[i], true
		}
		return !ok
	})
	return out, found
}

func (t *Tail) object(id objects.ID) (ObjRecord, bool) {
	var out ObjRecord
	found := false
	t.newestFirst(func(c *chunk) bool {
		i, ok := slices.BinarySearchFunc(c.obj, id, func(r ObjRecord, id objects.ID) int { return cmpID(r.ID, id) })
		if ok {
			out, found = c.obj[i], true
		}
		return !ok
	})
	return out, found
}

func (t *Tail) prefix(p objects.Prefix, max int, out []Match) []Match {
	low := p.Low()
	t.newestFirst(func(c *chunk) bool {
		i := sort.Search(len(c.cs), func(i int) bool { return bytes.Compare(c.cs[i].ID[:], low[:]) >= 0 })
		for n := 0; i < len(c.cs) && n < max && p.Match(c.cs[i].ID); i, n = i+1, n+1 {
			out = append(out, Match{ID: c.cs[i].ID, Kind: objects.KindChangeset})
		}
		i = sort.Search(len(c.obj), func(i int) bool { return bytes.Compare(c.obj[i].ID[:], low[:]) >= 0 })
		for n := 0; i < len(c.obj) && n < max && p.Match(c.obj[i].ID); i, n = i+1, n+1 {
			out = append(out, Match{ID: c.obj[i].ID, Kind: c.obj[i].Kind})
		}
		return true
	})
	return out
}

func (t *Tail) byDelta(h objects.Hash, out []objects.ID) []objects.ID {
	t.newestFirst(func(c *chunk) bool {
		i := sort.Search(len(c.dl), func(i int) bool { return bytes.Compare(c.dl[i].Delta[:], h[:]) >= 0 })
		for ; i < len(c.dl) && c.dl[i].Delta == h; i++ {
			out = append(out, c.dl[i].ID)
		}
		return true
	})
	return out
}

// iters returns merged sorted iterators over the whole tail.
func (t *Tail) iters() (iter[CSRecord], iter[ObjRecord], iter[deltaRec]) {
	var cs []iter[CSRecord]
	var obj []iter[ObjRecord]
	var dl []iter[deltaRec]
	t.newestFirst(func(c *chunk) bool {
		cs = append(cs, sliceIter(c.cs))
		obj = append(obj, sliceIter(c.obj))
		dl = append(dl, sliceIter(c.dl))
		return true
	})
	return mergeIters(cs, cmpCS), mergeIters(obj, cmpObj), mergeIters(dl, cmpDelta)
}
