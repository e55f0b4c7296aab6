package gitx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// exportedMain returns a store whose main has two changesets, exported
// into a fresh bare repository, and the repository's git directory.
func exportedMain(t *testing.T) (*core.Store, string) {
	t.Helper()
	requireGit(t)
	s := memStore(t)
	for i, data := range []string{"one\n", "two\n"} {
		req := core.CommitRequest{Advance: "main", Agent: "agent-1", Changes: []core.Change{{Path: "f", Data: []byte(data)}}}
		if i > 0 {
			main, _ := snap(t, s).Ref("main")
			req.Parents = []core.ID{main}
		}
		if _, err := s.Commit(req); err != nil {
			t.Fatal(err)
		}
	}
	res := mustExport(t, snap(t, s), filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	return s, res.GitDir
}

// commitOnMain advances the store's main by one changeset.
func commitOnMain(t *testing.T, s *core.Store, data string) {
	t.Helper()
	main, _ := snap(t, s).Ref("main")
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{main}, Advance: "main", Agent: "agent-1",
		Changes: []core.Change{{Path: "f", Data: []byte(data)}}}); err != nil {
		t.Fatal(err)
	}
}

// gitCommitOn makes a commit in git on ref, as a person working in the
// repository would, and returns it.
func gitCommitOn(t *testing.T, gitDir, ref string) string {
	t.Helper()
	env := testGitEnv(t)
	parent := strings.TrimSpace(git(t, env, gitDir, "", "rev-parse", ref))
	tree := strings.TrimSpace(git(t, env, gitDir, "", "rev-parse", ref+"^{tree}"))
	c := strings.TrimSpace(git(t, env, gitDir, "made in git\n", "commit-tree", tree, "-p", parent))
	git(t, env, gitDir, "", "update-ref", ref, c, parent)
	return c
}

func revParse(t *testing.T, gitDir, ref string) string {
	t.Helper()
	return strings.TrimSpace(git(t, testGitEnv(t), gitDir, "", "rev-parse", "--verify", "-q", ref))
}

func TestExportRefusesToDropACommitMadeInGit(t *testing.T) {
	s, gitDir := exportedMain(t)
	ref := DefaultPrefix + "main"
	human := gitCommitOn(t, gitDir, ref)
	commitOnMain(t, s, "three\n")

	_, err := Export(snap(t, s), gitDir, ExportOptions{})
	var fe *ForeignError
	if !errors.As(err, &fe) || !errors.Is(err, core.ErrConflict) || !errors.Is(err, ErrForeignCommit) {
		t.Fatalf("export over a commit made in git: %v, want a *ForeignError (core.ErrConflict)", err)
	}
	if len(fe.Refs) != 1 || fe.Refs[0].GitRef != ref || fe.Refs[0].Commit != human {
		t.Fatalf("refused refs %+v, want %s at %s", fe.Refs, ref, human)
	}
	if got := revParse(t, gitDir, ref); got != human {
		t.Fatalf("%s is %s after the refused export, want the commit made in git, %s", ref, got, human)
	}
	if got := git(t, testGitEnv(t), gitDir, "", "for-each-ref", scratchRef); got != "" {
		t.Fatalf("the refused export left its scratch ref: %s", got)
	}
	fsck(t, gitDir)

	res, err := Export(snap(t, s), gitDir, ExportOptions{Force: true})
	if err != nil {
		t.Fatalf("export with Force: %v", err)
	}
	if res.CommitsWritten != 0 {
		t.Fatalf("the forced export wrote %d commits, want 0 (the refused one wrote and mapped them)", res.CommitsWritten)
	}
	if got, want := revParse(t, gitDir, ref), refCommits(res)[ref]; got != want || got == human {
		t.Fatalf("%s is %s after the forced export, want %s", ref, got, want)
	}
}

func TestExportFollowsAStoreRefBackwardsAndAfterALostMapping(t *testing.T) {
	s, gitDir := exportedMain(t)
	ref := DefaultPrefix + "main"
	sn := snap(t, s)
	main, _ := sn.Ref("main")
	cs, err := sn.Changeset(main)
	if err != nil {
		t.Fatal(err)
	}
	// The store's main moves back to its first changeset: the git ref
	// holds a commit an export wrote, so it follows.
	if err := s.UpdateRefs(core.RefUpdate{Name: "main", Old: main, New: cs.Parents[0]}); err != nil {
		t.Fatal(err)
	}
	res := mustExport(t, snap(t, s), gitDir, ExportOptions{})
	if got := revParse(t, gitDir, ref); got != refCommits(res)[ref] {
		t.Fatalf("%s is %s, want %s (main moved back)", ref, got, refCommits(res)[ref])
	}
	// With the mapping file gone, the git ref's commit is one no export
	// is known to have written, but the new main contains it.
	if err := s.UpdateRefs(core.RefUpdate{Name: "main", Old: cs.Parents[0], New: main}); err != nil {
		t.Fatal(err)
	}
	commitOnMain(t, s, "three\n")
	if err := os.Remove(filepath.Join(gitDir, mapName)); err != nil {
		t.Fatal(err)
	}
	res = mustExport(t, snap(t, s), gitDir, ExportOptions{})
	if got := revParse(t, gitDir, ref); got != refCommits(res)[ref] {
		t.Fatalf("%s is %s, want %s (a fast-forward)", ref, got, refCommits(res)[ref])
	}
	fsck(t, gitDir)
}

func TestExportMovesNoRefThatMovedWhileItRan(t *testing.T) {
	s, gitDir := exportedMain(t)
	ref := DefaultPrefix + "main"
	commitOnMain(t, s, "three\n")
	var moved string
	testHookStreamed = func(int, *os.Process) { moved = gitCommitOn(t, gitDir, ref) }
	defer func() { testHookStreamed = nil }()
	_, err := Export(snap(t, s), gitDir, ExportOptions{Force: true})
	if !errors.Is(err, core.ErrConflict) {
		t.Fatalf("export while the ref moved: %v, want core.ErrConflict", err)
	}
	if got := revParse(t, gitDir, ref); got != moved {
		t.Fatalf("%s is %s, want the commit made during the export, %s", ref, got, moved)
	}
}

func TestExportRefusesRefsGitCannotHoldSideBySide(t *testing.T) {
	s, gitDir := exportedMain(t)
	main, _ := snap(t, s).Ref("main")
	for _, name := range []string{"agent/1", "agent"} {
		if err := s.UpdateRefs(core.RefUpdate{Name: name, New: main}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Export(snap(t, s), gitDir, ExportOptions{})
	if !errors.Is(err, ErrUnrepresentable) || !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), `"agent/1"`) {
		t.Fatalf("export of agent and agent/1: %v, want ErrUnrepresentable naming both", err)
	}
	if _, err := Export(snap(t, s), gitDir, ExportOptions{Refs: []string{"agent/1", "main"}}); err != nil {
		t.Fatalf("export of agent/1 alone: %v", err)
	}
	if got := git(t, testGitEnv(t), gitDir, "", "for-each-ref", scratchRef); got != "" {
		t.Fatalf("scratch ref left: %s", got)
	}
}
