package treebuild

import (
	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/objects"
)

// RecentBytes is how many bytes of encodings a Recent keeps: the
// changesets and trees of the last few hundred small commits. A server
// commits for many agents in turn, so an agent's parent is rarely the
// process's last commit, but it is one of its last few hundred.
const RecentBytes = 4 << 20

// Recent keeps the changeset and tree encodings of this process's last
// durable commits, so that a next commit, whose parent is usually one of
// them, need not read them back from the journal and hash them again. Only
// their bytes are reused: an object is still looked up in the projection
// first (Recent never makes an object visible), and bytes that were hashed
// to their id when they were built are the object's content whatever the
// disk holds. It keeps at most RecentBytes, dropping the oldest first. It
// is safe for concurrent use; its zero value is ready.
type Recent struct {
	mu lockorder.Mutex[lockorder.Leaf]
	// objs and order are guarded by mu: order is the ids in objs, oldest
	// first from head, and bytes the sum of their lengths.
	objs  map[objects.ID][]byte
	order []objects.ID
	head  int
	bytes int
}

// Remember adds the changeset and trees of objs, dropping the oldest
// encodings beyond RecentBytes.
func (r *Recent) Remember(objs []txn.Obj) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.objs == nil {
		r.objs = make(map[objects.ID][]byte)
	}
	for _, o := range objs {
		if o.Kind == objects.KindBlob || o.Loose || o.Data == nil || len(o.Data) > RecentBytes {
			continue
		}
		if _, ok := r.objs[o.ID]; ok {
			continue
		}
		r.objs[o.ID] = o.Data
		r.order = append(r.order, o.ID)
		r.bytes += len(o.Data)
	}
	for r.bytes > RecentBytes {
		id := r.order[r.head]
		r.head++
		r.bytes -= len(r.objs[id])
		delete(r.objs, id)
	}
	// Compact the queue once its dropped prefix is most of it.
	if r.head > len(r.order)/2 {
		r.order = append(r.order[:0], r.order[r.head:]...)
		r.head = 0
	}
}

// Get returns the encoding of id if r keeps it.
func (r *Recent) Get(id objects.ID) ([]byte, bool) {
	r.mu.Lock()
	data, ok := r.objs[id]
	r.mu.Unlock()
	return data, ok
}
