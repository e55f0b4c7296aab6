package core_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// readOnlyStore makes a store with two commits on main (one with a loose
// blob), a second ref and a protection, closed, on a memory filesystem.
func readOnlyStore(t *testing.T) (*faultfs.MemFS, core.ID, core.ID) {
	t.Helper()
	mem := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: mem})
	a, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "docs/a.md", Data: []byte("A\n")}},
		Agent: "agent-1", Message: "first", Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(strings.Repeat("loose object ", 10000))
	b, err := s.Commit(core.CommitRequest{Parents: []core.ID{a},
		Changes: []core.Change{{Path: "docs/b.md", Data: []byte("B\n")}, {Path: "big", Data: big}},
		Agent:   "agent-1", Message: "second", Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "feature", New: a}); err != nil {
		t.Fatal(err)
	}
	if err := s.Protect("release/", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, a, b
}

// TestReadsNeedNoWritePermission: a store behind a filesystem that refuses
// every change (a read-only mount, EROFS; another user's files, EACCES)
// opens and answers every read, and every write fails with ErrReadOnly,
// not ErrIO. Without the read-only fallback in state.open, Open fails:
// "core: store not writable: open state: open /s/state: read-only file
// system".
func TestReadsNeedNoWritePermission(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EROFS, syscall.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			mem, a, b := readOnlyStore(t)
			s, err := core.Open("/s", core.Options{FS: faultfs.NewReadOnly(mem, errno)})
			if err != nil {
				t.Fatalf("Open without write access: %v", err)
			}
			defer s.Close()
			readsWork(t, s, a, b)
			writesRefused(t, s, a, b)
			// Reads still work after the refused writes.
			readsWork(t, s, a, b)
		})
	}
}

func readsWork(t *testing.T, s *core.Store, a, b core.ID) {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s without write access: %v", what, err)
		}
	}
	head, err := sn.Resolve("main")
	check("Resolve", err)
	if head != b {
		t.Fatalf("main is %v, want %v", head, b)
	}
	log, err := sn.Log(head, 0)
	check("Log", err)
	if len(log) != 2 {
		t.Fatalf("log has %d changesets, want 2", len(log))
	}
	data, _, err := sn.ReadPath(head, "big")
	check("ReadPath of a loose blob", err)
	if len(data) != 130000 {
		t.Fatalf("big has %d bytes, want 130000", len(data))
	}
	_, err = sn.ListPath(head, "docs")
	check("ListPath", err)
	_, err = sn.Diff(a, b)
	check("Diff", err)
	_, err = sn.Refs()
	check("Refs", err)
	_, err = sn.RefLog("main")
	check("RefLog", err)
	moves, err := sn.Moves(core.MoveQuery{})
	check("Moves", err)
	if len(moves) != 3 {
		t.Fatalf("%d moves, want 3", len(moves))
	}
	_, err = sn.Protected()
	check("Protected", err)
	_, err = s.Info()
	check("Info", err)
	for _, deep := range []bool{false, true} {
		rep, err := s.Verify(deep, nil)
		check("Verify", err)
		if len(rep.Problems) != 0 {
			t.Fatalf("Verify(deep=%v) without write access: %+v", deep, rep)
		}
	}
}

func writesRefused(t *testing.T, s *core.Store, a, b core.ID) {
	t.Helper()
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrReadOnly) || errors.Is(err, core.ErrIO) {
			t.Fatalf("%s without write access: got %v, want ErrReadOnly (and not ErrIO)", what, err)
		}
	}
	_, err := s.Commit(core.CommitRequest{Parents: []core.ID{b}, Changes: []core.Change{{Path: "c", Data: []byte("C")}}, Advance: "main"})
	refused("Commit", err)
	_, err = s.Commit(core.CommitRequest{Parents: []core.ID{b},
		Changes: []core.Change{{Path: "huge", Data: []byte(strings.Repeat("x", 200000))}}})
	refused("Commit of a loose blob", err)
	refused("UpdateRefs", s.UpdateRefs(core.RefUpdate{Name: "feature", Old: a, New: b}))
	_, err = s.Land(b, "feature", core.LandOptions{})
	refused("Land", err)
	refused("Protect", s.Protect("main", true))
	refused("Checkpoint", s.Checkpoint())
	sn := snap(t, s)
	ms, err := sn.Moves(core.MoveQuery{Refs: []string{"feature"}})
	if err != nil || len(ms) != 1 {
		t.Fatalf("moves of feature: %v (%v), want 1", ms, err)
	}
	_, err = s.Undo(ms[0].ID(), "agent-1")
	refused("Undo", err)
}

// TestReadOfAStoreNeedingRecoveryNeedsWriteAccess: after a power loss the
// state is from another boot, and only recovery (which writes) may decide
// what is durable; a process without write access gets a
// *NeedsRecoveryError (ErrReadOnly), not ErrIO and not a read of
// unrecovered frames. Once a writer has recovered, it reads. Without the
// NeedsRecoveryError in load, Open fails with "core: store not writable:
// writer queue: open /s/lockq/NEXT: read-only file system", which names
// the queue and not the recovery it was taken for.
func TestReadOfAStoreNeedingRecoveryNeedsWriteAccess(t *testing.T) {
	mem, _, b := readOnlyStore(t)
	lost := mem.CrashClone(faultfs.Strict, 1)
	_, err := core.Open("/s", core.Options{FS: faultfs.NewReadOnly(lost, syscall.EROFS)})
	var nr *core.NeedsRecoveryError
	if !errors.As(err, &nr) || !errors.Is(err, core.ErrReadOnly) || errors.Is(err, core.ErrIO) {
		t.Fatalf("Open after a power loss without write access: got %v, want a *NeedsRecoveryError", err)
	}
	if nr.Reason == "" || nr.Dir != "/s" {
		t.Fatalf("reason %q does not say why", nr.Reason)
	}
	w := mustOpen(t, "/s", core.Options{FS: lost})
	w.Close()
	s, err := core.Open("/s", core.Options{FS: faultfs.NewReadOnly(lost, syscall.EROFS)})
	if err != nil {
		t.Fatalf("Open after recovery without write access: %v", err)
	}
	defer s.Close()
	sn := snap(t, s)
	if head, err := sn.Resolve("main"); err != nil || head != b {
		t.Fatalf("main is %v (%v), want %v", head, err, b)
	}
}
