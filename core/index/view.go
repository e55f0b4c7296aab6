package index

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// View is an immutable snapshot of the index: its runs, newest first. For
// duplicate ids the newest run wins. A View never changes and takes no
// lock, so any number of readers may use one while the Index moves on.
type View struct {
	runs []*Run
}

// Runs returns the view's runs, newest first. The slice must not be modified.
func (v *View) Runs() []*Run { return v.runs }

// Changeset returns the record of changeset id.
func (v *View) Changeset(id objects.ID) (CSRecord, bool, error) {
	for _, r := range v.runs {
		if c, ok, err := r.Changeset(id); ok || err != nil {
			return c, ok, err
		}
	}
	return CSRecord{}, false, nil
}

// Object returns the kind and location of any object, changesets included.
func (v *View) Object(id objects.ID) (ObjRecord, bool, error) {
	for _, r := range v.runs {
		if o, ok, err := r.Object(id); ok || err != nil {
			return o, ok, err
		}
		if c, ok, err := r.Changeset(id); ok || err != nil {
			return ObjRecord{ID: id, Kind: objects.KindChangeset, Loc: c.Loc}, ok, err
		}
	}
	return ObjRecord{}, false, nil
}

// Prefix returns the objects (changesets, trees, blobs) whose ids start with
// p, sorted by id, at most max of them (max < 1 means 1). A unique prefix
// gives one match; an ambiguous one more (ask for max >= 2 to tell); an
// unknown one none.
func (v *View) Prefix(p objects.Prefix, max int) ([]Match, error) {
	max = maxOf(max, 1)
	var out []Match
	for _, r := range v.runs {
		var err error
		if out, err = r.prefix(p, max, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b Match) int { return cmpID(a.ID, b.ID) })
	out = slices.CompactFunc(out, func(a, b Match) bool { return a.ID == b.ID })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// ErrNotFound is returned by Resolve for a prefix that matches nothing.
var ErrNotFound = errors.New("index: not found")

// ErrAmbiguous is returned by Resolve for a prefix that matches more than
// one object; the candidates are returned beside it.
var ErrAmbiguous = errors.New("index: ambiguous prefix")

// MaxCandidates bounds the candidates Resolve returns for an ambiguous prefix.
const MaxCandidates = 16

// Resolve resolves an id prefix: a unique match returns it; several return
// an error wrapping ErrAmbiguous and up to MaxCandidates of them, sorted; none
// returns an error wrapping ErrNotFound. Errors quote the prefix.
func (v *View) Resolve(p objects.Prefix) (Match, []Match, error) {
	ms, err := v.Prefix(p, MaxCandidates)
	switch {
	case err != nil:
		return Match{}, nil, err
	case len(ms) == 0:
		return Match{}, nil, fmt.Errorf("%w: prefix %q", ErrNotFound, p)
	case len(ms) > 1:
		return Match{}, ms, fmt.Errorf("%w: prefix %q matches %d or more objects", ErrAmbiguous, p, len(ms))
	}
	return ms[0], nil, nil
}

func maxOf(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// ByDelta returns the ids of all changesets whose delta hash is h, sorted.
func (v *View) ByDelta(h objects.Hash) ([]objects.ID, error) {
	var out []objects.ID
	for _, r := range v.runs {
		var err error
		if out, err = r.byDelta(h, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, cmpID)
	return slices.Compact(out), nil
}

func (v *View) iters() (iter[CSRecord], iter[ObjRecord], iter[deltaRec]) {
	var cs []iter[CSRecord]
	var obj []iter[ObjRecord]
	var dl []iter[deltaRec]
	for _, r := range v.runs {
		cs, obj, dl = append(cs, r.csIter()), append(obj, r.objIter()), append(dl, r.deltaIter())
	}
	return mergeIters(cs, cmpCS), mergeIters(obj, cmpObj), mergeIters(dl, cmpDelta)
}

// ForEachChangeset calls fn for every changeset record once, in id order
// (duplicates across sources collapsed, newest wins), stopping at the first
// error, which it returns.
func (v *View) ForEachChangeset(fn func(CSRecord) error) error {
	it, _, _ := v.iters()
	return drain(it, fn)
}

// ForEachObject calls fn for every blob and tree record once, in id order.
func (v *View) ForEachObject(fn func(ObjRecord) error) error {
	_, it, _ := v.iters()
	return drain(it, fn)
}

// drain calls fn for every record it yields, stopping at the first error
// of either, which it returns.
func drain[T any](it iter[T], fn func(T) error) error {
	for {
		r, ok, err := it()
		if err != nil || !ok {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// Counts returns the number of distinct changesets and of distinct blobs
// and trees, by iterating every source.
func (v *View) Counts() (changesets, objs int64, err error) {
	err = v.ForEachChangeset(func(CSRecord) error { changesets++; return nil })
	if err == nil {
		err = v.ForEachObject(func(ObjRecord) error { objs++; return nil })
	}
	return changesets, objs, err
}

// Verify checks every run in full (Run.Verify) and reports every problem
// found, one error per damaged run, joined.
func (v *View) Verify() error {
	var errs []error
	for _, r := range v.runs {
		if err := r.Verify(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Index is the writer side: it owns the current View and replaces it on
// every change. AddRun and Compact may be called from any goroutine; a
// reader's View is never changed under it.
type Index struct {
	fs    vfs.FS
	mu    sync.Mutex // serializes view replacement
	view  atomic.Pointer[View]
	runMu sync.Mutex // one merge at a time
}

// New returns an index without runs, whose runs live on fsys.
func New(fsys vfs.FS) *Index {
	x := &Index{fs: fsys}
	x.view.Store(&View{})
	return x
}

// Open returns an index over the run files at paths (newest first; the
// checkpoint lists them). It checks each run's header; it does not read
// the records (see View.Verify). On error the runs opened so far are
// closed.
func Open(fsys vfs.FS, paths []string) (*Index, error) {
	x := New(fsys)
	var runs []*Run
	for _, p := range paths {
		r, err := OpenRun(fsys, p)
		if err != nil {
			for _, r := range runs {
				r.Close()
			}
			return nil, err
		}
		runs = append(runs, r)
	}
	x.view.Store(&View{runs: runs})
	return x, nil
}

// View returns the current snapshot. It is cheap (one atomic load).
func (x *Index) View() *View { return x.view.Load() }

// AddRun writes batch b as the run file dst (see WriteRun for the
// durability protocol) and publishes a View in which it is the newest run.
// On error the View stays as it was and dst does not exist.
func (x *Index) AddRun(dst string, meta uint64, b Batch) (*Run, error) {
	r, err := WriteRun(x.fs, dst, meta, b)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.view.Load()
	x.view.Store(&View{runs: append([]*Run{r}, v.runs...)})
	return r, nil
}

// Compact merges the current runs into one run file dst when there are
// more than maxRuns of them (maxRuns < 1 means 1), and publishes a View
// with the merged run in their place. It returns the merged run (nil if
// nothing was done) and the retired runs. Retired runs stay open for
// readers of older Views; the caller closes and removes them once the new
// run list is in a durable checkpoint and no reader uses an older View.
func (x *Index) Compact(dst string, meta uint64, maxRuns int) (*Run, []*Run, error) {
	x.runMu.Lock()
	defer x.runMu.Unlock()
	old := x.View().runs
	if len(old) <= maxOf(maxRuns, 1) {
		return nil, nil, nil
	}
	merged, err := MergeRuns(x.fs, dst, meta, old)
	if err != nil {
		return nil, nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.view.Load()
	// Runs added while the merge ran stay in front of the merged one.
	keep := v.runs[:len(v.runs)-len(old)]
	x.view.Store(&View{runs: append(append([]*Run(nil), keep...), merged)})
	return merged, old, nil
}

// Close closes every run of the current View.
func (x *Index) Close() error {
	var errs []error
	for _, r := range x.View().runs {
		if err := r.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
