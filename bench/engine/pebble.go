package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble"
)

// Pebble is Pebble v1 with default options, every commit written with
// pebble.Sync (its WAL fdatasync'd before Commit returns; Pebble groups
// concurrent commits of one process into one sync). Pebble has no
// transactions, so the ref compare-and-swap is made atomic by a per-ref mutex
// held from the read to the synced batch commit, which is what an
// application on Pebble does. Pebble locks its directory to one process.
type Pebble struct{}

// Name implements Engine.
func (Pebble) Name() string { return "pebble" }

// Durable implements Engine.
func (Pebble) Durable() bool { return true }

// MultiProcess implements Engine.
func (Pebble) MultiProcess() bool { return false }

// Key layout: "c" id -> record; "d" delta id -> empty; "r" name -> id.
func pk(tag byte, parts ...[]byte) []byte {
	b := []byte{tag}
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Open implements Engine.
func (Pebble) Open(dir string, writers int) (Store, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	return &pebbleStore{db: db}, nil
}

// quietLogger silences Pebble's informational logging, which would
// otherwise interleave with the harness's output. Fatalf must not return
// (Pebble's own logger exits the process); it panics with the message, which
// only Pebble's internal invariant failures reach.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(f string, a ...interface{}) {
	panic(fmt.Sprintf(f, a...))
}

type pebbleStore struct {
	db   *pebble.DB
	refs sync.Map // ref name -> *sync.Mutex
}

func pget(r pebble.Reader, k []byte) ([]byte, bool, error) {
	v, c, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, c.Close()
}

func (s *pebbleStore) Commit(t *Txn) (Key, error) {
	m, _ := s.refs.LoadOrStore(t.Ref, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	gen := uint64(1)
	if t.HasParent {
		rec, ok, err := pget(s.db, pk('c', t.Parent[:]))
		if err != nil {
			return Key{}, err
		}
		if !ok {
			return Key{}, fmt.Errorf("%w: parent %x", ErrNotFound, t.Parent[:6])
		}
		if gen, err = recordGen(rec); err != nil {
			return Key{}, err
		}
		gen++
	}
	if _, ok, err := pget(s.db, pk('c', t.ID[:])); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("%w: changeset %x exists", ErrConflict, t.ID[:6])
		}
		return Key{}, err
	}
	cur, ok, err := pget(s.db, pk('r', []byte(t.Ref)))
	if err != nil {
		return Key{}, err
	}
	if t.HasParent != ok || (ok && !bytes.Equal(cur, t.Parent[:])) {
		return Key{}, fmt.Errorf("%w: %s", ErrConflict, t.Ref)
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(pk('c', t.ID[:]), encodeRecord(gen, t), nil)
	b.Set(pk('d', t.Delta[:], t.ID[:]), nil, nil)
	b.Set(pk('r', []byte(t.Ref)), t.ID[:], nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return Key{}, err
	}
	return t.ID, nil
}

// Load writes batches of 50,000 changesets without syncing, then flushes
// the memtable and syncs the WAL (Flush), which leaves the store durable.
func (s *pebbleStore) Load(chains [][]Txn) ([][]Key, error) {
	ids, err := loadBatches(chains, 50000, func(batch []staged) error {
		b := s.db.NewBatch()
		defer b.Close()
		for _, st := range batch {
			t := st.t
			b.Set(pk('c', t.ID[:]), encodeRecord(st.gen, t), nil)
			b.Set(pk('d', t.Delta[:], t.ID[:]), nil, nil)
			b.Set(pk('r', []byte(t.Ref)), t.ID[:], nil)
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("pebble: load: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.db.Flush(); err != nil {
		return nil, fmt.Errorf("pebble: load flush: %w", err)
	}
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return nil, fmt.Errorf("pebble: load sync: %w", err)
	}
	return ids, nil
}

func (s *pebbleStore) Head(ref string) (Key, bool, error) {
	v, ok, err := pget(s.db, pk('r', []byte(ref)))
	var k Key
	copy(k[:], v)
	return k, ok, err
}

// View is a Pebble snapshot.
func (s *pebbleStore) View() (View, error) {
	return &pebbleView{db: s.db, sn: s.db.NewSnapshot()}, nil
}

type pebbleView struct {
	db *pebble.DB
	sn *pebble.Snapshot
}

func (v *pebbleView) Get(id Key) (bool, error) {
	_, ok, err := pget(v.sn, pk('c', id[:]))
	return ok, err
}

func (v *pebbleView) count(p []byte) (int, error) {
	it, err := v.sn.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok && n < 2; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

func (v *pebbleView) Prefix(p []byte) (int, error) { return v.count(pk('c', p)) }
func (v *pebbleView) ByDelta(h Key) (int, error)   { return v.count(pk('d', h[:])) }

func (v *pebbleView) Fresh(id Key) (bool, error) {
	sn := v.db.NewSnapshot()
	_, ok, err := pget(sn, pk('c', id[:]))
	if cerr := sn.Close(); err == nil {
		err = cerr
	}
	return ok, err
}

func (v *pebbleView) DeltaOf(id Key) (Key, error) {
	rec, ok, err := pget(v.sn, pk('c', id[:]))
	if err != nil || !ok {
		return Key{}, errors.Join(ErrNotFound, err)
	}
	return recordDelta(rec)
}

func (v *pebbleView) Close() error { return v.sn.Close() }

// Settle flushes the memtable into sstables (the WAL it covers is then
// recycled).
func (s *pebbleStore) Settle() error { return s.db.Flush() }

func (s *pebbleStore) Close() error { return s.db.Close() }
