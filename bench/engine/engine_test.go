package engine

import (
	"errors"
	"os"
	"testing"
)

// TestEveryEngineRunsTheSameTransaction checks, for every engine, the
// semantics the comparison relies on: a commit needs its parent, moves the
// ref only by compare-and-swap against the parent, and its changeset is then
// found by id, by 6-byte prefix and by delta hash, in a long-lived view and
// in a fresh one; a bulk load answers the same lookups.
func TestEveryEngineRunsTheSameTransaction(t *testing.T) {
	for _, e := range Engines() {
		t.Run(e.Name(), func(t *testing.T) {
			s, err := e.Open(t.TempDir(), 2)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			var ids []Key
			var prev Key
			for i := 0; i < 3; i++ {
				tx := Gen(7, 0, i)
				tx.Parent, tx.HasParent = prev, i > 0
				id, err := s.Commit(&tx)
				if err != nil {
					t.Fatalf("commit %d: %v", i, err)
				}
				ids, prev = append(ids, id), id
			}
			head, ok, err := s.Head(RefName(0))
			if err != nil || !ok || head != prev {
				t.Fatalf("head = %x %v %v, want %x", head[:6], ok, err, prev[:6])
			}
			// A stale expectation (the ref's previous value) must lose.
			stale := Gen(7, 0, 3)
			stale.Parent, stale.HasParent = ids[1], true
			if _, err := s.Commit(&stale); !errors.Is(err, ErrConflict) {
				t.Fatalf("commit on a stale parent: err = %v, want ErrConflict", err)
			}
			// A chain's first commit must not overwrite an existing ref.
			again := Gen(7, 9, 0)
			again.Ref = RefName(0)
			if _, err := s.Commit(&again); !errors.Is(err, ErrConflict) {
				t.Fatalf("creating an existing ref: err = %v, want ErrConflict", err)
			}
			if head, _, _ := s.Head(RefName(0)); head != prev {
				t.Fatalf("a failed compare-and-swap moved the ref to %x", head[:6])
			}
			chains := [][]Txn{{Gen(7, 1, 0), Gen(7, 1, 1)}, {Gen(7, 2, 0)}}
			loaded, err := s.Load(chains)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			all := append(append(append([]Key(nil), ids...), loaded[0]...), loaded[1]...)
			v, err := s.View()
			if err != nil {
				t.Fatalf("view: %v", err)
			}
			defer v.Close()
			for _, id := range all {
				if ok, err := v.Get(id); !ok || err != nil {
					t.Errorf("get %x = %v %v", id[:6], ok, err)
				}
				if ok, err := v.Fresh(id); !ok || err != nil {
					t.Errorf("fresh get %x = %v %v", id[:6], ok, err)
				}
				if n, err := v.Prefix(id[:6]); n != 1 || err != nil {
					t.Errorf("prefix %x = %d %v", id[:6], n, err)
				}
				d, err := v.DeltaOf(id)
				if err != nil {
					t.Fatalf("delta of %x: %v", id[:6], err)
				}
				if n, err := v.ByDelta(d); n != 1 || err != nil {
					t.Errorf("by delta of %x = %d %v", id[:6], n, err)
				}
			}
			if ok, err := v.Get(Miss(7, 0)); ok || err != nil {
				t.Errorf("miss = %v %v", ok, err)
			}
			if h, ok, _ := s.Head(RefName(1)); !ok || h != loaded[0][1] {
				t.Errorf("load left ref %s at %x (%v), want %x", RefName(1), h[:6], ok, loaded[0][1][:6])
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := prefixEnd(c.in); string(got) != string(c.want) {
			t.Errorf("prefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

// TestMain stops the servers the swarmops-serve engine started, so none
// outlives the tests (or holds their output open).
func TestMain(m *testing.M) {
	code := m.Run()
	StopServers()
	os.Exit(code)
}
