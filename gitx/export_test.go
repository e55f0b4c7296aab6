package gitx

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// historySize is the length of the generated history the export tests
// run on.
const historySize = 1000

func mustExport(tb testing.TB, sn *core.Snapshot, dir string, o ExportOptions) *ExportResult {
	tb.Helper()
	res, err := Export(sn, dir, o)
	if err != nil {
		tb.Fatalf("export into %s: %v", dir, err)
	}
	return res
}

// refCommits maps each exported git ref to its commit.
func refCommits(res *ExportResult) map[string]string {
	out := map[string]string{}
	for _, r := range res.Refs {
		out[r.GitRef] = r.Commit
	}
	return out
}

// checkMapComplete fails unless every commit the mapping file names is in
// the repository.
func checkMapComplete(tb testing.TB, gitDir string) *exportMap {
	tb.Helper()
	m := loadMap(vfs.OS(), gitDir)
	if m.note != "" {
		tb.Fatalf("mapping file: %s", m.note)
	}
	var shas []string
	for _, id := range m.order {
		shas = append(shas, m.commits[id])
	}
	r := &repo{gitDir: gitDir, env: gitEnv()}
	missing, err := r.missingCommits(shas)
	if err != nil {
		tb.Fatal(err)
	}
	if len(missing) > 0 {
		tb.Fatalf("the mapping file names %d commits the repository lacks, e.g. %v", len(missing), firstKey(missing))
	}
	return m
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// fsck runs git fsck --strict and fails on any error or warning.
func fsck(tb testing.TB, gitDir string) {
	tb.Helper()
	cmd := exec.Command("git", "--git-dir="+gitDir, "fsck", "--strict", "--no-dangling")
	cmd.Env = testGitEnv(tb)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "error") || strings.Contains(string(out), "warning") {
		tb.Fatalf("git fsck --strict: %v\n%s", err, out)
	}
}

// checkCommits checks every commit of the mapping against its changeset:
// parents (mapped, in order), author and committer, dates and message.
func checkCommits(tb testing.TB, sn *core.Snapshot, gitDir string, m *exportMap) {
	tb.Helper()
	r := &repo{gitDir: gitDir, env: gitEnv()}
	cat, err := r.startCatFile()
	if err != nil {
		tb.Fatal(err)
	}
	defer cat.close()
	for _, id := range m.order {
		cs, err := sn.Changeset(id)
		if err != nil {
			continue // exported from another snapshot
		}
		raw, err := cat.read(m.commits[id], "commit")
		if err != nil {
			tb.Fatal(err)
		}
		var want strings.Builder
		head, _, _ := strings.Cut(string(raw), "\n")
		want.WriteString(head + "\n") // the tree line
		for _, p := range cs.Parents {
			fmt.Fprintf(&want, "parent %s\n", m.commits[p])
		}
		name, email := Ident(cs.Agent)
		fmt.Fprintf(&want, "author %s <%s> %d +0000\ncommitter %s <%s> %d +0000\n\n%s",
			name, email, cs.Time.Unix(), name, email, cs.Time.Unix(), cs.Message)
		if string(raw) != want.String() {
			tb.Fatalf("changeset %s exported as commit %s:\n%s\nwant:\n%s", id, m.commits[id], raw, want.String())
		}
	}
}

func TestExportOfALongHistoryPassesFsckAndEveryRefMatchesItsChangeset(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	h := genHistory(t, s, historySize, 1)
	sn := snap(t, s)
	dir := filepath.Join(t.TempDir(), "out.git")
	res := mustExport(t, sn, dir, ExportOptions{})
	if !res.Created || res.CommitsWritten != h.count || res.CommitsReused != 0 || res.MapNote != "" {
		t.Fatalf("export: created %v, %d commits written, %d reused, note %q; want created, %d written, 0 reused",
			res.Created, res.CommitsWritten, res.CommitsReused, res.MapNote, h.count)
	}
	if h.merges < 20 {
		t.Fatalf("the history has %d merges, want at least 20", h.merges)
	}
	fsck(t, res.GitDir)
	refs, _ := sn.Refs()
	if len(res.Refs) != len(refs) {
		t.Fatalf("%d refs exported, the store has %d", len(res.Refs), len(refs))
	}
	for _, r := range res.Refs {
		if got := strings.TrimSpace(git(t, testGitEnv(t), res.GitDir, "", "rev-parse", r.GitRef)); got != r.Commit {
			t.Fatalf("git ref %s is %s, export said %s", r.GitRef, got, r.Commit)
		}
		if d := diffTrees(storeTree(t, sn, r.Changeset), gitTree(t, res.GitDir, r.Commit)); d != "" {
			t.Fatalf("ref %s: the git tree differs from changeset %s:\n%s", r.Name, r.Changeset, d)
		}
	}
	m := checkMapComplete(t, res.GitDir)
	if len(m.order) != h.count {
		t.Fatalf("mapping holds %d changesets, want %d", len(m.order), h.count)
	}
	checkCommits(t, sn, res.GitDir, m)
	// A sample of older commits' trees, beyond the refs'.
	for i := 0; i < len(m.order); i += 97 {
		id := m.order[i]
		if d := diffTrees(storeTree(t, sn, id), gitTree(t, res.GitDir, m.commits[id])); d != "" {
			t.Fatalf("changeset %s: the git tree differs:\n%s", id, d)
		}
	}
}

func TestASecondExportWritesOnlyTheNewChangeset(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	h := genHistory(t, s, 200, 2)
	dir := filepath.Join(t.TempDir(), "out.git")
	first := mustExport(t, snap(t, s), dir, ExportOptions{})
	main, _ := snap(t, s).Ref("main")
	next, err := s.Commit(core.CommitRequest{Parents: []core.ID{main}, Advance: "main", Agent: "late",
		Changes: []core.Change{{Path: "late.txt", Data: []byte("late\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	second := mustExport(t, sn, dir, ExportOptions{})
	if second.CommitsWritten != 1 || second.BlobsWritten != 1 || second.Created {
		t.Fatalf("second export wrote %d commits and %d blobs (created %v), want 1 and 1", second.CommitsWritten,
			second.BlobsWritten, second.Created)
	}
	// It built on main's old commit and pointed every other ref at
	// commits of the first export.
	if second.CommitsReused != len(second.Refs) {
		t.Fatalf("second export reused %d commits, want %d (main's parent and the other refs)", second.CommitsReused, len(second.Refs))
	}
	got, want := refCommits(second), refCommits(first)
	for ref, c := range want {
		if ref != DefaultPrefix+"main" && got[ref] != c {
			t.Fatalf("ref %s moved from %s to %s", ref, c, got[ref])
		}
	}
	if d := diffTrees(storeTree(t, sn, next), gitTree(t, second.GitDir, got[DefaultPrefix+"main"])); d != "" {
		t.Fatalf("main after the second export:\n%s", d)
	}
	count := strings.TrimSpace(git(t, testGitEnv(t), second.GitDir, "", "rev-list", "--all", "--count"))
	if count != fmt.Sprint(h.count+1) {
		t.Fatalf("the repository holds %s commits, want %d", count, h.count+1)
	}
	third := mustExport(t, snap(t, s), dir, ExportOptions{})
	if third.CommitsWritten != 0 || third.BlobsWritten != 0 {
		t.Fatalf("an export with nothing new wrote %d commits and %d blobs", third.CommitsWritten, third.BlobsWritten)
	}
	fsck(t, second.GitDir)
}

func TestExportIntoAFreshRepositoryGivesTheSameCommitIDs(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	genHistory(t, s, 300, 3)
	sn := snap(t, s)
	a := mustExport(t, sn, filepath.Join(t.TempDir(), "a.git"), ExportOptions{})
	// The second repository gets main first, then the rest: the order of
	// exports does not change the ids.
	b := filepath.Join(t.TempDir(), "b.git")
	mustExport(t, sn, b, ExportOptions{Refs: []string{"main"}})
	bres := mustExport(t, sn, b, ExportOptions{})
	ra, rb := refCommits(a), refCommits(bres)
	if len(ra) == 0 || fmt.Sprint(ra) != fmt.Sprint(rb) {
		t.Fatalf("two exports of one snapshot differ:\n%v\n%v", ra, rb)
	}
	ma, mb := loadMap(vfs.OS(), a.GitDir), loadMap(vfs.OS(), bres.GitDir)
	for id, c := range ma.commits {
		if mb.commits[id] != c {
			t.Fatalf("changeset %s: commit %s in one repository, %s in the other", id, c, mb.commits[id])
		}
	}
}

func TestAnExportSeesOneSnapshotWhileAgentsCommit(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	genHistory(t, s, 50, 4)
	sn := snap(t, s)
	want, _ := sn.Ref("main")
	done := make(chan error)
	go func() {
		tip := want
		for i := 0; i < 30; i++ {
			var err error
			tip, err = s.Commit(core.CommitRequest{Parents: []core.ID{tip}, Advance: "main",
				Changes: []core.Change{{Path: "busy", Data: fmt.Appendf(nil, "%d", i)}}})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	res := mustExport(t, sn, filepath.Join(t.TempDir(), "out.git"), ExportOptions{Refs: []string{"main"}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(res.Refs) != 1 || res.Refs[0].Changeset != want {
		t.Fatalf("exported main at %v, the snapshot had %s", res.Refs, want)
	}
	if d := diffTrees(storeTree(t, sn, want), gitTree(t, res.GitDir, res.Refs[0].Commit)); d != "" {
		t.Fatal(d)
	}
}

// TestAnInterruptedExportNeverLeavesAMappingNamingAMissingCommit stops
// exports at the two points that matter, fast-import killed mid-stream and
// a failure just before the mapping file's rename, and plants a mapping
// that names commits the repository never had: each time the mapping names
// only commits the repository holds, and the next export's result is a
// clean export's.
func TestAnInterruptedExportNeverLeavesAMappingNamingAMissingCommit(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	genHistory(t, s, 400, 5)
	sn := snap(t, s)
	clean := refCommits(mustExport(t, sn, filepath.Join(t.TempDir(), "clean.git"), ExportOptions{}))

	t.Run("fast-import killed mid-stream", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out.git")
		mustExport(t, sn, dir, ExportOptions{Refs: []string{"side/0"}}) // a mapping to keep
		testHookStreamed = func(n int, p *os.Process) {
			if n == 250 {
				p.Signal(syscall.SIGKILL)
				time.Sleep(50 * time.Millisecond)
			}
		}
		defer func() { testHookStreamed = nil }()
		if _, err := Export(sn, dir, ExportOptions{}); !errors.Is(err, ErrGitFailed) || !errors.Is(err, core.ErrIO) {
			t.Fatalf("export with fast-import killed: %v, want ErrGitFailed (core.ErrIO)", err)
		}
		testHookStreamed = nil
		checkMapComplete(t, gitDirOf(t, dir))
		if got := refCommits(mustExport(t, sn, dir, ExportOptions{})); fmt.Sprint(got) != fmt.Sprint(clean) {
			t.Fatalf("after the interrupted export:\n%v\nwant\n%v", got, clean)
		}
		fsck(t, gitDirOf(t, dir))
	})
	t.Run("failure before the mapping's rename", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out.git")
		injected := errors.New("injected before rename")
		testHookBeforeMapRename = func() error { return injected }
		defer func() { testHookBeforeMapRename = nil }()
		if _, err := Export(sn, dir, ExportOptions{}); !errors.Is(err, injected) {
			t.Fatalf("export: %v, want the injected error", err)
		}
		testHookBeforeMapRename = nil
		if _, err := os.Stat(filepath.Join(dir, mapName)); !os.IsNotExist(err) {
			t.Fatalf("the mapping file exists after a failure before its rename: %v", err)
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, mapName+".tmp-*")); len(tmps) != 0 {
			t.Fatalf("temporary mapping files left: %v", tmps)
		}
		// A process killed at that point leaves its temporary files; the
		// next export removes them.
		for _, n := range []string{mapName + ".tmp-123", marksPrefix + "456"} {
			os.WriteFile(filepath.Join(dir, n), []byte("left"), 0o644)
		}
		res := mustExport(t, sn, dir, ExportOptions{})
		if fmt.Sprint(refCommits(res)) != fmt.Sprint(clean) {
			t.Fatalf("after the failed export:\n%v\nwant\n%v", refCommits(res), clean)
		}
		checkMapComplete(t, res.GitDir)
		for _, pat := range leftoverPatterns {
			if left, _ := filepath.Glob(filepath.Join(dir, pat)); len(left) != 0 {
				t.Fatalf("leftovers after the next export: %v", left)
			}
		}
	})
	t.Run("a mapping naming commits the repository lacks", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out.git")
		mustExport(t, sn, dir, ExportOptions{})
		// Every entry now names a commit that does not exist.
		m := loadMap(vfs.OS(), dir)
		for _, id := range m.order {
			m.commits[id] = strings.Repeat("ab", 20)
		}
		if err := m.save(dir); err != nil {
			t.Fatal(err)
		}
		res := mustExport(t, sn, dir, ExportOptions{})
		if !strings.Contains(res.MapNote, "missing") || res.CommitsWritten != len(m.order) {
			t.Fatalf("export over a stale mapping: note %q, %d commits written, want a note and %d", res.MapNote,
				res.CommitsWritten, len(m.order))
		}
		if fmt.Sprint(refCommits(res)) != fmt.Sprint(clean) {
			t.Fatalf("after the stale mapping:\n%v\nwant\n%v", refCommits(res), clean)
		}
		checkMapComplete(t, res.GitDir)
	})
	t.Run("a torn or foreign mapping file", func(t *testing.T) {
		for name, content := range map[string]string{
			"torn":    mapHeader + strings.Repeat("0", 64) + " 12",
			"foreign": "swarmops-export-map 1 ident=999\n",
			"garbage": "\x00\x01\x02",
		} {
			dir := filepath.Join(t.TempDir(), name+".git")
			mustExport(t, sn, dir, ExportOptions{Refs: []string{"main"}})
			if err := os.WriteFile(filepath.Join(dir, mapName), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			res := mustExport(t, sn, dir, ExportOptions{})
			if res.MapNote == "" || fmt.Sprint(refCommits(res)) != fmt.Sprint(clean) {
				t.Fatalf("%s mapping: note %q, refs %v", name, res.MapNote, refCommits(res))
			}
			checkMapComplete(t, res.GitDir)
		}
	})
}

// gitDirOf is the git directory of the bare repository at dir.
func gitDirOf(tb testing.TB, dir string) string {
	tb.Helper()
	r, err := findRepo(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return r.gitDir
}

func TestExportRefusesWhatGitCannotHoldAndMovesNoRef(t *testing.T) {
	requireGit(t)
	cases := map[string]core.CommitRequest{
		"a .git directory":        {Changes: []core.Change{{Path: "sub/.git/config", Data: []byte("x")}}},
		"an NTFS alias of .git":   {Changes: []core.Change{{Path: "GIT~1/hooks/pre-commit", Data: []byte("x")}}},
		"a NUL in the message":    {Changes: []core.Change{{Path: "ok", Data: []byte("x")}}, Message: "a\x00b"},
		"a .GIT with a dot after": {Changes: []core.Change{{Path: ".GIT.", Data: []byte("x")}}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			s := memStore(t)
			ok, err := s.Commit(core.CommitRequest{Advance: "main", Changes: []core.Change{{Path: "fine", Data: []byte("ok")}}})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "out.git")
			first := mustExport(t, snap(t, s), dir, ExportOptions{})
			req.Parents, req.Advance = []core.ID{ok}, "main"
			if _, err := s.Commit(req); err != nil {
				t.Fatal(err)
			}
			_, err = Export(snap(t, s), dir, ExportOptions{})
			if !errors.Is(err, ErrUnrepresentable) || !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("export: %v, want ErrUnrepresentable (core.ErrInvalid)", err)
			}
			if got := strings.TrimSpace(git(t, testGitEnv(t), dir, "", "rev-parse", DefaultPrefix+"main")); got != first.Refs[0].Commit {
				t.Fatalf("main moved to %s after a refused export", got)
			}
			checkMapComplete(t, dir)
		})
	}
}

func TestExportRefusesBadPrefixesRefNamesAndDirectories(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	id, err := s.Commit(core.CommitRequest{Advance: "x.lock/y", Changes: []core.Change{{Path: "f", Data: []byte("f")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "good", New: id}); err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	dir := filepath.Join(t.TempDir(), "out.git")
	for _, p := range []string{"refs/heads/swarm", "heads/x/", "refs/a..b/", "refs/a b/"} {
		if _, err := Export(sn, dir, ExportOptions{Prefix: p}); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("prefix %q: %v, want core.ErrInvalid", p, err)
		}
	}
	if _, err := Export(sn, dir, ExportOptions{}); !errors.Is(err, ErrUnrepresentable) {
		t.Fatalf("store ref x.lock/y (a git ref may not have a component ending in .lock): %v", err)
	}
	if _, err := Export(sn, dir, ExportOptions{Refs: []string{"nosuch"}}); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("a missing ref: %v, want core.ErrNotFound", err)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Export(sn, full, ExportOptions{Refs: []string{"good"}}); !errors.Is(err, ErrNotRepository) || !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a directory with files and no repository: %v, want ErrNotRepository (core.ErrInvalid)", err)
	}
}

func TestExportWritesIntoAnExistingWorkTreesRepository(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	genHistory(t, s, 20, 6)
	wt := t.TempDir()
	env := testGitEnv(t)
	git(t, env, wt, "", "init", "-q")
	res := mustExport(t, snap(t, s), wt, ExportOptions{Refs: []string{"main"}, Prefix: "refs/swarm/"})
	if res.Created || res.GitDir != filepath.Join(evalSymlinks(t, wt), ".git") {
		t.Fatalf("export into a work tree: git dir %s (created %v)", res.GitDir, res.Created)
	}
	git(t, env, wt, "", "rev-parse", "--verify", "refs/swarm/main")

	// A linked work tree: the objects, refs and mapping are the main
	// repository's, so a second export from there writes nothing.
	git(t, env, wt, "", "commit", "-q", "--allow-empty", "-m", "base")
	linked := filepath.Join(t.TempDir(), "linked")
	git(t, env, wt, "", "worktree", "add", "-q", linked)
	again := mustExport(t, snap(t, s), linked, ExportOptions{Refs: []string{"main"}, Prefix: "refs/swarm/"})
	if again.GitDir != res.GitDir || again.CommitsWritten != 0 || again.MapNote != "" {
		t.Fatalf("export into a linked work tree: git dir %s, %d commits written, note %q; want %s, 0", again.GitDir,
			again.CommitsWritten, again.MapNote, res.GitDir)
	}
}

func evalSymlinks(tb testing.TB, p string) string {
	tb.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestIdentIsFixedAndAcceptableToGit(t *testing.T) {
	for agent, want := range map[string]string{
		"agent-7":            "agent-7 <agent-7@swarmops>",
		"":                   "anonymous <anonymous@swarmops>",
		"  ":                 "anonymous <anonymous@swarmops>",
		"Bob <bob@x>":        "Bob _bob@x_ <Bob-_bob-x_@swarmops>",
		"tab\there\nnewline": "tab_here_newline <tab_here_newline@swarmops>",
		"ağent":              "ağent <a--ent@swarmops>",
		" padded name ":      "padded name <padded-name@swarmops>",
	} {
		name, email := Ident(agent)
		if got := name + " <" + email + ">"; got != want {
			t.Errorf("Ident(%q) = %q, want %q", agent, got, want)
		}
	}
	if d := gitDate(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)); d != "0 +0000" {
		t.Errorf("a time before 1970: %q", d)
	}
	if d := gitDate(time.Unix(1700000000, 999999999)); d != "1700000000 +0000" {
		t.Errorf("nanoseconds are dropped, not rounded: %q", d)
	}
}

func TestIsDotGitFollowsGitsFsck(t *testing.T) {
	for _, n := range []string{".git", ".GIT", ".Git.", ".git  ", ".git . .", "git~1", "GIT~1", ".git::$INDEX_ALLOCATION",
		".g\u200cit", "\ufeff.git", "gi7eba~3"} {
		if !isDotGit(n) {
			t.Errorf("isDotGit(%q) = false", n)
		}
	}
	for _, n := range []string{".gitignore", ".gitmodules", "git", ".gi", "x.git", "git~2", ".git-x", "..git"} {
		if isDotGit(n) {
			t.Errorf("isDotGit(%q) = true", n)
		}
	}
}

func TestExportKeepsOddPathBytes(t *testing.T) {
	requireGit(t)
	s := memStore(t)
	names := []string{"new\nline", "tab\tname", "\"quoted\"", "back\\slash", " lead", "trail ", "ünï/cødé", "ctl\x01\x7f"}
	var ch []core.Change
	for i, n := range names {
		ch = append(ch, core.Change{Path: n, Data: fmt.Appendf(nil, "%d", i)})
	}
	ch = append(ch, core.Change{Path: "l", Data: []byte("new\nline"), Mode: objects.ModeSymlink})
	id, err := s.Commit(core.CommitRequest{Advance: "main", Changes: ch})
	if err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s)
	res := mustExport(t, sn, filepath.Join(t.TempDir(), "out.git"), ExportOptions{})
	if d := diffTrees(storeTree(t, sn, id), gitTree(t, res.GitDir, res.Refs[0].Commit)); d != "" {
		t.Fatal(d)
	}
	fsck(t, res.GitDir)
}

func TestExportIntoASHA256RepositoryWorksTheSame(t *testing.T) {
	requireGit(t)
	dir := filepath.Join(t.TempDir(), "sha256.git")
	cmd := exec.Command("git", "init", "-q", "--bare", "--object-format=sha256", dir)
	cmd.Env = testGitEnv(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("this git cannot make a SHA-256 repository: %v %s", err, out)
	}
	s := memStore(t)
	genHistory(t, s, 60, 9)
	sn := snap(t, s)
	res := mustExport(t, sn, dir, ExportOptions{})
	for _, r := range res.Refs {
		if len(r.Commit) != 64 {
			t.Fatalf("ref %s: commit id %q is not SHA-256", r.Name, r.Commit)
		}
		if d := diffTrees(storeTree(t, sn, r.Changeset), gitTree(t, res.GitDir, r.Commit)); d != "" {
			t.Fatal(d)
		}
	}
	checkMapComplete(t, res.GitDir)
	if again := mustExport(t, sn, dir, ExportOptions{}); again.CommitsWritten != 0 || again.MapNote != "" {
		t.Fatalf("second export: %d commits, note %q", again.CommitsWritten, again.MapNote)
	}
	fsck(t, res.GitDir)
}
