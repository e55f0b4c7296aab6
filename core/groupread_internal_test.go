package core

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestAReadOfOneBlobOfAGroupKeepsNoGroup: through the store's read path,
// the first read of a blob inside a compressed group decodes only as far
// as the blob and keeps nothing; a second read of that group, and a read
// of another group's first blob, decode their group whole and keep it. It
// fails when the read path hands the cache a wrong place in the group:
// every read would then decode and keep a whole group.
func TestAReadOfOneBlobOfAGroupKeepsNoGroup(t *testing.T) {
	s := MustCreate(t, "/s", Options{FS: faultfs.NewMem()})
	var changes []Change
	for i := range 256 {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 8<<10)
		copy(b, fmt.Sprintf("blob %d\n", i))
		changes = append(changes, Change{Path: fmt.Sprintf("d/f%03d", i), Data: b})
	}
	if _, err := s.Commit(CommitRequest{Changes: changes, Advance: "main"}); err != nil {
		t.Fatal(err)
	}
	type member struct {
		id ID
		l  proj.Loc
	}
	groups := map[[2]int64][]member{}
	s.view.mu.Lock()
	for _, c := range changes {
		id := objects.BlobID(c.Data)
		if l, ok := s.view.proj.Idx.GetKind(id, objects.KindBlob); ok && l.Stored > 0 {
			k := [2]int64{int64(l.Seg), l.Off}
			groups[k] = append(groups[k], member{id, l})
		}
	}
	s.view.mu.Unlock()
	var full [][]member
	for _, g := range groups {
		sort.Slice(g, func(i, j int) bool { return g[i].l.Inner < g[j].l.Inner })
		if len(g) >= 3 && g[0].l.Inner == 0 {
			full = append(full, g)
		}
	}
	if len(full) < 2 {
		t.Fatalf("the commit made %d compressed groups of 3 blobs or more; want 2", len(full))
	}
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		m    member
		kept int
	}{
		{full[0][1], 0}, // inside a group, first read: only as far as it
		{full[0][2], 1}, // the same group again: whole, kept
		{full[1][0], 2}, // another group's first blob: whole, kept
	} {
		if _, err := sn.Blob(r.m.id); err != nil {
			t.Fatal(err)
		}
		if n := s.groups.Len(); n != r.kept {
			t.Fatalf("after a read of the blob at %d of its group, the store keeps %d groups; want %d", r.m.l.Inner, n, r.kept)
		}
	}
}
