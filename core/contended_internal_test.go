package core

import (
	"testing"

	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestOwnRefsQueueWithoutLookahead checks when a commit queues with
// lookahead: only when it moves a ref from a value this handle did not
// set. Queueing with lookahead when nobody else moves the ref costs a
// second blocking wait a commit (13 % of W2's rate); queueing without it
// when another writer does would keep losers in the queue to the end.
func TestOwnRefsQueueWithoutLookahead(t *testing.T) {
	s, err := Create("/s", Options{FS: faultfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := func(name string, old ID) []*commitReq {
		return []*commitReq{{t: &txn.Txn{Moves: []refs.Move{{Name: name, Old: old, New: ID{9}}}}}}
	}
	if s.contended(req("a", ID{})) {
		t.Fatal("creating a ref this handle never saw counts as contended")
	}
	head, err := s.Commit(CommitRequest{Changes: []Change{{Path: "f", Data: []byte("1")}}, Advance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if s.contended(req("a", head)) {
		t.Fatal("moving a ref from the value this handle set counts as contended")
	}
	if !s.contended(req("a", ID{7})) {
		t.Fatal("moving a ref from a value another writer set does not count as contended")
	}
	if !s.contended(req("a", head)) {
		t.Fatal("a ref another writer moved counts as uncontended again when this handle won the last race")
	}
	if err := s.UpdateRefs(RefUpdate{Name: "b", New: head}); err != nil {
		t.Fatal(err)
	}
	if s.contended(req("b", head)) {
		t.Fatal("a ref set by UpdateRefs of this handle counts as contended")
	}
}
