package crashsweep

import (
	"errors"
	"slices"
	"time"

	"github.com/swarmops/swarmops/core"
)

// gcLease is the lease a gc step takes on its Leases.
const gcLease = "scenario"

// doGC runs a gc step: a lease on the step's changesets, then Store.GC
// with no retention. Its effect, which the oracle holds every recovered
// state to, is derived from the scenario, not from what the collection
// did: it drops the changesets that exist and that no ref and no leased
// changeset reaches through parents. A collection that drops more (the
// GCIgnoresLeases canary) fails the reference run's final comparison.
func (r *run) doGC(op *opRecord, s *core.Store) error {
	st := op.step
	var roots []core.ID
	for _, l := range st.Leases {
		id, err := r.resolve(st.Writer, l)
		if err != nil {
			return err
		}
		roots = append(roots, id)
	}
	if len(roots) > 0 {
		if err := s.Lease(gcLease, roots, time.Hour); err != nil {
			return err
		}
	}
	drop, err := r.unreachable(s, roots)
	if err != nil {
		return err
	}
	if _, err := s.GC(core.GCOptions{}); err != nil {
		return err
	}
	op.effect.drop = drop
	return s.ReleaseLease(gcLease)
}

// unreachable returns the known changesets present in s that neither a
// ref nor roots reach.
func (r *run) unreachable(s *core.Store, roots []core.ID) ([]core.ID, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	refs, err := sn.Refs()
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		roots = append(roots, ref.ID)
	}
	seen, err := Reachable(roots, func(id core.ID) ([]core.ID, error) {
		cs, err := sn.Changeset(id)
		if err != nil {
			return nil, err
		}
		return cs.Parents, nil
	})
	if err != nil {
		return nil, err
	}
	// The changesets made so far, in the reference run and in a crashed
	// one alike: the lookups below are filesystem calls, and a crash
	// point numbers the same call in every run.
	var known []core.ID
	for _, o := range r.ops {
		known = append(known, o.effect.changesets...)
	}
	var drop []core.ID
	for _, id := range known {
		if seen[id] {
			continue
		}
		if _, err := sn.Changeset(id); err == nil {
			drop = append(drop, id)
		} else if !errors.Is(err, core.ErrNotFound) {
			return nil, err
		}
	}
	return drop, nil
}

// Reachable returns every node that roots reach through parents, the roots
// included: what a collection must keep of a graph of changesets (or of
// a model's).
func Reachable[N comparable](roots []N, parents func(N) ([]N, error)) (map[N]bool, error) {
	seen := map[N]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		ps, err := parents(n)
		if err != nil {
			return nil, err
		}
		stack = append(stack, ps...)
	}
	return seen, nil
}
