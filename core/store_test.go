package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// newMem returns a store on a fresh power-loss memory FS.
func newMem(t testing.TB, o core.Options) (*core.Store, *faultfs.MemFS) {
	t.Helper()
	m := faultfs.NewMem()
	if o.FS == nil {
		o.FS = m
	}
	return mustCreate(t, "/s", o), m
}

// mustCreate and mustOpen are core's test helpers (export_test.go),
// shared with its internal tests.
var (
	mustCreate = core.MustCreate
	mustOpen   = core.MustOpen
)

// snapRef takes a snapshot of s and reads ref name in it.
func snapRef(t testing.TB, s *core.Store, name string) (*core.Snapshot, core.ID) {
	t.Helper()
	sn := snap(t, s)
	id, err := sn.Ref(name)
	if err != nil {
		t.Fatalf("Ref(%s): %v", name, err)
	}
	return sn, id
}

func put(path, data string) core.Change { return core.Change{Path: path, Data: []byte(data)} }

func mustCommit(t testing.TB, s *core.Store, req core.CommitRequest) core.ID {
	t.Helper()
	id, err := s.Commit(req)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return id
}

func snap(t testing.TB, s *core.Store) *core.Snapshot {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return sn
}

func TestCommitThenReadBack(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a.txt", "A"), put("d/e/f", "F")}, Agent: "t", Message: "one", Advance: "main"})
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("a.txt", "A2"), {Path: "d/e/f", Delete: true}}, Advance: "main"})
	sn := snap(t, s)
	if got, err := sn.Ref("main"); err != nil || got != b {
		t.Fatalf("Ref(main) = %v, %v; want %v", got, err, b)
	}
	data, _, err := sn.ReadPath(b, "a.txt")
	if err != nil || string(data) != "A2" {
		t.Fatalf("ReadPath(b, a.txt) = %q, %v; want A2", data, err)
	}
	if _, _, err := sn.ReadPath(b, "d/e/f"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("deleted path: got %v, want ErrNotFound", err)
	}
	if ents, err := sn.ListPath(b, ""); err != nil || len(ents) != 1 {
		t.Fatalf("empty directory d should vanish; root lists %v, %v", ents, err)
	}
	cs, err := sn.Changeset(b)
	if err != nil || cs.Generation != 2 || cs.Parents[0] != a {
		t.Fatalf("Changeset(b) = %+v, %v", cs, err)
	}
	log, err := sn.Log(b, 0)
	if err != nil || len(log) != 2 || log[0] != b || log[1] != a {
		t.Fatalf("Log = %v, %v", log, err)
	}
	for _, rev := range []string{"main", b.String(), b.String()[:8], "main~0"} {
		if got, err := sn.Resolve(rev); err != nil || got != b {
			t.Errorf("Resolve(%q) = %v, %v; want b", rev, got, err)
		}
	}
	if got, err := sn.Resolve("main~1"); err != nil || got != a {
		t.Errorf("Resolve(main~1) = %v, %v; want a", got, err)
	}
	diff, err := sn.Diff(a, b)
	if err != nil || len(diff) != 2 || diff[0].Path != "a.txt" || diff[0].Op != "modify" || diff[1].Op != "delete" {
		t.Fatalf("Diff = %+v, %v", diff, err)
	}
	ids, err := sn.ByDelta(cs.Delta)
	if err != nil || len(ids) != 1 || ids[0] != b {
		t.Fatalf("ByDelta = %v, %v", ids, err)
	}
	rl, err := sn.RefLog("main")
	if err != nil || len(rl) != 2 || rl[1].Old != a || rl[1].New != b {
		t.Fatalf("RefLog = %+v, %v", rl, err)
	}
}

func TestReopenSeesEverything(t *testing.T) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m, CheckpointEvery: 3})
	var head core.ID
	for i := 0; i < 10; i++ {
		req := core.CommitRequest{Changes: []core.Change{put(fmt.Sprintf("f%d", i), "x")}, Advance: "main"}
		if i > 0 {
			req.Parents = []core.ID{head}
		}
		head = mustCommit(t, s, req)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := core.Open("/s", core.Options{FS: m, CheckpointEvery: 3})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s2.Close()
	sn := snap(t, s2)
	if got, _ := sn.Ref("main"); got != head {
		t.Fatalf("after reopen main = %v, want %v", got, head)
	}
	flat, err := sn.Flatten(head)
	if err != nil || len(flat) != 10 {
		t.Fatalf("Flatten = %d entries, %v", len(flat), err)
	}
	in, err := s2.Info()
	if err != nil || in.Changesets != 10 || in.CheckpointSeq < 3 {
		t.Fatalf("Info = %+v, %v", in, err)
	}
}

func TestCASConflictReturnsCurrentValue(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("a", "2")}, Advance: "main"})
	// A second commit on a, advancing main from a, loses: main is b.
	_, err := s.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("a", "3")}, Advance: "main"})
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Current != b || ce.Expected != a || ce.Ref != "main" {
		t.Fatalf("got %v, want *ConflictError{main, expected a, current b}", err)
	}
	err = s.UpdateRefs(core.RefUpdate{Name: "main", Old: a, New: a})
	if !errors.As(err, &ce) || ce.Current != b {
		t.Fatalf("UpdateRefs with stale old: got %v", err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "other", New: a}); err != nil {
		t.Fatalf("create ref: %v", err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "other", New: b}); !errors.As(err, &ce) || ce.Current != a {
		t.Fatalf("create of an existing ref: got %v, want conflict with current a", err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "other", Old: a}); err != nil {
		t.Fatalf("delete ref: %v", err)
	}
	if _, err := snap(t, s).Ref("other"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("deleted ref: got %v, want ErrNotFound", err)
	}
	// All or nothing: one failing update leaves the others unapplied.
	err = s.UpdateRefs(core.RefUpdate{Name: "x", New: a}, core.RefUpdate{Name: "main", Old: a, New: a})
	if !errors.Is(err, core.ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
	if _, err := snap(t, s).Ref("x"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("ref x created by a failed multi-update: %v", err)
	}
}

func TestBadInputIsRejected(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a/b", "1")}})
	var missing core.ID
	missing[0] = 1
	cases := []struct {
		name string
		req  core.CommitRequest
		want error
	}{
		{"missing parent", core.CommitRequest{Parents: []core.ID{missing}}, core.ErrNotFound},
		{"absolute path", core.CommitRequest{Changes: []core.Change{put("/x", "1")}}, core.ErrInvalid},
		{"dotdot path", core.CommitRequest{Changes: []core.Change{put("a/../x", "1")}}, core.ErrInvalid},
		{"file as directory", core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("a/b/c", "1")}}, core.ErrInvalid},
		{"directory as file", core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("a", "1")}}, core.ErrInvalid},
		{"delete missing", core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{{Path: "zz", Delete: true}}}, core.ErrNotFound},
		{"bad ref", core.CommitRequest{Advance: "a..b"}, core.ErrInvalid},
		{"ref with space", core.CommitRequest{Advance: "a b"}, core.ErrInvalid},
		{"dup parent", core.CommitRequest{Parents: []core.ID{a, a}}, core.ErrInvalid},
		{"dir mode", core.CommitRequest{Changes: []core.Change{{Path: "m", Mode: objects.ModeDir}}}, core.ErrInvalid},
	}
	for _, c := range cases {
		if _, err := s.Commit(c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "r", New: missing}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ref to a missing changeset: got %v, want ErrNotFound", err)
	}
	for _, name := range []string{"", "-x", "x/", "a//b", "a\x00b", "a\nb", "x.lock"} {
		if err := s.UpdateRefs(core.RefUpdate{Name: name, New: a}); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ref name %q: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestLargeBlobsAreLooseObjects(t *testing.T) {
	s, _ := newMem(t, core.Options{InlineThreshold: 100})
	big := bytes.Repeat([]byte("0123456789"), 100)
	id := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{{Path: "big", Data: big}, put("small", "s")}})
	data, _, err := snap(t, s).ReadPath(id, "big")
	if err != nil || !bytes.Equal(data, big) {
		t.Fatalf("ReadPath(big): %v", err)
	}
	in, _ := s.Info()
	if in.LooseObjects != 1 {
		t.Fatalf("LooseObjects = %d, want 1", in.LooseObjects)
	}
}

func TestAmbiguousPrefixListsCandidates(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	seen := map[string][]core.ID{}
	for i := 0; ; i++ {
		id := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("f", fmt.Sprint(i))}})
		p := id.String()[:4]
		seen[p] = append(seen[p], id)
		if len(seen[p]) == 2 {
			_, err := snap(t, s).Resolve(p)
			var ae *core.AmbiguousError
			if !errors.As(err, &ae) || len(ae.Candidates) != 2 {
				t.Fatalf("Resolve(%q) = %v, want *AmbiguousError with 2 candidates", p, err)
			}
			return
		}
		if i > 5000 {
			t.Fatal("no 4-digit prefix collision in 5000 commits")
		}
	}
}

func TestCreateRefusesExistingAndOpenRefusesNonStore(t *testing.T) {
	m := faultfs.NewMem()
	s := mustCreate(t, "/s", core.Options{FS: m})
	s.Close()
	if _, err := core.Create("/s", core.Options{FS: m}); !errors.Is(err, core.ErrExist) {
		t.Fatalf("Create over a store: got %v, want ErrExist", err)
	}
	if _, err := core.Open("/nothing", core.Options{FS: m}); !errors.Is(err, core.ErrNotStore) {
		t.Fatalf("Open of a missing dir: got %v, want ErrNotStore", err)
	}
	m.MkdirAll("/empty", 0o755)
	if _, err := core.Open("/empty", core.Options{FS: m}); !errors.Is(err, core.ErrNotStore) {
		t.Fatalf("Open of an empty dir: got %v, want ErrNotStore", err)
	}
}

func TestClosedStoreFails(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	s.Close()
	if _, err := s.Commit(core.CommitRequest{}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

func TestTwoInstancesStayConsistent(t *testing.T) {
	m := faultfs.NewMem()
	s1 := mustCreate(t, "/s", core.Options{FS: m, LockTimeout: 5 * time.Second})
	s2 := mustOpen(t, "/s", core.Options{FS: m})
	a := mustCommit(t, s1, core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
	// s2 builds on a commit it has not replayed yet.
	b := mustCommit(t, s2, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("b", "2")}, Advance: "main"})
	// s1 now loses a race it cannot see coming.
	_, err := s1.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("c", "3")}, Advance: "main"})
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Current != b {
		t.Fatalf("s1 commit on stale head: got %v, want conflict with current b", err)
	}
	for i, s := range []*core.Store{s1, s2} {
		if got, _ := snap(t, s).Ref("main"); got != b {
			t.Fatalf("instance %d sees main = %v, want b", i+1, got)
		}
	}
	// Concurrent writers through both instances.
	errc := make(chan error, 40)
	for i := 0; i < 40; i++ {
		s := []*core.Store{s1, s2}[i%2]
		go func(i int) {
			_, err := s.Commit(core.CommitRequest{Changes: []core.Change{put(fmt.Sprint("w", i), "x")}})
			errc <- err
		}(i)
	}
	for i := 0; i < 40; i++ {
		if err := <-errc; err != nil {
			t.Fatalf("concurrent commit: %v", err)
		}
	}
	i1, _ := s1.Info()
	i2, _ := s2.Info()
	if i1.Changesets != 42 || i2.Changesets != 42 || i1.DurableSeq != i2.DurableSeq {
		t.Fatalf("instances disagree: %+v vs %+v", i1, i2)
	}
}

var _ vfs.FS = (*faultfs.MemFS)(nil)

// TestNegativeOptionsAreInvalid: a negative lock timeout, checkpoint
// interval, checkpoint byte count or group cache is ErrInvalid naming the
// option, never a silent default.
func TestNegativeOptionsAreInvalid(t *testing.T) {
	for name, o := range map[string]core.Options{
		"LockTimeout":     {LockTimeout: -time.Second},
		"CheckpointEvery": {CheckpointEvery: -1},
		"CheckpointBytes": {CheckpointBytes: -1},
		"GroupCache":      {GroupCache: -1},
	} {
		o.FS = faultfs.NewMem()
		if _, err := core.Create("/s", o); !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("Create with a negative %s: %v; want ErrInvalid naming it", name, err)
		}
	}
}

// TestACommitReplacesADirectoryWithAFileOnceItsFilesAreDeleted: as git
// does, a change list that deletes every file below d and puts d makes d
// a file, in whatever order it lists them; with a file left below d, d is
// still a directory and the commit is refused.
func TestACommitReplacesADirectoryWithAFileOnceItsFilesAreDeleted(t *testing.T) {
	s, _ := newMem(t, core.Options{})
	a := mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("d/x", "1"), put("d/sub/y", "2"), put("keep", "k")}})
	del := func(p string) core.Change { return core.Change{Path: p, Delete: true} }
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{del("d/x"), put("d", "file")}}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("d/sub/y left: %v, want ErrInvalid (d is a directory)", err)
	}
	b := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("d", "file"), del("d/x"), del("d/sub/y")}})
	b2 := mustCommit(t, s, core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{del("d/x"), del("d/sub/y"), put("d", "file")}})
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sn.Changeset(b)
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := sn.Changeset(b2)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Root != cs2.Root || cs.Delta != cs2.Delta {
		t.Errorf("the same change listed in another order gave tree %s, delta %x; want %s, %x", cs2.Root, cs2.Delta, cs.Root, cs.Delta)
	}
	data, e, err := sn.ReadPath(b, "d")
	if err != nil || string(data) != "file" || e.Mode != objects.ModeFile {
		t.Fatalf("d after the commit: %q %v %v, want the file", data, e.Mode, err)
	}
	flat, err := sn.Flatten(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(flat) != 2 {
		t.Fatalf("tree after the commit: %v, want d and keep", flat)
	}
}
