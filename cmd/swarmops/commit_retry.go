package main

import (
	"errors"
	"slices"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// committedBefore reports whether err, the failure of a work tree's
// commit --dir --advance, is its own earlier try seen from the other side:
// a try whose answer was lost (a server killed after the commit was
// durable, before the tree recorded it) left the ref at a changeset with
// the same parents and the same changes, and the tree at its old base, so
// every retry would fail the ref's compare-and-swap for good. That
// changeset is returned, to be recorded as the tree's new base as the first
// try would have.
func committedBefore(s *core.Store, c commitFlags, ps []core.ID, changes []core.Change, err error) (core.ID, bool) {
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Ref != c.advance || ce.Current.IsZero() || len(ps) != 1 || c.carried {
		return core.ID{}, false
	}
	sn, serr := s.Snapshot()
	if serr != nil {
		return core.ID{}, false
	}
	cs, serr := sn.Changeset(ce.Current)
	if serr != nil || !slices.Equal(cs.Parents, ps) {
		return core.ID{}, false
	}
	pcs, serr := sn.Diff(ps[0], ce.Current)
	if serr != nil || len(pcs) != len(changes) {
		return core.ID{}, false
	}
	want := make(map[string]objects.Entry, len(pcs))
	for _, pc := range pcs {
		want[pc.Path] = objects.Entry{Mode: pc.New.Mode, ID: pc.New.ID}
	}
	for _, ch := range changes {
		w, ok := want[ch.Path]
		if !ok {
			return core.ID{}, false
		}
		if ch.Delete {
			if w.Mode != 0 {
				return core.ID{}, false
			}
			continue
		}
		data := ch.Data
		if data == nil && ch.Open != nil {
			if data, serr = ch.Open(); serr != nil {
				return core.ID{}, false
			}
		}
		mode := ch.Mode
		if mode == 0 {
			mode = objects.ModeFile
		}
		if w.Mode != mode || w.ID != objects.BlobID(data) {
			return core.ID{}, false
		}
	}
	return ce.Current, true
}
