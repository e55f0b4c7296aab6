package core

import (
	"fmt"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/refs"
)

// ErrProtected: a ref move by an operation other than a land, on a ref
// that a protection pattern matches (Store.Protect). Nothing is written.
var ErrProtected = errs.ErrProtected

// ProtectedError is a refused move of a protected ref: the ref (Ref), the
// pattern that protects it (Pattern) and the operation refused (Op).
// errors.Is(err, ErrProtected) holds for it.
type ProtectedError = errs.ProtectedError

// Protection is one protected pattern of a store and the journal frame
// that protected it.
type Protection struct {
	Pattern string // a ref name (main), or a prefix ending in "/" (release/)
	Seq     uint64
}

// Protect marks the refs that pattern matches (a ref name, or a prefix
// ending in "/") as movable only by Land: from the moment Protect returns,
// every other move of an existing matching ref (UpdateRefs, a commit's
// Advance, Undo, an import) is refused with a *ProtectedError. Creating a
// matching ref that does not exist is still allowed: nothing it held is
// lost, and a land needs its target to exist. With on false, Protect clears
// the pattern.
//
// The protection travels in a journal frame of its own, so it is
// acknowledged exactly as a ref move is (durable before Protect returns),
// checked under the writer lock against the same projection as the moves
// it refuses, and kept across checkpoints in the checkpoint file.
// Protecting a protected pattern, or clearing one that is not, writes the
// frame anyway and changes nothing.
//
// The check trusts a move's recorded operation: a Go caller that records
// OpLand itself (UpdateRefsAs, CommitRequest.Op) is taken for a land. The
// CLI and the MCP tools never do; they reach OpLand only through Land.
func (s *Store) Protect(pattern string, on bool) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := refs.ValidatePattern(pattern); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	t := &txn.Txn{Time: s.opts.Now().UTC(), Protect: []refs.Protection{{Pattern: pattern, On: on}}}
	return s.pipe.Commit(t, nil)
}

// Protected lists the protected patterns as of the snapshot, sorted. For a
// snapshot older than the process's last checkpoint it answers as of that
// checkpoint, or, once a reflog read has made the ref table whole, from the
// last change of each pattern the checkpoint kept.
func (sn *Snapshot) Protected() ([]Protection, error) {
	sn.s.view.mu.Lock()
	defer sn.s.view.mu.Unlock()
	pats, seqs := sn.s.view.proj.Refs.Protected(sn.seq)
	out := make([]Protection, len(pats))
	for i := range pats {
		out[i] = Protection{Pattern: pats[i], Seq: seqs[i]}
	}
	return out, nil
}

// ProtectedBy returns the pattern that protects ref name as of the
// snapshot, or "".
func (sn *Snapshot) ProtectedBy(name string) (string, error) {
	ps, err := sn.Protected()
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if refs.Matches(p.Pattern, name) {
			return p.Pattern, nil
		}
	}
	return "", nil
}
