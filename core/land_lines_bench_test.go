package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// BenchmarkLandLineMerge times one land whose change and target both edited
// a file of `lines` lines, at its first and last line (merge=lines: the
// file is merged by lines), beside the same land where the target edited
// another file instead (merge=paths: decided per path, no content read).
// The difference is the cost of reading three blobs and merging them.
//
//	go test ./core -run '^$' -bench LandLineMerge -benchtime 200x -count 5
func BenchmarkLandLineMerge(b *testing.B) {
	for _, lines := range []int{100, 10000} {
		for _, mode := range []string{"lines", "paths"} {
			b.Run(fmt.Sprintf("lines=%d/merge=%s", lines, mode), func(b *testing.B) {
				benchLandLineMerge(b, lines, mode == "lines")
			})
		}
	}
}

func benchLandLineMerge(b *testing.B, lines int, sameFile bool) {
	s := mustCreate(b, "/s", core.Options{FS: faultfs.NewMem()})
	text := make([]string, lines)
	for i := range text {
		text[i] = fmt.Sprintf("line %d of a shared file", i)
	}
	file := func(first, last string) []byte {
		t := append([]string{first}, text[1:lines-1]...)
		return []byte(strings.Join(append(t, last), "\n") + "\n")
	}
	head, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "f", Data: file("first", "last")}, {Path: "g", Data: []byte("g\n")}}, Advance: "main"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(file("first", "last"))))
	first, last := "first", "last"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		first = fmt.Sprintf("first %d", i)
		change, err := s.Commit(core.CommitRequest{Parents: []core.ID{head}, Changes: []core.Change{{Path: "f", Data: file(first, last)}}})
		if err != nil {
			b.Fatal(err)
		}
		target := core.Change{Path: "g", Data: []byte(fmt.Sprintf("g %d\n", i))}
		if sameFile {
			last = fmt.Sprintf("last %d", i)
			target = core.Change{Path: "f", Data: file("first", last)}
			if i > 0 {
				target.Data = file(fmt.Sprintf("first %d", i-1), last)
			}
		}
		if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{head}, Changes: []core.Change{target}, Advance: "main"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := s.Land(change, "main", core.LandOptions{})
		if err != nil || r.NoOp {
			b.Fatalf("land: %v (noop %v)", err, r != nil && r.NoOp)
		}
		head = r.Changeset
	}
}
