package treebuild

import (
	"fmt"
	"testing"

	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/objects"
)

// TestRecentKeepsTheNewestWithinItsBudget: Recent keeps changesets and
// trees (never blobs or loose objects), drops the oldest first once it
// holds more than RecentBytes, and never counts an object twice.
func TestRecentKeepsTheNewestWithinItsBudget(t *testing.T) {
	var r Recent
	obj := func(i int, k objects.Kind, size int) txn.Obj {
		data := make([]byte, size)
		copy(data, fmt.Sprint(i))
		return txn.Obj{ID: objects.IDOf(k, data), Kind: k, Data: data}
	}
	blob, loose := obj(0, objects.KindBlob, 10), obj(1, objects.KindTree, 10)
	loose.Loose = true
	r.Remember([]txn.Obj{blob, loose})
	for _, o := range []txn.Obj{blob, loose} {
		if _, ok := r.Get(o.ID); ok {
			t.Fatalf("Recent kept a %s (loose %v)", o.Kind, o.Loose)
		}
	}

	const size = 64 << 10
	const n = 2 * RecentBytes / size
	var all []txn.Obj
	for i := range n {
		o := obj(i, objects.KindTree, size)
		all = append(all, o)
		// Each commit's objects come again with the next: kept once.
		r.Remember(all[max(0, i-1):])
	}
	if r.bytes > RecentBytes {
		t.Fatalf("Recent holds %d bytes; want at most %d", r.bytes, RecentBytes)
	}
	kept := 0
	for i, o := range all {
		_, ok := r.Get(o.ID)
		if ok {
			kept++
		}
		if newest := i >= n-RecentBytes/size; ok != newest {
			t.Fatalf("object %d of %d: kept %v; want only the newest %d", i, n, ok, RecentBytes/size)
		}
	}
	if kept != RecentBytes/size || r.bytes != kept*size || len(r.order)-r.head != kept {
		t.Fatalf("kept %d objects, %d bytes, %d queued; want %d of %d bytes each", kept, r.bytes, len(r.order)-r.head, RecentBytes/size, size)
	}
}
