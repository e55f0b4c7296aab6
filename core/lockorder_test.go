//go:build lockorder

package core

import (
	"testing"

	"github.com/swarmops/swarmops/core/internal/lockorder"
	"github.com/swarmops/swarmops/faultfs"
)

// TestTheLockOrderIsChecked: in a lockorder build the store's mutexes and
// file locks go through the checker (every test of the package then runs
// under it); a commit, a snapshot and a checkpoint make it check
// acquisitions. It fails if Options.fill stops wrapping the filesystem or
// the projection mutex is a plain one.
func TestTheLockOrderIsChecked(t *testing.T) {
	if !lockorder.Enabled {
		t.Fatal("a lockorder build without the checker")
	}
	s, err := Create("/s", Options{FS: faultfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := lockorder.Checked()
	if _, err := s.Commit(CommitRequest{Changes: []Change{{Path: "f", Data: []byte("1")}}, Advance: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if n := lockorder.Checked() - before; n < 5 {
		t.Fatalf("%d acquisitions checked by a commit, a snapshot and a checkpoint; want at least 5", n)
	}
}
