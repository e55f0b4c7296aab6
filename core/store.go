package core

import "github.com/swarmops/swarmops/core/objects"

// Store is an open SwarmOps store. It is safe for concurrent use by many
// goroutines; many processes may open the same store at once.
type Store struct{}

// Snapshot is a lock-free, read-only view of the durable prefix.
type Snapshot struct{}

func Create(dir string, o Options) (*Store, error)          { return nil, errNotImplemented }
func Open(dir string, o Options) (*Store, error)            { return nil, errNotImplemented }
func Recover(dir string, o Options) (*RecoverReport, error) { return nil, errNotImplemented }
func (s *Store) Close() error                               { return errNotImplemented }
func (s *Store) Commit(req CommitRequest) (ID, error)       { return ID{}, errNotImplemented }
func (s *Store) UpdateRefs(u ...RefUpdate) error            { return errNotImplemented }
func (s *Store) Snapshot() (*Snapshot, error) { return nil, errNotImplemented }
func (s *Store) Verify(deep bool, progress func(done, total int)) (*VerifyReport, error) {
	return nil, errNotImplemented
}
func (s *Store) Info() (*Info, error) { return nil, errNotImplemented }

func (sn *Snapshot) Ref(name string) (ID, error)                 { return ID{}, errNotImplemented }
func (sn *Snapshot) Refs() ([]RefEntry, error)                   { return nil, errNotImplemented }
func (sn *Snapshot) RefLog(name string) ([]RefLogEntry, error)   { return nil, errNotImplemented }
func (sn *Snapshot) Resolve(rev string) (ID, error)              { return ID{}, errNotImplemented }
func (sn *Snapshot) Changeset(id ID) (*objects.Changeset, error) { return nil, errNotImplemented }
func (sn *Snapshot) Tree(id ID) (*objects.Tree, error)           { return nil, errNotImplemented }
func (sn *Snapshot) Blob(id ID) ([]byte, error)                  { return nil, errNotImplemented }
func (sn *Snapshot) ReadPath(cs ID, path string) ([]byte, objects.Entry, error) {
	return nil, objects.Entry{}, errNotImplemented
}
func (sn *Snapshot) ListPath(cs ID, dir string) ([]objects.Entry, error) {
	return nil, errNotImplemented
}
func (sn *Snapshot) Log(from ID, n int) ([]ID, error)     { return nil, errNotImplemented }
func (sn *Snapshot) ByDelta(h objects.Hash) ([]ID, error) { return nil, errNotImplemented }
func (sn *Snapshot) Diff(a, b ID) ([]PathChange, error)   { return nil, errNotImplemented }

// Flatten lists every file path of a changeset's tree with its entry.
func (sn *Snapshot) Flatten(cs ID) (map[string]objects.Entry, error) { return nil, errNotImplemented }
