package core

import (
	"reflect"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestDecodeTxnIntoReusesNothingStale decodes frames of different shapes
// into one txn, as replay does, and checks each against a fresh decode: a
// frame with fewer objects or moves than the one before must not carry the
// earlier frame's over.
func TestDecodeTxnIntoReusesNothingStale(t *testing.T) {
	blob := func(s string) txnObj {
		enc := []byte(s) // a blob's encoding is its bytes
		return txnObj{Kind: objects.KindBlob, ID: objects.IDOf(objects.KindBlob, enc), Data: enc, Size: int64(len(enc))}
	}
	at := time.Unix(1700000000, 5).UTC()
	frames := []*txn{
		{Time: at, Objs: []txnObj{blob("a"), blob("bb"), blob("ccc")},
			Moves: []refs.Move{{Name: "x", New: ID{1}}, {Name: "y", Old: ID{2}, New: ID{3}}}},
		{Time: at.Add(time.Second), Objs: []txnObj{blob("d")}},
		{Time: at.Add(2 * time.Second), Moves: []refs.Move{{Name: "z", Old: ID{4}}}},
		{Time: at.Add(3 * time.Second), Objs: []txnObj{blob("e"), blob("f")}, Moves: []refs.Move{{Name: "x", Old: ID{1}, New: ID{5}}}},
	}
	var scratch txn
	for i, f := range frames {
		p := encodeTxn(f)
		want, err := decodeTxn(p)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if err := decodeTxnInto(&scratch, p); err != nil {
			t.Fatalf("frame %d into scratch: %v", i, err)
		}
		if !scratch.Time.Equal(want.Time) || len(scratch.Objs) != len(want.Objs) || len(scratch.Moves) != len(want.Moves) ||
			(len(want.Objs) > 0 && !reflect.DeepEqual(scratch.Objs, want.Objs)) ||
			(len(want.Moves) > 0 && !reflect.DeepEqual(scratch.Moves, want.Moves)) {
			t.Fatalf("frame %d: decoded into scratch as %+v; a fresh decode gives %+v", i, scratch, *want)
		}
	}
}

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
		return []*commitReq{{t: &txn{Moves: []refs.Move{{Name: name, Old: old, New: ID{9}}}}}}
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
