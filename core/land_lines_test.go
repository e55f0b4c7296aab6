package core

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
	"github.com/swarmops/swarmops/faultfs"
)

// registry is a ten-line text file whose even lines are fixed separators,
// so that edits of two different odd lines never touch.
func registry(edits map[int]string) []byte {
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		line := "slot " + string(rune('0'+i%10)) + ": free"
		if i%2 == 0 {
			line = "--"
		}
		if e, ok := edits[i]; ok {
			line = e
		}
		b.WriteString(line + "\n")
	}
	return []byte(b.String())
}

// commitOn commits one file at path on parent.
func commitOn(t *testing.T, s *Store, parent ID, path string, data []byte, mode objects.Mode) ID {
	t.Helper()
	return commitChanges(t, s, parent, []Change{{Path: path, Data: data, Mode: mode}})
}

// readMain reads path at main's head.
func readMain(t *testing.T, s *Store, path string) []byte {
	t.Helper()
	sn, head := snapRef(t, s, "main")
	data, _, err := sn.ReadPath(head, path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// gitMergeFile returns `git merge-file -p`'s output, or "" and false when
// git is not installed.
func gitMergeFile(t *testing.T, base, ours, theirs []byte) ([]byte, bool) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, false
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"base": base, "ours": ours, "theirs": theirs} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(git, "merge-file", "-p", "ours", "base", "theirs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git merge-file: %v (a clean merge exits 0)", err)
	}
	return out, true
}

func TestLandMergesEditsOfDifferentPlacesOfOneFileByLines(t *testing.T) {
	s, _ := newLandStore(t)
	base := advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(nil)}})
	mine := registry(map[int]string{3: "slot 3: agent-1"})
	theirs := registry(map[int]string{7: "slot 7: agent-2"})
	change := commitOn(t, s, base, "reg.txt", mine, 0)
	advanceMain(t, s, []Change{{Path: "reg.txt", Data: theirs}})
	r, err := s.Land(change, "main", LandOptions{})
	if err != nil {
		t.Fatalf("land: %v; want a clean line merge", err)
	}
	if r.NoOp {
		t.Fatal("land reported NoOp; want a merge changeset")
	}
	got := readMain(t, s, "reg.txt")
	want := registry(map[int]string{3: "slot 3: agent-1", 7: "slot 7: agent-2"})
	if string(got) != string(want) {
		t.Fatalf("merged reg.txt:\n%s\nwant:\n%s", got, want)
	}
	if g, ok := gitMergeFile(t, registry(nil), theirs, mine); ok && string(g) != string(got) {
		t.Fatalf("merged reg.txt differs from git merge-file's:\n%s\ngit:\n%s", got, g)
	}
}

func TestLandOfOverlappingEditsConflictsWithTheirHunks(t *testing.T) {
	s, _ := newLandStore(t)
	base := advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(nil)}, {Path: "other.txt", Data: []byte("o\n")}})
	change := commitChanges(t, s, base, []Change{
		{Path: "reg.txt", Data: registry(map[int]string{5: "slot 5: agent-1"})},
		{Path: "mine.txt", Data: []byte("m\n")},
	})
	advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(map[int]string{5: "slot 5: agent-2"})}})
	before := readMain(t, s, "reg.txt")
	_, err := s.Land(change, "main", LandOptions{})
	var mce *MergeConflictError
	if !errors.As(err, &mce) || !errors.Is(err, ErrConflict) {
		t.Fatalf("land: %v; want a *MergeConflictError", err)
	}
	if len(mce.Paths) != 1 || mce.Paths[0] != "reg.txt" {
		t.Fatalf("conflict paths %q; want [reg.txt]", mce.Paths)
	}
	h := mce.Hunks["reg.txt"]
	if len(h) != 1 {
		t.Fatalf("hunks of reg.txt: %+v; want one", h)
	}
	if h[0].Base.Start != 5 || strings.Join(h[0].Base.Lines, "|") != "slot 5: free" ||
		strings.Join(h[0].Ours.Lines, "|") != "slot 5: agent-2" || strings.Join(h[0].Theirs.Lines, "|") != "slot 5: agent-1" {
		t.Fatalf("hunk %+v; want base line 5 \"slot 5: free\", ours (main) agent-2, theirs (the change) agent-1", h[0])
	}
	if got := readMain(t, s, "reg.txt"); string(got) != string(before) {
		t.Fatal("a conflicting land wrote main")
	}
}

func TestLandKeepsWholeFileConflictsForBinaryAndDelete(t *testing.T) {
	cases := []struct {
		name        string
		mine, other Change
	}{
		{"binary", Change{Path: "f", Data: []byte("a\x00\nB\nc\n")}, Change{Path: "f", Data: []byte("a\x00\nb\nC\n")}},
		{"delete", Change{Path: "f", Delete: true}, Change{Path: "f", Data: []byte("a\nb\nC\n")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newLandStore(t)
			data := []byte("a\nb\nc\n")
			if tc.name == "binary" {
				data = []byte("a\x00\nb\nc\n")
			}
			base := advanceMain(t, s, []Change{{Path: "f", Data: data}})
			change := commitChanges(t, s, base, []Change{tc.mine})
			advanceMain(t, s, []Change{tc.other})
			_, err := s.Land(change, "main", LandOptions{})
			var mce *MergeConflictError
			if !errors.As(err, &mce) || len(mce.Paths) != 1 || len(mce.Hunks) != 0 {
				t.Fatalf("land: %v (%+v); want a whole-file conflict on f with no hunks", err, mce)
			}
		})
	}
}

func TestLandAfterALostRaceRemergesAChangedFileByLines(t *testing.T) {
	for _, overlap := range []bool{false, true} {
		t.Run(map[bool]string{false: "apart", true: "overlapping"}[overlap], func(t *testing.T) {
			s, _ := newLandStore(t)
			base := advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(nil)}})
			change := commitOn(t, s, base, "reg.txt", registry(map[int]string{1: "slot 1: mine"}), 0)
			advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(map[int]string{5: "slot 5: early"})}})
			raced := registry(map[int]string{5: "slot 5: early", 9: "slot 9: racer"})
			if overlap {
				raced = registry(map[int]string{1: "slot 1: racer", 5: "slot 5: early"})
			}
			setLandHook(t, func(attempt int) {
				if attempt == 1 {
					advanceMain(t, s, []Change{{Path: "reg.txt", Data: raced}})
				}
			})
			r, err := s.Land(change, "main", LandOptions{})
			if overlap {
				var mce *MergeConflictError
				if !errors.As(err, &mce) || len(mce.Hunks["reg.txt"]) != 1 {
					t.Fatalf("land: %v; want a conflict on reg.txt found by the re-merge", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Attempts != 2 {
				t.Fatalf("attempts %d; want 2 (the hook moved main once)", r.Attempts)
			}
			want := registry(map[int]string{1: "slot 1: mine", 5: "slot 5: early", 9: "slot 9: racer"})
			if got := readMain(t, s, "reg.txt"); string(got) != string(want) {
				t.Fatalf("reg.txt after the re-merge:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestMergeChangesCarriesTheOtherParentAndKeepsLocalResolutions(t *testing.T) {
	s, _ := newLandStore(t)
	base := advanceMain(t, s, []Change{{Path: "reg.txt", Data: registry(nil)}, {Path: "c.txt", Data: []byte("c\n")}})
	// The branch edits slot 3 of reg.txt and c.txt.
	branch := commitChanges(t, s, base, []Change{
		{Path: "reg.txt", Data: registry(map[int]string{3: "slot 3: branch"})},
		{Path: "c.txt", Data: []byte("c by branch\n")},
	})
	// Main edits slot 9, changes c.txt too (a conflict) and adds n.txt.
	main := advanceMain(t, s, []Change{
		{Path: "reg.txt", Data: registry(map[int]string{9: "slot 9: main"})},
		{Path: "c.txt", Data: []byte("c by main\n")},
		{Path: "n.txt", Data: []byte("n\n")},
	})
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Without a local change of c.txt the merge conflicts there.
	_, err = sn.MergeChanges(branch, main, []Change{{Path: "reg.txt", Data: registry(map[int]string{3: "slot 3: branch", 5: "slot 5: local"})}})
	var mce *MergeConflictError
	if !errors.As(err, &mce) || strings.Join(mce.Paths, ",") != "c.txt" {
		t.Fatalf("MergeChanges without a resolution: %v; want a conflict on c.txt", err)
	}
	// With one, the local resolution wins there, reg.txt merges by lines
	// and n.txt is carried.
	changes, err := sn.MergeChanges(branch, main, []Change{
		{Path: "reg.txt", Data: registry(map[int]string{3: "slot 3: branch", 5: "slot 5: local"})},
		{Path: "c.txt", Data: []byte("c by both\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := s.Commit(CommitRequest{Parents: []ID{branch, main}, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	sn, err = s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"reg.txt": string(registry(map[int]string{3: "slot 3: branch", 5: "slot 5: local", 9: "slot 9: main"})),
		"c.txt":   "c by both\n",
		"n.txt":   "n\n",
	} {
		got, _, err := sn.ReadPath(merged, path)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
}

// drawText draws a short text over a small alphabet of lines, so that
// edits often meet; label names the draws.
func drawText(t *rapid.T, label string, from []string) []string {
	lines := slices.Clone(from)
	for k := rapid.IntRange(0, 3).Draw(t, label+" edits"); k > 0; k-- {
		at := rapid.IntRange(0, len(lines)).Draw(t, label+" at")
		line := rapid.SampledFrom([]string{"a", "b", "c", "x", "y"}).Draw(t, label+" line")
		switch op := rapid.IntRange(0, 2).Draw(t, label+" op"); {
		case op == 0 || at == len(lines):
			lines = slices.Insert(lines, at, line)
		case op == 1:
			lines[at] = line
		default:
			lines = slices.Delete(lines, at, at+1)
		}
	}
	return lines
}

func joinLines(lines []string) []byte {
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestLandOfOneFileIsTextmergesMerge checks, on random three-way edits of
// one file, that Land's outcome is core/textmerge's (whose own property
// test holds it to git merge-file): the merged bytes when clean, the same
// hunks when not. Reproduce a failure with the seed rapid prints
// (go test ./core -run TestLandOfOneFileIsTextmergesMerge -rapid.seed=N).
func TestLandOfOneFileIsTextmergesMerge(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base := drawText(rt, "base", []string{"a", "b", "c", "a", "b"})
		ours, theirs := drawText(rt, "ours", base), drawText(rt, "theirs", base)
		b, o, th := joinLines(base), joinLines(ours), joinLines(theirs)
		want, err := textmerge.Merge(b, o, th, textmerge.MergeOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		s, err := Create("/s", Options{FS: faultfs.NewMem()})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		m0, err := s.Commit(CommitRequest{Changes: []Change{{Path: "f", Data: b}}, Advance: "main"})
		if err != nil {
			rt.Fatal(err)
		}
		change, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: []Change{{Path: "f", Data: th}}})
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: []Change{{Path: "f", Data: o}}, Advance: "main"}); err != nil {
			rt.Fatal(err)
		}
		_, err = s.Land(change, "main", LandOptions{})
		var mce *MergeConflictError
		switch {
		case want.Clean && err != nil:
			rt.Fatalf("land: %v; textmerge merges cleanly to %q", err, want.Merged)
		case want.Clean:
			sn, err := s.Snapshot()
			if err != nil {
				rt.Fatal(err)
			}
			got, _, err := sn.ReadPath(mustRef(rt, sn, "main"), "f")
			if err != nil {
				rt.Fatal(err)
			}
			if string(got) != string(want.Merged) {
				rt.Fatalf("landed f = %q; textmerge gives %q", got, want.Merged)
			}
		case !errors.As(err, &mce):
			rt.Fatalf("land: %v; textmerge conflicts with %d hunks", err, len(want.Conflicts))
		case !reflect.DeepEqual(mce.Hunks["f"], want.Conflicts):
			rt.Fatalf("hunks %+v; textmerge's %+v", mce.Hunks["f"], want.Conflicts)
		}
	})
}

func mustRef(t *rapid.T, sn *Snapshot, name string) ID {
	id, err := sn.Ref(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
