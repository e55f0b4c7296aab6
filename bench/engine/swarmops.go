package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// SwarmOps is the SwarmOps store through its public API (package core),
// default Options apart from FS. A commit is core.Commit with Advance: the
// changeset (message = the payload, one 24-byte file change under the
// writer's own directory) and the move of the writer's ref in one frame.
type SwarmOps struct {
	// FS, when set, replaces the real OS (the sync count wraps it in
	// faultfs.Counting).
	FS vfs.FS
}

// Name implements Engine.
func (SwarmOps) Name() string { return "swarmops" }

// Durable implements Engine.
func (SwarmOps) Durable() bool { return true }

// MultiProcess implements Engine.
func (SwarmOps) MultiProcess() bool { return true }

// Open implements Engine: Open, or Create in an empty or absent directory.
// The directory is listed only when Open finds no store there, so W4's
// timed open of an existing store is the store's open alone.
func (e SwarmOps) Open(dir string, writers int) (Store, error) {
	o := core.Options{FS: e.FS}
	s, err := core.Open(dir, o)
	if errors.Is(err, core.ErrNotStore) {
		if ents, rerr := os.ReadDir(dir); rerr != nil || len(ents) == 0 {
			s, err = core.Create(dir, o)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("swarmops: open %s: %w", dir, err)
	}
	return &swarmStore{s: s}, nil
}

type swarmStore struct{ s *core.Store }

var swarmEpoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

func mapSwarm(err error) error {
	var ce *core.ConflictError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: %w", &ConflictError{Ref: ce.Ref, Current: Key(ce.Current)}, err)
	}
	switch {
	case errors.Is(err, core.ErrBusy):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case errors.Is(err, core.ErrConflict):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, core.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

func swarmRequest(t *Txn) core.CommitRequest {
	data := make([]byte, 24)
	binary.LittleEndian.PutUint64(data[0:], uint64(t.Writer))
	binary.LittleEndian.PutUint64(data[8:], uint64(t.Seq))
	copy(data[16:], t.ID[:8])
	req := core.CommitRequest{
		Changes: []core.Change{{Path: fmt.Sprintf("w%02d/f", t.Writer), Data: data}},
		Agent:   fmt.Sprintf("agent-%02d", t.Writer),
		Message: string(t.Payload),
		Time:    swarmEpoch.Add(time.Duration(t.Seq) * time.Second),
		Advance: t.Ref,
	}
	if t.HasParent {
		req.Parents = []core.ID{core.ID(t.Parent)}
	}
	return req
}

func (s *swarmStore) Commit(t *Txn) (Key, error) {
	id, err := s.s.Commit(swarmRequest(t))
	if err != nil {
		return Key{}, mapSwarm(err)
	}
	return Key(id), nil
}

// Load commits every chain through the public API, durably, one goroutine
// per chain, so that group commit batches the chains' frames into shared
// syncs. There is no bulk path that skips syncs.
func (s *swarmStore) Load(chains [][]Txn) ([][]Key, error) {
	ids := make([][]Key, len(chains))
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for w := range chains {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var prev Key
			for i := range chains[w] {
				t := &chains[w][i]
				t.Parent, t.HasParent = prev, i > 0
				id, err := s.Commit(t)
				if err != nil {
					errs[w] = fmt.Errorf("swarmops: load chain %d at %d: %w", w, i, err)
					return
				}
				ids[w] = append(ids[w], id)
				prev = id
			}
		}(w)
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

func (s *swarmStore) Head(ref string) (Key, bool, error) {
	sn, err := s.s.Snapshot()
	if err != nil {
		return Key{}, false, err
	}
	id, err := sn.Ref(ref)
	if errors.Is(err, core.ErrNotFound) {
		return Key{}, false, nil
	}
	return Key(id), err == nil, err
}

func (s *swarmStore) View() (View, error) {
	sn, err := s.s.Snapshot()
	if err != nil {
		return nil, err
	}
	return &swarmView{s: s.s, sn: sn}, nil
}

type swarmView struct {
	s  *core.Store
	sn *core.Snapshot
}

func found(err error) (bool, error) {
	if errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (v *swarmView) Get(id Key) (bool, error) {
	_, err := v.sn.Changeset(core.ID(id))
	return found(err)
}

func (v *swarmView) Prefix(p []byte) (int, error) {
	_, err := v.sn.Resolve(hex.EncodeToString(p))
	switch {
	case errors.Is(err, core.ErrAmbiguous):
		return 2, nil
	case errors.Is(err, core.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return 1, nil
}

func (v *swarmView) ByDelta(h Key) (int, error) {
	ids, err := v.sn.ByDelta(objects.Hash(h))
	if errors.Is(err, core.ErrNotFound) {
		return 0, nil
	}
	return len(ids), err
}

func (v *swarmView) Fresh(id Key) (bool, error) {
	sn, err := v.s.Snapshot()
	if err != nil {
		return false, err
	}
	_, err = sn.Changeset(core.ID(id))
	return found(err)
}

func (v *swarmView) DeltaOf(id Key) (Key, error) {
	cs, err := v.sn.Changeset(core.ID(id))
	if err != nil {
		return Key{}, mapSwarm(err)
	}
	return Key(cs.Delta), nil
}

func (v *swarmView) Close() error { return nil }

// Settle writes a checkpoint of everything committed (Store.Checkpoint), so
// that an open replays no journal: SQLite's settle truncates its WAL into
// the database the same way, and Pebble's flushes its memtable.
func (s *swarmStore) Settle() error { return s.s.Checkpoint() }

func (s *swarmStore) Close() error { return s.s.Close() }
