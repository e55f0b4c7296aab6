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
// try would have. An error reading the store or the tree is returned, to
// take err's place: a fault is reported, never swallowed.
func committedBefore(s *core.Store, c commitFlags, ps []core.ID, changes []core.Change, err error) (core.ID, bool, error) {
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Ref != c.advance || ce.Current.IsZero() || len(ps) != 1 || c.carried {
		return core.ID{}, false, nil
	}
	sn, err := s.Snapshot()
	if err != nil {
		return core.ID{}, false, err
	}
	cs, err := sn.Changeset(ce.Current)
	if err != nil {
		return core.ID{}, false, err
	}
	if !slices.Equal(cs.Parents, ps) {
		return core.ID{}, false, nil
	}
	pcs, err := sn.Diff(ps[0], ce.Current)
	if err != nil {
		return core.ID{}, false, err
	}
	if len(pcs) != len(changes) {
		return core.ID{}, false, nil
	}
	want := make(map[string]objects.Entry, len(pcs))
	for _, pc := range pcs {
		want[pc.Path] = objects.Entry{Mode: pc.New.Mode, ID: pc.New.ID}
	}
	for _, ch := range changes {
		w, ok := want[ch.Path]
		if !ok {
			return core.ID{}, false, nil
		}
		if ch.Delete {
			if w.Mode != 0 {
				return core.ID{}, false, nil
			}
			continue
		}
		data := ch.Data
		if data == nil && ch.Open != nil {
			if data, err = ch.Open(); err != nil {
				return core.ID{}, false, err
			}
		}
		mode := ch.Mode
		if mode == 0 {
			mode = objects.ModeFile
		}
		if w.Mode != mode || w.ID != objects.BlobID(data) {
			return core.ID{}, false, nil
		}
	}
	return ce.Current, true, nil
}
