package engine

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bolt is bbolt with its default options: every write transaction is made
// durable with fdatasync before Update returns. bbolt locks its file to one
// process, so its multi-writer rows are goroutines.
type Bolt struct{}

// Name implements Engine.
func (Bolt) Name() string { return "bbolt" }

// Durable implements Engine.
func (Bolt) Durable() bool { return true }

// MultiProcess implements Engine.
func (Bolt) MultiProcess() bool { return false }

var (
	boltCS    = []byte("changesets") // id -> record
	boltDelta = []byte("by_delta")   // delta||id -> nil
	boltRefs  = []byte("refs")       // name -> id
)

// Open implements Engine.
func (Bolt) Open(dir string, writers int) (Store, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o644, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("bbolt: open %s: %w", dir, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{boltCS, boltDelta, boltRefs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bbolt: buckets in %s: %w", dir, err)
	}
	return &boltStore{db: db}, nil
}

type boltStore struct{ db *bolt.DB }

func boltInsert(tx *bolt.Tx, t *Txn) error {
	cs, dl, refs := tx.Bucket(boltCS), tx.Bucket(boltDelta), tx.Bucket(boltRefs)
	gen := uint64(1)
	if t.HasParent {
		rec := cs.Get(t.Parent[:])
		if rec == nil {
			return fmt.Errorf("%w: parent %x", ErrNotFound, t.Parent[:6])
		}
		g, err := recordGen(rec)
		if err != nil {
			return err
		}
		gen = g + 1
	}
	if cs.Get(t.ID[:]) != nil {
		return fmt.Errorf("%w: changeset %x exists", ErrConflict, t.ID[:6])
	}
	if err := cs.Put(t.ID[:], encodeRecord(gen, t)); err != nil {
		return err
	}
	dk := append(append(make([]byte, 0, 64), t.Delta[:]...), t.ID[:]...)
	if err := dl.Put(dk, nil); err != nil {
		return err
	}
	cur := refs.Get([]byte(t.Ref))
	switch {
	case t.HasParent && !bytes.Equal(cur, t.Parent[:]), !t.HasParent && cur != nil:
		return fmt.Errorf("%w: %s", ErrConflict, t.Ref)
	}
	return refs.Put([]byte(t.Ref), t.ID[:])
}

func (s *boltStore) Commit(t *Txn) (Key, error) {
	if err := s.db.Update(func(tx *bolt.Tx) error { return boltInsert(tx, t) }); err != nil {
		return Key{}, err
	}
	return t.ID, nil
}

// Load inserts in transactions of 250,000 changesets, each batch sorted by
// key so that the B+trees fill in order (what a bulk loader would do). A
// chain's generations are known from its positions, so the parent is not
// read back; the refs are set once, at the end.
func (s *boltStore) Load(chains [][]Txn) ([][]Key, error) {
	ids, err := loadBatches(chains, 250000, func(batch []staged) error {
		type kv struct{ k, v []byte }
		recs := make([]kv, 0, len(batch))
		dks := make([][]byte, 0, len(batch))
		for _, st := range batch {
			t := st.t
			recs = append(recs, kv{t.ID[:], encodeRecord(st.gen, t)})
			dks = append(dks, append(append(make([]byte, 0, 64), t.Delta[:]...), t.ID[:]...))
		}
		sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].k, recs[j].k) < 0 })
		sort.Slice(dks, func(i, j int) bool { return bytes.Compare(dks[i], dks[j]) < 0 })
		err := s.db.Update(func(tx *bolt.Tx) error {
			cs, dl := tx.Bucket(boltCS), tx.Bucket(boltDelta)
			for _, r := range recs {
				if err := cs.Put(r.k, r.v); err != nil {
					return err
				}
			}
			for _, k := range dks {
				if err := dl.Put(k, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("bbolt: load: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, c := range chains {
			if len(c) > 0 {
				last := c[len(c)-1]
				if err := tx.Bucket(boltRefs).Put([]byte(last.Ref), last.ID[:]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bbolt: load refs: %w", err)
	}
	return ids, nil
}

func (s *boltStore) Head(ref string) (Key, bool, error) {
	var k Key
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(boltRefs).Get([]byte(ref)); v != nil {
			copy(k[:], v)
			ok = true
		}
		return nil
	})
	return k, ok, err
}

// View is one read transaction, begun at the first lookup that needs it
// and held until Close. Fresh never uses it: a long-lived bbolt read
// transaction blocks a writer that must grow the file's mapping, and a
// reader beside a writer (W6) would deadlock with it.
func (s *boltStore) View() (View, error) { return &boltView{db: s.db}, nil }

type boltView struct {
	db  *bolt.DB
	ltx *bolt.Tx
}

func (v *boltView) tx() (*bolt.Tx, error) {
	if v.ltx == nil {
		tx, err := v.db.Begin(false)
		if err != nil {
			return nil, fmt.Errorf("bbolt: begin read transaction: %w", err)
		}
		v.ltx = tx
	}
	return v.ltx, nil
}

func (v *boltView) bucket(name []byte) (*bolt.Bucket, error) {
	tx, err := v.tx()
	if err != nil {
		return nil, err
	}
	return tx.Bucket(name), nil
}

func (v *boltView) Get(id Key) (bool, error) {
	b, err := v.bucket(boltCS)
	if err != nil {
		return false, err
	}
	return b.Get(id[:]) != nil, nil
}

func boltCount(c *bolt.Cursor, p []byte) int {
	n := 0
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && n < 2; k, _ = c.Next() {
		n++
	}
	return n
}

func (v *boltView) Prefix(p []byte) (int, error) {
	b, err := v.bucket(boltCS)
	if err != nil {
		return 0, err
	}
	return boltCount(b.Cursor(), p), nil
}

func (v *boltView) ByDelta(h Key) (int, error) {
	b, err := v.bucket(boltDelta)
	if err != nil {
		return 0, err
	}
	return boltCount(b.Cursor(), h[:]), nil
}

func (v *boltView) Fresh(id Key) (bool, error) {
	tx, err := v.db.Begin(false)
	if err != nil {
		return false, err
	}
	ok := tx.Bucket(boltCS).Get(id[:]) != nil
	return ok, tx.Rollback()
}

func (v *boltView) DeltaOf(id Key) (Key, error) {
	b, err := v.bucket(boltCS)
	if err != nil {
		return Key{}, err
	}
	rec := b.Get(id[:])
	if rec == nil {
		return Key{}, ErrNotFound
	}
	return recordDelta(rec)
}

func (v *boltView) Close() error {
	if v.ltx == nil {
		return nil
	}
	return v.ltx.Rollback()
}

// Settle has nothing to do: bbolt has no log.
func (s *boltStore) Settle() error { return nil }

func (s *boltStore) Close() error { return s.db.Close() }
