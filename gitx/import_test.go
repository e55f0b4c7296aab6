package gitx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// gitRepo is a work tree with a repository the tests commit to with git.
type gitRepo struct {
	tb  testing.TB
	dir string
	env []string
	n   int // commits made, which sets their dates
}

func newGitRepo(tb testing.TB) *gitRepo {
	tb.Helper()
	g := &gitRepo{tb: tb, dir: tb.TempDir(), env: testGitEnv(tb)}
	g.git("", "init", "-q")
	g.git("", "symbolic-ref", "HEAD", "refs/heads/main")
	return g
}

func (g *gitRepo) git(stdin string, args ...string) string {
	g.tb.Helper()
	return git(g.tb, g.env, g.dir, stdin, args...)
}

func (g *gitRepo) write(p, content string, mode os.FileMode) {
	g.tb.Helper()
	full := filepath.Join(g.dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		g.tb.Fatal(err)
	}
	os.Remove(full)
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		g.tb.Fatal(err)
	}
	os.Chmod(full, mode)
}

func (g *gitRepo) symlink(p, target string) {
	g.tb.Helper()
	full := filepath.Join(g.dir, p)
	os.MkdirAll(filepath.Dir(full), 0o755)
	os.Remove(full)
	if err := os.Symlink(target, full); err != nil {
		g.tb.Fatal(err)
	}
}

// commit commits everything in the work tree, dated by its number.
func (g *gitRepo) commit(msg string) string {
	g.tb.Helper()
	g.n++
	date := fmt.Sprintf("@%d +0200", 1700000000+g.n*60)
	g.git("", "add", "-A")
	g.git("", "-c", "user.name=unused", "commit", "-q", "--allow-empty", "-m", msg,
		"--date", date, "--no-verify")
	return g.head()
}

func (g *gitRepo) head() string { return strings.TrimSpace(g.git("", "rev-parse", "HEAD")) }

// copyStrings copies Go's strings package into the work tree under dir.
func (g *gitRepo) copyStrings(dir string) {
	g.tb.Helper()
	for name, data := range seedFiles(g.tb) {
		g.write(filepath.Join(dir, name), string(data), 0o644)
	}
}

func mustImport(tb testing.TB, s *core.Store, dir string, o ImportOptions) *ImportResult {
	tb.Helper()
	res, err := Import(s, dir, o)
	if err != nil {
		tb.Fatalf("import %s from %s: %v", o.Rev, dir, err)
	}
	return res
}

// treeOf is the tree id of a commit.
func treeOf(tb testing.TB, gitDir, commit string) string {
	tb.Helper()
	return strings.TrimSpace(git(tb, testGitEnv(tb), gitDir, "", "--git-dir="+gitDir, "rev-parse", commit+"^{tree}"))
}

func TestImportThenExportOfABranchGivesTheSameTreeID(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	g.copyStrings("src/strings")
	g.write("bin/build.sh", "#!/bin/sh\ngo build ./...\n", 0o755)
	g.symlink("strings.go", "src/strings/strings.go")
	g.symlink("dangling", "../nowhere")
	g.write("docs/odd name \"quoted\".md", "odd\n", 0o644)
	tip := g.commit("a real tree")

	s := memStore(t)
	res := mustImport(t, s, g.dir, ImportOptions{Rev: "main", Agent: "importer"})
	if res.Ref != "main" || !res.Moved || !res.Old.IsZero() || res.GitCommit != tip || res.Changesets != 1 {
		t.Fatalf("import: %+v", res)
	}
	sn := snap(t, s)
	if ms, err := sn.Moves(core.MoveQuery{}); err != nil || len(ms) != 1 || ms[0].Op != core.OpImport || ms[0].Agent != "importer" {
		t.Fatalf("the import's ref move: %+v, %v; want one, operation import by importer", ms, err)
	}
	cs, err := sn.Changeset(res.New)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Agent != "Ada Lovelace" || cs.Message != "a real tree\n" || cs.Time.Unix() != 1700000060 || len(cs.Parents) != 0 {
		t.Fatalf("changeset: agent %q, message %q, time %v, parents %v", cs.Agent, cs.Message, cs.Time, cs.Parents)
	}
	if d := diffTrees(gitTree(t, filepath.Join(g.dir, ".git"), tip), storeTree(t, sn, res.New)); d != "" {
		t.Fatalf("the imported tree differs from git's:\n%s", d)
	}
	out := mustExport(t, sn, filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	if got, want := treeOf(t, out.GitDir, out.Refs[0].Commit), treeOf(t, filepath.Join(g.dir, ".git"), tip); got != want {
		t.Fatalf("exported tree %s, git's tree %s", got, want)
	}
}

// buildHistory makes a git history with what import must carry: edits,
// deletions of files and whole directories, a file that becomes a
// directory, executable bits switched, symbolic links retargeted, a side
// branch merged with a two-parent merge, and an empty commit.
func buildHistory(g *gitRepo) {
	g.copyStrings("strings")
	g.write("run.sh", "#!/bin/sh\n", 0o644)
	g.symlink("link", "strings/strings.go")
	g.write("gone/a", "a\n", 0o644)
	g.write("gone/b", "b\n", 0o644)
	g.write("becomes-dir", "file\n", 0o644)
	g.commit("root")
	g.write("run.sh", "#!/bin/sh\necho hi\n", 0o755)
	g.commit("make run.sh executable")
	g.git("", "checkout", "-q", "-b", "side")
	g.write("side/one", "1\n", 0o644)
	g.commit("side one")
	g.write("strings/strings.go", "package strings // side\n", 0o644)
	g.commit("side rewrites strings.go")
	g.git("", "checkout", "-q", "main")
	os.RemoveAll(filepath.Join(g.dir, "gone"))
	g.commit("delete a directory")
	os.Remove(filepath.Join(g.dir, "becomes-dir"))
	g.write("becomes-dir/inside", "now a dir\n", 0o644)
	g.symlink("link", "run.sh")
	g.commit("a file becomes a directory; the link moves")
	g.git("", "-c", "user.name=unused", "merge", "-q", "--no-ff", "--no-edit", "side")
	g.n++
	g.write("run.sh", "#!/bin/sh\necho merged\n", 0o644)
	g.commit("after the merge, not executable")
	g.commit("empty")
}

// shapes describes every commit of a history by its tree, its parents'
// trees, its author time and its subject, sorted: two histories with the
// same shapes have the same trees in the same graph.
func shapes(tb testing.TB, gitDir, rev string) []string {
	tb.Helper()
	out := git(tb, testGitEnv(tb), gitDir, "", "--git-dir="+gitDir, "log", "--format=%H %T %at %s", rev)
	trees := map[string]string{}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(l, " ", 4)
		trees[f[0]] = f[1]
		lines = append(lines, l)
	}
	parents := git(tb, testGitEnv(tb), gitDir, "", "--git-dir="+gitDir, "rev-list", "--parents", rev)
	ps := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(parents), "\n") {
		f := strings.Fields(l)
		for _, p := range f[1:] {
			ps[f[0]] = append(ps[f[0]], trees[p])
		}
	}
	var shapes []string
	for _, l := range lines {
		f := strings.SplitN(l, " ", 4)
		shapes = append(shapes, fmt.Sprintf("%s parents=%v %s %s", f[1], ps[f[0]], f[2], f[3]))
	}
	sort.Strings(shapes)
	return shapes
}

func TestImportOfAHistoryThenExportGivesTheSameTreesInTheSameGraph(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	buildHistory(g)
	s := memStore(t)
	res := mustImport(t, s, g.dir, ImportOptions{Rev: "main", History: true})
	if res.Changesets != 9 {
		t.Fatalf("imported %d changesets, want 9", res.Changesets)
	}
	sn := snap(t, s)
	log, _ := sn.Log(res.New, 0)
	if len(log) != 7 {
		t.Fatalf("first-parent history of %d changesets, want 7", len(log))
	}
	out := mustExport(t, sn, filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	want, got := shapes(t, filepath.Join(g.dir, ".git"), "main"), shapes(t, out.GitDir, out.Refs[0].Commit)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("exported history:\n%s\nwant (git's):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fsck(t, out.GitDir)
}

func TestReimportingAHistoryGivesTheSameChangesetIDs(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	buildHistory(g)
	a, b := memStore(t), memStore(t)
	ra := mustImport(t, a, g.dir, ImportOptions{Rev: "main", History: true})
	rb := mustImport(t, b, g.dir, ImportOptions{Rev: "main", History: true})
	if ra.New != rb.New {
		t.Fatalf("two imports of one history: %s and %s", ra.New, rb.New)
	}
	again := mustImport(t, a, g.dir, ImportOptions{Rev: "main", History: true})
	if again.New != ra.New || again.Moved || again.Old != ra.New {
		t.Fatalf("re-import into the same store: %+v, want the same id and no move", again)
	}
	tip := mustImport(t, a, g.dir, ImportOptions{Rev: "side", As: "side-tip"})
	tip2 := mustImport(t, b, g.dir, ImportOptions{Rev: "side", As: "side-tip"})
	if tip.New != tip2.New || !tip.Moved {
		t.Fatalf("tip imports: %+v and %+v", tip, tip2)
	}
}

// crafted returns a repository whose main holds, besides a.txt, the
// entries fast-import is given in extra (lines of the form
// "M MODE DATAREF PATH", where :1 is a blob).
func crafted(tb testing.TB, extra string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "crafted.git")
	env := testGitEnv(tb)
	git(tb, env, tb.TempDir(), "", "init", "-q", "--bare", dir)
	stream := "blob\nmark :1\ndata 2\nx\n\n" +
		"commit refs/heads/main\nauthor A <a@x> 1700000000 +0000\ncommitter A <a@x> 1700000000 +0000\ndata 2\nm\n" +
		"M 100644 :1 a.txt\n" + extra + "\ndone\n"
	git(tb, env, dir, stream, "--git-dir="+dir, "fast-import", "--quiet", "--done")
	return dir
}

func TestImportSkipsSubmodulesAndSaysWhich(t *testing.T) {
	requireGit(t)
	dir := crafted(t, "M 160000 0123456789012345678901234567890123456789 vendor/lib\n")
	s := memStore(t)
	res := mustImport(t, s, dir, ImportOptions{Rev: "main"})
	if fmt.Sprint(res.Skipped) != "[vendor/lib]" {
		t.Fatalf("skipped %v, want [vendor/lib]", res.Skipped)
	}
	if got := storeTree(t, snap(t, s), res.New); len(got) != 1 || got["a.txt"].data != "x\n" {
		t.Fatalf("imported tree %v, want a.txt alone", got)
	}
}

func TestImportRefusesPathsTheStoreCannotHoldAndMovesNothing(t *testing.T) {
	requireGit(t)
	for name, line := range map[string]string{
		"a .git directory":        "M 100644 :1 sub/.git/config\n",
		"a .GIT directory":        "M 100644 :1 .GIT/hooks/x\n",
		"the work-tree metadata":  "M 100644 :1 .swarmops-tree/index\n",
		"a name that is not UTF8": "M 100644 :1 \"bad\\377name\"\n",
		"a name over 255 bytes":   "M 100644 :1 " + strings.Repeat("n", 256) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := crafted(t, line)
			s := memStore(t)
			_, err := Import(s, dir, ImportOptions{Rev: "main"})
			if !errors.Is(err, ErrUnrepresentable) || !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("import: %v, want ErrUnrepresentable (core.ErrInvalid)", err)
			}
			if refs, _ := snap(t, s).Refs(); len(refs) != 0 {
				t.Fatalf("refs after a refused import: %v", refs)
			}
		})
	}
}

func TestImportRefusesBadRevisionsAndDirectories(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	g.write("f", "f\n", 0o644)
	tip := g.commit("one")
	g.git("", "tag", "v1")
	s := memStore(t)
	for _, c := range []struct {
		o    ImportOptions
		dir  string
		want error
	}{
		{ImportOptions{Rev: "nosuch"}, g.dir, core.ErrNotFound},
		{ImportOptions{Rev: "-x"}, g.dir, core.ErrInvalid},
		{ImportOptions{Rev: ""}, g.dir, core.ErrInvalid},
		{ImportOptions{Rev: "v1"}, g.dir, core.ErrInvalid},
		{ImportOptions{Rev: tip}, g.dir, core.ErrInvalid},
		{ImportOptions{Rev: "main"}, t.TempDir(), ErrNotRepository},
		{ImportOptions{Rev: "main"}, filepath.Join(g.dir, "missing"), core.ErrNotFound},
		{ImportOptions{Rev: "main", As: "bad..name"}, g.dir, core.ErrInvalid},
	} {
		if _, err := Import(s, c.dir, c.o); !errors.Is(err, c.want) {
			t.Errorf("import %+v from %s: %v, want %v", c.o, c.dir, err, c.want)
		}
	}
	res := mustImport(t, s, g.dir, ImportOptions{Rev: "v1", As: "release"})
	if res.Ref != "release" || res.GitCommit != tip {
		t.Fatalf("import of a tag with --as: %+v", res)
	}
	sub := filepath.Join(g.dir, "sub")
	os.Mkdir(sub, 0o755)
	if _, err := Import(s, sub, ImportOptions{Rev: "main"}); !errors.Is(err, ErrNotRepository) {
		t.Fatalf("a directory inside a work tree is not its repository: %v", err)
	}
}

func TestImportLeavesARefThatMovedMeanwhileAndSaysSo(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	buildHistory(g)
	s := memStore(t)
	other, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "x", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	_, err = Import(s, g.dir, ImportOptions{Rev: "main", History: true, Progress: func(done, total int) {
		if done == 3 && !moved {
			moved = true
			if err := s.UpdateRefs(core.RefUpdate{Name: "main", New: other}); err != nil {
				t.Fatal(err)
			}
		}
	}})
	var ce *core.ConflictError
	if !errors.As(err, &ce) || ce.Current != other {
		t.Fatalf("import while main moved: %v, want a conflict naming %s", err, other)
	}
	if got, _ := snap(t, s).Ref("main"); got != other {
		t.Fatalf("main is %s, want %s (left alone)", got, other)
	}
}

// TestImportOfADirectoryReplacedByAFileAndBack: commits that turn a
// directory into a file and a file into a directory import as git has
// them, and export back to the same trees.
func TestImportOfADirectoryReplacedByAFileAndBack(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	g.write("d/x", "x\n", 0o644)
	g.write("d/sub/y", "y\n", 0o644)
	g.commit("one")
	os.RemoveAll(filepath.Join(g.dir, "d"))
	g.write("d", "now a file\n", 0o644)
	g.commit("two")
	os.Remove(filepath.Join(g.dir, "d"))
	g.write("d/z", "a directory again\n", 0o644)
	g.commit("three")
	s := memStore(t)
	res := mustImport(t, s, g.dir, ImportOptions{Rev: "main", History: true})
	if res.Changesets != 3 {
		t.Fatalf("imported %d changesets, want 3", res.Changesets)
	}
	out := mustExport(t, snap(t, s), filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	want, got := shapes(t, filepath.Join(g.dir, ".git"), "main"), shapes(t, out.GitDir, out.Refs[0].Commit)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("exported history:\n%s\nwant (git's):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestImportOfAHistoryLongerThanADiffBatch imports a history that spans
// three `git diff-tree --stdin` batches, with empty commits, deletions,
// mode changes and a merge among them, and checks every commit's tree and
// parents against git's.
func TestImportOfAHistoryLongerThanADiffBatch(t *testing.T) {
	requireGit(t)
	g := newGitRepo(t)
	g.write("base", "base\n", 0o644)
	g.commit("root")
	var s strings.Builder
	n := 2*diffBatch + 7
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&s, "commit refs/heads/main\nmark :%d\ncommitter a <a@x> %d +0000\ndata 4\nc%03d\n", i, 1700000000+i, i%1000)
		if i == 1 {
			s.WriteString("from refs/heads/main^0\n")
		}
		if i == diffBatch+1 {
			// A merge with an earlier commit, at the first commit of the
			// second batch.
			fmt.Fprintf(&s, "merge :%d\n", i-5)
		}
		switch {
		case i%97 == 0: // an empty commit
		case i%13 == 0:
			fmt.Fprintf(&s, "D f%d\n", (i-1)%7)
		case i%11 == 0:
			fmt.Fprintf(&s, "M 100755 inline f%d\ndata 3\nx%d\n", i%7, i%10)
		default:
			fmt.Fprintf(&s, "M 100644 inline f%d\ndata %d\nline %d\n", i%7, len(fmt.Sprintf("line %d\n", i)), i)
		}
	}
	g.git(s.String(), "fast-import", "--quiet")
	st := memStore(t)
	res := mustImport(t, st, g.dir, ImportOptions{Rev: "main", History: true})
	if res.Changesets != n+1 {
		t.Fatalf("imported %d changesets, want %d", res.Changesets, n+1)
	}
	out := mustExport(t, snap(t, st), filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	want, got := shapes(t, filepath.Join(g.dir, ".git"), "main"), shapes(t, out.GitDir, out.Refs[0].Commit)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("exported history differs from git's (%d and %d commits)", len(got), len(want))
	}
}

func TestAnExportBackIntoTheImportedRepositoryBuildsOnItsCommits(t *testing.T) {
	requireGit(t)
	for _, history := range []bool{true, false} {
		t.Run(fmt.Sprintf("history=%v", history), func(t *testing.T) {
			g := newGitRepo(t)
			buildHistory(g)
			head := g.head()
			s := memStore(t)
			res := mustImport(t, s, g.dir, ImportOptions{Rev: "main", History: history})
			if res.MapNote != "" {
				t.Fatalf("import: %s", res.MapNote)
			}
			if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{res.New}, Advance: "main", Agent: "agent-7",
				Changes: []core.Change{{Path: "agent.txt", Data: []byte("agent\n")}}}); err != nil {
				t.Fatal(err)
			}
			out := mustExport(t, snap(t, s), g.dir, ExportOptions{Refs: []string{"main"}})
			if out.CommitsWritten != 1 {
				t.Fatalf("the export wrote %d commits, want 1: the imported ones are git's own", out.CommitsWritten)
			}
			exported := out.Refs[0].Commit
			if got := strings.TrimSpace(g.git("", "rev-parse", exported+"^")); got != head {
				t.Fatalf("the exported commit's parent is %s, want main's own head %s", got, head)
			}
			g.git("", "merge", "-q", "--ff-only", "swarm/main")
			if got := g.head(); got != exported {
				t.Fatalf("main after merging swarm/main is %s, want %s", got, exported)
			}
			fsck(t, filepath.Join(g.dir, ".git"))
		})
	}
}

func TestImportTakesBackWhatAnExportWroteAndRefusesToDropWork(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	one, err := s.Commit(core.CommitRequest{Advance: "main", Agent: "agent-1", Message: "one",
		Changes: []core.Change{{Path: "a", Data: []byte("1\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out.git")
	mustExport(t, snap(t, s), dir, ExportOptions{})

	// store -> git -> store: the same changeset, nothing new.
	rt := mustImport(t, s, dir, ImportOptions{Rev: "refs/heads/swarm/main", As: "rt", History: true})
	if rt.New != one || rt.Changesets != 0 || rt.Reused != 1 {
		t.Fatalf("import of what the export wrote: new %s (want %s), %d new changesets, %d reused",
			rt.New, one, rt.Changesets, rt.Reused)
	}

	// A person builds on swarm/main in git; importing it onto main is a
	// fast-forward whose parent is main's own changeset.
	env := testGitEnv(t)
	gitDir := gitDirOf(t, dir)
	human := gitCommitOn(t, gitDir, "refs/heads/swarm/main")
	res := mustImport(t, s, dir, ImportOptions{Rev: "refs/heads/swarm/main", As: "main", History: true})
	cs, err := snap(t, s).Changeset(res.New)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Moved || res.Changesets != 1 || len(cs.Parents) != 1 || cs.Parents[0] != one {
		t.Fatalf("import of a commit made on swarm/main: moved %v, %d new, parents %v; want one new changeset on %s",
			res.Moved, res.Changesets, cs.Parents, one)
	}

	// Main moves on in the store; a git branch without that work does
	// not move it back.
	if _, err := s.Commit(core.CommitRequest{Parents: []core.ID{res.New}, Advance: "main", Message: "two",
		Changes: []core.Change{{Path: "b", Data: []byte("2\n")}}}); err != nil {
		t.Fatal(err)
	}
	before, _ := snap(t, s).Ref("main")
	git(t, env, gitDir, "", "update-ref", "refs/heads/other", human)
	_, err = Import(s, dir, ImportOptions{Rev: "refs/heads/other", As: "main", History: true})
	var nf *NotFastForwardError
	if !errors.As(err, &nf) || !errors.Is(err, core.ErrConflict) || nf.Current != before {
		t.Fatalf("import that would drop main's work: %v, want a *NotFastForwardError at %s", err, before)
	}
	if got, _ := snap(t, s).Ref("main"); got != before {
		t.Fatalf("main moved to %s on a refused import", got)
	}
	if res := mustImport(t, s, dir, ImportOptions{Rev: "refs/heads/other", As: "main", History: true, Force: true}); !res.Moved {
		t.Fatalf("import with Force did not move main")
	}
}
