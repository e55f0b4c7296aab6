package core

import (
	"errors"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
)

// The merge of a regular or executable file takes its mode and its content
// apart, each three ways, as git does: one side making f executable and
// the other editing it merge to the edit, executable.

// entryAt reads path and its entry at changeset cs.
func entryAt(t *testing.T, s *Store, cs ID, path string) ([]byte, objects.Entry) {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data, e, err := sn.ReadPath(cs, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return data, e
}

// landOneFileCase commits branch's change of f on base (which main is
// at), then main's, and lands the branch onto main.
func landOneFileCase(t *testing.T, base, branch, main Change) (*Store, error) {
	t.Helper()
	s, _ := newLandStore(t)
	b := advanceMain(t, s, []Change{base})
	change := commitChanges(t, s, b, []Change{branch})
	advanceMain(t, s, []Change{main})
	_, err := s.Land(change, "main", LandOptions{})
	return s, err
}

func TestLandMergesAModeChangeAndAContentEditApart(t *testing.T) {
	abc := []byte("a\nb\nc\n")
	bin := []byte("a\x00\nb\nc\n")
	cases := []struct {
		name               string
		base, branch, main Change
		want               []byte
	}{
		{"mode on the branch, content on the target",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("A\nb\nc\n")},
			[]byte("A\nb\nc\n")},
		{"content on the branch, mode on the target",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: []byte("A\nb\nc\n")},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			[]byte("A\nb\nc\n")},
		{"mode and an edit on the branch, another edit on the target",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: []byte("A\nb\nc\n"), Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("a\nb\nC\n")},
			[]byte("A\nb\nC\n")},
		{"mode on the branch, binary content on the target",
			Change{Path: "f", Data: bin},
			Change{Path: "f", Data: bin, Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("A\x00\nb\nc\n")},
			[]byte("A\x00\nb\nc\n")},
		{"both make it executable, each with its own edit",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: []byte("A\nb\nc\n"), Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("a\nb\nC\n"), Mode: objects.ModeExec},
			[]byte("A\nb\nC\n")},
		{"both make it executable, one edits it",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("a\nb\nC\n"), Mode: objects.ModeExec},
			[]byte("a\nb\nC\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := landOneFileCase(t, c.base, c.branch, c.main)
			if err != nil {
				t.Fatalf("land: %v; want a clean merge", err)
			}
			data, e := entryAt(t, s, refAt(t, s, "main"), "f")
			if string(data) != string(c.want) || e.Mode != objects.ModeExec {
				t.Fatalf("f after the land: %q mode %o; want %q mode %o", data, e.Mode, c.want, objects.ModeExec)
			}
		})
	}
}

func TestLandKeepsConflictsTheModeRuleDoesNotResolve(t *testing.T) {
	abc := []byte("a\nb\nc\n")
	cases := []struct {
		name               string
		base, branch, main Change
		modeInMessage      bool
	}{
		{"both add it, with different modes",
			Change{Path: "other", Data: abc},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			Change{Path: "f", Data: abc},
			true},
		{"a link against a mode change",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Data: []byte("target"), Mode: objects.ModeSymlink},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			false},
		{"a delete against a mode change",
			Change{Path: "f", Data: abc},
			Change{Path: "f", Delete: true},
			Change{Path: "f", Data: abc, Mode: objects.ModeExec},
			false},
		{"a mode change against binary content both edited",
			Change{Path: "f", Data: []byte("a\x00\nb\nc\n")},
			Change{Path: "f", Data: []byte("A\x00\nb\nc\n"), Mode: objects.ModeExec},
			Change{Path: "f", Data: []byte("a\x00\nb\nC\n")},
			false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := landOneFileCase(t, c.base, c.branch, c.main)
			var mce *MergeConflictError
			if !errors.As(err, &mce) || !errors.Is(err, ErrConflict) ||
				strings.Join(mce.Paths, ",") != "f" || len(mce.Hunks) != 0 {
				t.Fatalf("land: %v (%+v); want a whole-file conflict on f", err, mce)
			}
			if got := strings.Contains(err.Error(), "f: mode 100644 (ours) against 100755 (theirs)"); got != c.modeInMessage {
				t.Fatalf("land: %q; names the modes: %v, want %v", err, got, c.modeInMessage)
			}
			_, e := entryAt(t, s, refAt(t, s, "main"), "f")
			if e.Mode != c.main.Mode && !(c.main.Mode == 0 && e.Mode == objects.ModeFile) {
				t.Fatalf("a conflicting land changed main's f to mode %o", e.Mode)
			}
		})
	}
}

// TestMergeChangesMergesModeAndContentApart is the same rule for a commit
// with a second parent: ours edits f, theirs makes it executable, and a
// local edit on ours merges with theirs' mode change too.
func TestMergeChangesMergesModeAndContentApart(t *testing.T) {
	s, _ := newLandStore(t)
	base := advanceMain(t, s, []Change{{Path: "f", Data: []byte("a\nb\nc\n")}})
	ours := commitOn(t, s, base, "f", []byte("A\nb\nc\n"), 0)
	theirs := commitOn(t, s, base, "f", []byte("a\nb\nc\n"), objects.ModeExec)
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		local []Change
		want  string
	}{
		{"no local change", nil, "A\nb\nc\n"},
		{"a local edit of f", []Change{{Path: "f", Data: []byte("A\nb\nC\n")}}, "A\nb\nC\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			changes, err := sn.MergeChanges(ours, theirs, c.local)
			if err != nil {
				t.Fatalf("MergeChanges: %v; want a clean merge", err)
			}
			merged, err := s.Commit(CommitRequest{Parents: []ID{ours, theirs}, Changes: changes})
			if err != nil {
				t.Fatal(err)
			}
			data, e := entryAt(t, s, merged, "f")
			if string(data) != c.want || e.Mode != objects.ModeExec {
				t.Fatalf("f in the merge: %q mode %o; want %q mode %o", data, e.Mode, c.want, objects.ModeExec)
			}
		})
	}
	// Two sides adding a file with different modes still conflict, by name.
	other := commitOn(t, s, base, "g", []byte("g\n"), objects.ModeExec)
	if sn, err = s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	_, err = sn.MergeChanges(ours, other, []Change{{Path: "g", Data: []byte("g\n")}})
	var mce *MergeConflictError
	if !errors.As(err, &mce) || strings.Join(mce.Paths, ",") != "g" ||
		!strings.Contains(err.Error(), "g: mode 100644 (ours) against 100755 (theirs)") {
		t.Fatalf("MergeChanges: %v; want a mode conflict on g", err)
	}
}
