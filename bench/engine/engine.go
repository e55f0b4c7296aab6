// Package engine puts SwarmOps and its peers (SQLite, bbolt, Pebble) behind
// one small interface, so that every workload of the comparison harness runs
// the same transaction on every engine.
//
// The transaction (Txn) is the one every engine is measured on: insert a
// changeset record (its 32-byte id, its parents, its 32-byte delta hash, its
// generation and a payload of about 100 bytes), check that it is new and
// that its parent exists (the generation is the parent's plus one), and move
// a ref to it by compare-and-swap against the parent, all in one durable
// transaction.
//
// The peers store exactly that record. SwarmOps stores it the way the product
// does: the payload is the changeset's message, and one 24-byte file change
// gives each changeset a delta hash of its own, so a SwarmOps commit also
// writes a blob and a tree. Its ids and delta hashes are computed by the
// store, which is why Commit returns the id the engine actually used.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

var bg = context.Background()

// Key is a 32-byte changeset id or delta hash.
type Key = [32]byte

// ErrConflict is a failed ref compare-and-swap.
var ErrConflict = errors.New("engine: ref conflict")

// ConflictError is a failed ref compare-and-swap that names the ref's
// current value, when the engine reports it.
type ConflictError struct {
	Ref     string
	Current Key
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ref %q moved to %x", e.Ref, e.Current[:6])
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrNotFound is a missing changeset or parent.
var ErrNotFound = errors.New("engine: not found")

// ErrBusy is a lock or busy timeout of an engine (SQLITE_BUSY, ErrBusy).
var ErrBusy = errors.New("engine: busy")

// Txn is one transaction of the workloads: the next changeset of one
// writer's chain, moved onto that writer's ref.
type Txn struct {
	Writer    int
	Seq       int  // position in the writer's chain, from 0
	ID, Delta Key  // the peers' keys; SwarmOps computes its own
	Parent    Key  // the chain's previous changeset, as the engine named it
	HasParent bool // false for the first changeset of a chain
	Payload   []byte
	Ref       string
}

// Gen makes the deterministic Txn seq of writer w's chain for seed. Parent
// is left to the caller, because SwarmOps names changesets itself.
func Gen(seed uint64, w, seq int) Txn {
	var b [8 + 8 + 8 + 1]byte
	binary.LittleEndian.PutUint64(b[0:], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(w))
	binary.LittleEndian.PutUint64(b[16:], uint64(seq))
	b[24] = 'i'
	id := sha256.Sum256(b[:])
	b[24] = 'd'
	delta := sha256.Sum256(b[:])
	payload := make([]byte, 100)
	n := copy(payload, fmt.Sprintf("agent-%02d: change %d of its chain; ", w, seq))
	for i := n; i < len(payload); i++ {
		payload[i] = 'a' + byte((i+seq)%26)
	}
	return Txn{Writer: w, Seq: seq, ID: id, Delta: delta, Payload: payload, Ref: RefName(w)}
}

// RefName is the ref of writer w's chain.
func RefName(w int) string { return fmt.Sprintf("agents/w%02d", w) }

// Miss makes a key that no engine holds.
func Miss(seed uint64, i int) Key {
	var b [17]byte
	binary.LittleEndian.PutUint64(b[0:], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(i))
	b[16] = 'm'
	return sha256.Sum256(b[:])
}

// Engine opens stores of one kind.
type Engine interface {
	// Name is the engine's row label.
	Name() string
	// Durable is false for reference lines that do not sync every commit.
	Durable() bool
	// MultiProcess says whether several processes may open one store.
	MultiProcess() bool
	// Open opens (creating if needed) the store in dir. writers is the
	// number of goroutines that will commit through the handle at once.
	Open(dir string, writers int) (Store, error)
}

// Store is an open store.
type Store interface {
	// Commit runs t as one durable transaction and returns the changeset's
	// id as the engine named it.
	Commit(t *Txn) (Key, error)
	// Load inserts the chains' transactions in bulk, the way a competent
	// user of the engine would (big transactions for the peers). It returns
	// the ids as Commit would, in order. It must leave the store durable.
	Load(chains [][]Txn) ([][]Key, error)
	// Head reads a ref.
	Head(ref string) (Key, bool, error)
	// View opens a read view (a snapshot, or a read transaction).
	View() (View, error)
	// Settle moves a log into the main structure as the engine's own
	// maintenance would (a WAL checkpoint, a flush), before bytes are
	// counted.
	Settle() error
	Close() error
}

// View is a consistent read view.
type View interface {
	// Get reports whether the changeset id exists, reading its record.
	Get(id Key) (bool, error)
	// Prefix counts the changesets whose id starts with p (at most 2).
	Prefix(p []byte) (int, error)
	// ByDelta counts the changesets with delta hash h (at most 2).
	ByDelta(h Key) (int, error)
	// Fresh takes a new snapshot (a new read transaction) from this
	// session, looks id up in it and releases it: what a CLI process or a
	// server request pays per read.
	Fresh(id Key) (bool, error)
	// DeltaOf returns the delta hash of changeset id (untimed set-up).
	DeltaOf(id Key) (Key, error)
	Close() error
}

// record is the peers' value encoding: generation, delta, parent count,
// parents, payload.
func encodeRecord(gen uint64, t *Txn) []byte {
	np := 0
	if t.HasParent {
		np = 1
	}
	b := make([]byte, 0, 8+32+1+32*np+len(t.Payload))
	b = binary.LittleEndian.AppendUint64(b, gen)
	b = append(b, t.Delta[:]...)
	b = append(b, byte(np))
	if t.HasParent {
		b = append(b, t.Parent[:]...)
	}
	return append(b, t.Payload...)
}

func recordGen(b []byte) (uint64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("engine: record of %d bytes is too short", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

func recordDelta(b []byte) (Key, error) {
	var k Key
	if len(b) < 40 {
		return k, fmt.Errorf("engine: record of %d bytes is too short", len(b))
	}
	copy(k[:], b[8:40])
	return k, nil
}

// prefixEnd is the smallest key greater than every key starting with p, or
// nil when there is none.
func prefixEnd(p []byte) []byte {
	e := append([]byte(nil), p...)
	for i := len(e) - 1; i >= 0; i-- {
		e[i]++
		if e[i] != 0 {
			return e[:i+1]
		}
	}
	return nil
}

// Engines lists every engine by name.
func Engines() []Engine {
	return []Engine{SwarmOps{}, SwarmOpsServe{}, SQLite{Sync: "FULL"}, SQLite{Sync: "NORMAL"}, Bolt{}, Pebble{}}
}

// ByName finds an engine.
func ByName(name string) (Engine, error) {
	for _, e := range Engines() {
		if e.Name() == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("engine: unknown engine %q", name)
}
