package core

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// TestVerifyComparesTheIndexWithTheJournal: Verify replays the journal and
// holds the index the store answers from against it, both ways. Three
// records of the index's tail are damaged here (one dropped, one changed,
// one invented); each is reported once, and an undamaged store reports
// nothing. Part of the history sits in an index run (a checkpoint after 6
// of the 10 commits), so the pass covers a run and the tail together.
func TestVerifyComparesTheIndexWithTheJournal(t *testing.T) {
	s := MustCreate(t, "/s", Options{FS: faultfs.NewMem(), CheckpointEvery: 1 << 20})
	var head []ID
	for i := range 10 {
		id, err := s.Commit(CommitRequest{Parents: head, Agent: "a", Advance: "main",
			Changes: []Change{{Path: fmt.Sprintf("f%d", i), Data: []byte(fmt.Sprint(i))}}})
		if err != nil {
			t.Fatal(err)
		}
		head = []ID{id}
		if i == 5 {
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, deep := range []bool{false, true} {
		if rep, err := s.Verify(deep, nil); err != nil || len(rep.Problems) > 0 {
			t.Fatalf("Verify(deep=%v) of a sound store: %v %+v", deep, err, rep)
		}
	}
	s.view.mu.Lock()
	if !s.view.proj.Idx.HasRuns() {
		s.view.mu.Unlock()
		t.Fatal("no index runs: the test needs part of the history in runs")
	}
	tail := s.view.proj.Idx.Mem
	var ids []ID
	tail.Each(func(id ID, l proj.Loc) {
		if _, inRuns := s.view.proj.Idx.RunKind(id, l.Kind); !inRuns {
			ids = append(ids, id)
		}
	})
	if len(ids) < 2 {
		s.view.mu.Unlock()
		t.Fatalf("%d objects only in the tail; want 2", len(ids))
	}
	dropped, changed := ids[0], ids[1]
	tail.Delete(dropped)
	l, _ := tail.Get(changed)
	l.Size++
	tail.Set(changed, l)
	var invented ID
	invented[0] = 0xee
	tail.Set(invented, proj.Loc{Seq: 1, Seg: 1, Off: 600, Size: 10, Kind: l.Kind})
	s.view.mu.Unlock()

	rep, err := s.Verify(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		dropped.String():  "missing from the index",
		changed.String():  "index says",
		invented.String(): "no frame up to",
	}
	for _, p := range rep.Problems {
		reason, ok := want[p.Object]
		if !ok || !strings.Contains(p.Reason, reason) {
			t.Errorf("unexpected problem: %+v", p)
			continue
		}
		delete(want, p.Object)
	}
	for obj, reason := range want {
		t.Errorf("object %s: no problem reported; want %q", obj, reason)
	}
}

// TestDeepVerifyRehashesObjects: the deep pass re-hashes every object and
// reports one whose bytes no longer match its id. A loose object is
// damaged here (the journal's frames carry checksums of their own, which
// the scan checks): a deep verify reports it, a plain one does not look.
func TestDeepVerifyRehashesObjects(t *testing.T) {
	fsys := faultfs.NewMem()
	s := MustCreate(t, "/s", Options{FS: fsys, InlineThreshold: 16})
	// Incompressible, so the file holds the bytes as they are and the
	// damage reaches the hash check (a compressible loose object is a zstd
	// frame, whose damage the decoder may catch first).
	big := make([]byte, 208)
	for i := range big {
		big[i] = byte(i*i*31 + i>>3*7)
	}
	if _, err := s.Commit(CommitRequest{Agent: "a", Advance: "main", Changes: []Change{{Path: "big", Data: big}}}); err != nil {
		t.Fatal(err)
	}
	_, file := loose.Path(s.dir, objects.IDOf(objects.KindBlob, big))
	f, err := fsys.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the blob is not loose: %v", err)
	}
	if _, err := f.WriteAt([]byte("L"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if rep, err := s.Verify(false, nil); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("plain verify: %v %+v", err, rep)
	}
	rep, err := s.Verify(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].File != file || !strings.Contains(rep.Problems[0].Reason, "does not hash to its id") {
		t.Fatalf("deep verify of a damaged loose object: %+v", rep.Problems)
	}
}
