package core_test

import (
	"fmt"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// TestAHandleOpenAcrossAnotherProcesssGCReadsOn: a long-lived handle (a
// server, a watch) that has not read the frames another handle appended
// before that handle's garbage collection reclaimed their segments
// rebuilds its projection from the collection's checkpoint instead of
// reporting the missing frames as damage (behind=true fails so without
// it); one that had read them reads on as well.
func TestAHandleOpenAcrossAnotherProcesssGCReadsOn(t *testing.T) {
	for _, behind := range []bool{true, false} {
		t.Run(fmt.Sprintf("behind=%v", behind), func(t *testing.T) {
			fsys := faultfs.NewMem()
			o := core.Options{FS: fsys, SegmentSize: 4096}
			w := mustCreate(t, "/s", o)
			head := mustCommit(t, w, core.CommitRequest{Changes: []core.Change{put("a", "0")}, Advance: "main"})
			r, err := core.Open("/s", o)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Snapshot(); err != nil {
				t.Fatal(err)
			}
			var ids []core.ID
			for i := 1; i <= 30; i++ {
				head = mustCommit(t, w, core.CommitRequest{Parents: []core.ID{head}, Advance: "main",
					Changes: []core.Change{put(fmt.Sprintf("f%d", i), fmt.Sprint(i))}})
				ids = append(ids, head)
				if !behind {
					if _, err := r.Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
			}
			rep, err := w.GC(core.GCOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.SegmentsRemoved == 0 {
				t.Fatal("the collection reclaimed no segment: the test shows nothing")
			}
			sn, err := r.Snapshot()
			if err != nil {
				t.Fatalf("snapshot after another handle's gc: %v", err)
			}
			if got, err := sn.Ref("main"); err != nil || got != head {
				t.Fatalf("main: %v %v, want %v", got, err, head)
			}
			for i, id := range ids {
				if _, err := sn.Changeset(id); err != nil {
					t.Fatalf("changeset %d of the history: %v", i+1, err)
				}
			}
			if data, _, err := sn.ReadPath(head, "f1"); err != nil || string(data) != "1" {
				t.Fatalf("f1: %q %v", data, err)
			}
		})
	}
}
