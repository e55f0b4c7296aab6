package main

import (
	"errors"
	"fmt"

	"github.com/swarmops/swarmops/core"
)

// advanceFrom says whether --advance's ref moves after the commit rather
// than in its frame, and from what value: from absence when it does not
// exist and --create is given, from its value when that is an ancestor of
// one of the parents ps.
func advanceFrom(sn *core.Snapshot, c commitFlags, ps []core.ID) (from core.ID, after bool, err error) {
	if c.advance == "" || len(ps) == 0 {
		return core.ID{}, false, nil
	}
	v, err := sn.Ref(c.advance)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return core.ID{}, c.create, nil
	case err != nil:
		return core.ID{}, false, err
	case v == ps[0]:
		return v, false, nil
	}
	// Only land moves a protected ref: the commit's own frame refuses the
	// move and writes nothing, where a second transaction would leave the
	// changeset behind.
	if pat, err := sn.ProtectedBy(c.advance); err != nil || pat != "" {
		return core.ID{}, false, err
	}
	for _, p := range ps {
		mb, err := sn.MergeBase(v, p)
		if err != nil {
			return core.ID{}, false, err
		}
		if mb == v {
			return v, true, nil
		}
	}
	return v, false, nil
}

// advanceConflict adds to err, a commit refused because --advance's ref is
// not at the first parent and holds work no parent has, a hint that says
// how to bring the two together. A ref that moved since sn was read, or
// does not exist, gets none: sn cannot say how it relates to the parents.
func advanceConflict(sn *core.Snapshot, c commitFlags, ps []core.ID, err error) error {
	var ce *core.ConflictError
	if len(ps) == 0 || !errors.As(err, &ce) || ce.Ref != c.advance || ce.Current.IsZero() {
		return err
	}
	if v, rerr := sn.Ref(c.advance); rerr != nil || v != ce.Current {
		return err
	}
	mb, merr := sn.MergeBase(ce.Current, ps[0])
	if merr != nil {
		return err
	}
	ref, p := c.advance, short(ps[0])
	merge := fmt.Sprintf("merge it in with --parent %s --parent %s", p, ref)
	out := classify(err)
	switch {
	case mb == ps[0] && c.dir != "":
		out.hint = fmt.Sprintf("%s moved on from %s: bring the tree onto it first (swarmops update %s --onto %s), or %s", ref, p, c.dir, ref, merge)
	case mb == ps[0]:
		out.hint = fmt.Sprintf("%s moved on from %s: commit on it (--parent %s), or %s", ref, p, ref, merge)
	case c.dir != "":
		out.hint = fmt.Sprintf("%s holds work %s lacks: %s, or land %s first and update %s onto the result", ref, p, merge, ref, c.dir)
	default:
		out.hint = fmt.Sprintf("%s holds work %s lacks: %s, or land %s first and commit on the result", ref, p, merge, ref)
	}
	return out
}
