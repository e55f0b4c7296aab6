package core_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/swarmops/swarmops/core"
)

// ExampleCreate initializes a store on the real filesystem.
func ExampleCreate() {
	tmp, _ := os.MkdirTemp("", "swarmops-example")
	defer os.RemoveAll(tmp)
	s, err := core.Create(filepath.Join(tmp, "store"), core.Options{})
	if err != nil {
		fmt.Println("create:", err)
		return
	}
	defer s.Close()
	in, _ := s.Info()
	fmt.Println("changesets:", in.Changesets, "segments:", in.Segments)
	// Output: changesets: 0 segments: 1
}

// ExampleStore_Commit commits twice, advancing main with each commit in the
// same journal frame, and shows the compare-and-swap refusing a stale
// advance.
func ExampleStore_Commit() {
	tmp, _ := os.MkdirTemp("", "swarmops-example")
	defer os.RemoveAll(tmp)
	s, _ := core.Create(filepath.Join(tmp, "store"), core.Options{})
	defer s.Close()
	a, _ := s.Commit(core.CommitRequest{
		Changes: []core.Change{{Path: "README", Data: []byte("hello\n")}},
		Agent:   "agent-1", Message: "first", Advance: "main",
	})
	b, _ := s.Commit(core.CommitRequest{
		Parents: []core.ID{a},
		Changes: []core.Change{{Path: "README", Data: []byte("hello, world\n")}},
		Agent:   "agent-1", Message: "second", Advance: "main",
	})
	// Another agent still thinks main is a:
	_, err := s.Commit(core.CommitRequest{Parents: []core.ID{a}, Advance: "main"})
	var ce *core.ConflictError
	fmt.Println(errorsAs(err, &ce), ce.Current == b)
	// Output: true true
}

// ExampleStore_Snapshot reads the durable state without taking a lock.
func ExampleStore_Snapshot() {
	tmp, _ := os.MkdirTemp("", "swarmops-example")
	defer os.RemoveAll(tmp)
	s, _ := core.Create(filepath.Join(tmp, "store"), core.Options{})
	defer s.Close()
	a, _ := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "docs/a.md", Data: []byte("A")}}, Advance: "main"})
	s.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{{Path: "docs/b.md", Data: []byte("B")}}, Advance: "main"})

	sn, _ := s.Snapshot()
	head, _ := sn.Resolve("main")
	data, _, _ := sn.ReadPath(head, "docs/b.md")
	ents, _ := sn.ListPath(head, "docs")
	log, _ := sn.Log(head, 0)
	prev, _ := sn.Resolve("main~1")
	fmt.Println(string(data), len(ents), len(log), prev == a)
	// Output: B 2 2 true
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
