package crashsweep

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/gitx"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// The export part crashes `gitx.Export` (swarmops export) at every call it
// makes to its own files in the git directory: the mapping file's load,
// its temporary file, write, sync and rename, and the fsyncs of the packs
// fast-import wrote. git itself runs uncrashed, on a real repository in a
// temporary directory (the process-crash model on the real filesystem:
// what git wrote stays). The store is a memory filesystem the export only
// reads. The repository starts with an earlier export whose mapping file
// names one commit the repository lacks (what a power loss that kept the
// file and lost a pack leaves). After each crash:
//
//   - the mapping file names no commit the repository lacks, besides the
//     one it named before the export;
//   - the export run again, uncrashed, completes, and sets every ref to
//     the commit the uncrashed export sets (the mapping is fixed, so equal
//     ids mean equal trees and histories);
//   - `git fsck --strict` is clean.
//
// Without git on PATH the part is skipped (its report says so).

// exportBogus is the commit the starting mapping file names and the
// repository lacks.
var exportBogus = strings.Repeat("ab", 20)

func exportPart(_ context.Context, pc *partRun) error {
	git, err := exec.LookPath("git")
	if err != nil {
		pc.rep.Skipped = "git is not on PATH"
		return nil
	}
	sn, closeStore, err := exportStore()
	if err != nil {
		return fmt.Errorf("export part setup: %w", err)
	}
	defer closeStore()
	tmp, err := os.MkdirTemp("", "crashsweep-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	base := filepath.Join(tmp, "base.git")
	if err := exportBase(sn, base); err != nil {
		return fmt.Errorf("export part setup: %w", err)
	}
	before, err := os.ReadFile(filepath.Join(base, "swarmops-export.map"))
	if err != nil {
		return err
	}
	opts := func(fsys vfs.FS) gitx.ExportOptions {
		o := gitx.ExportOptions{FS: fsys}
		testknobs.Weaken(&o, pc.cfg.Weaken)
		return o
	}
	const name = "export"
	done := filepath.Join(tmp, "done.git")
	if err := CopyTree(base, done); err != nil {
		return err
	}
	ref, err := gitx.Export(sn, done, opts(nil))
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n") // git's crash report path follows
		return pc.violation("export", name, 0, "process", "the export failed: %s", first)
	}
	want := exportedCommits(ref)
	n := 0
	return pc.eachPoint(func(at int64) (bool, error) {
		n++
		work := filepath.Join(tmp, fmt.Sprintf("point-%d.git", n))
		if err := CopyTree(base, work); err != nil {
			return false, err
		}
		defer os.RemoveAll(work)
		_, err := gitx.Export(sn, work, opts(faultfs.NewCrashing(vfs.OS(), at)))
		if err == nil {
			return true, nil
		}
		pc.rep.Points++
		pc.rep.States++
		msg := ""
		if !isCrashed(err) {
			msg = fmt.Sprintf("failed with %v, not with the crash", err)
		} else {
			msg = exportOracle(git, work, string(before), func() (*gitx.ExportResult, error) { return gitx.Export(sn, work, opts(nil)) }, want)
		}
		if msg != "" {
			return false, pc.violation("export", name, at, "process", "%s", msg)
		}
		return false, nil
	})
}

// exportStore makes the store the part exports: main with three commits
// (files added, changed, deleted, a directory, a link), a branch, and the
// ref old at main's first commit.
func exportStore() (*core.Snapshot, func(), error) {
	m := faultfs.NewMem()
	clock := time.Unix(1_700_000_000, 0)
	s, err := core.Create("/e", core.Options{FS: m, InlineCheckpoint: true, Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		return nil, nil, err
	}
	steps := []core.CommitRequest{
		{Changes: []core.Change{put("README", "export\n"), put("src/a.go", "package a\n"), put("gone", "g\n")}, Advance: "main", Agent: "agent-1", Message: "first"},
		{Changes: []core.Change{put("src/a.go", "package a // two\n"), del("gone"), link("l", "README")}, Advance: "main", Agent: "agent-2", Message: "second"},
		{Changes: []core.Change{put("src/b/c.txt", strings.Repeat("c", 5000))}, Advance: "main", Agent: "agent-1", Message: "third"},
	}
	var first core.ID
	for i, req := range steps {
		sn, err := s.Snapshot()
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		if head, err := sn.Ref("main"); err == nil {
			req.Parents = []core.ID{head}
		}
		id, err := s.Commit(req)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		if i == 0 {
			first = id
		}
	}
	feature, err := s.Commit(core.CommitRequest{Parents: []core.ID{first}, Changes: []core.Change{put("feature.txt", "f\n")}})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	if err := s.UpdateRefs(core.RefUpdate{Name: "old", New: first}, core.RefUpdate{Name: "feature", New: feature}); err != nil {
		s.Close()
		return nil, nil, err
	}
	sn, err := s.Snapshot()
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return sn, func() { s.Close() }, nil
}

// exportBase makes the starting repository: an export of old, whose
// mapping file is then made to name exportBogus for old's changeset.
func exportBase(sn *core.Snapshot, dir string) error {
	res, err := gitx.Export(sn, dir, gitx.ExportOptions{Refs: []string{"old"}})
	if err != nil {
		return err
	}
	p := filepath.Join(dir, "swarmops-export.map")
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	data = bytes.ReplaceAll(data, []byte(res.Refs[0].Commit), []byte(exportBogus))
	return os.WriteFile(p, data, 0o644)
}

// exportedCommits maps each git ref an export set to its commit.
func exportedCommits(res *gitx.ExportResult) map[string]string {
	out := map[string]string{}
	for _, r := range res.Refs {
		out[r.GitRef] = r.Commit
	}
	return out
}

// exportOracle checks the repository at dir a crashed export left, runs
// the export again and checks the result; it returns what is wrong.
func exportOracle(git, dir, before string, again func() (*gitx.ExportResult, error), want map[string]string) string {
	data, err := os.ReadFile(filepath.Join(dir, "swarmops-export.map"))
	if err != nil {
		return "the mapping file: " + err.Error()
	}
	var shas []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		if line == "" || strings.Contains(before, line+"\n") {
			continue
		}
		if _, sha, ok := strings.Cut(line, " "); ok {
			shas = append(shas, sha)
		}
	}
	if len(shas) > 0 {
		cmd := exec.Command(git, "--git-dir="+dir, "cat-file", "--batch-check")
		cmd.Stdin = strings.NewReader(strings.Join(shas, "\n") + "\n")
		out, err := cmd.Output()
		if err != nil {
			return "git cat-file --batch-check: " + err.Error()
		}
		if bytes.Contains(out, []byte("missing")) {
			return fmt.Sprintf("the mapping file names a commit the repository lacks: %s", bytes.TrimSpace(out))
		}
	}
	res, err := again()
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return "the export run again failed: " + first
	}
	got := exportedCommits(res)
	var diffs []string
	for ref, c := range want {
		if got[ref] != c {
			diffs = append(diffs, fmt.Sprintf("%s: %s, want %s", ref, got[ref], c))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return "the export run again set other commits: " + strings.Join(diffs, "; ")
	}
	if out, err := exec.Command(git, "--git-dir="+dir, "fsck", "--strict").CombinedOutput(); err != nil {
		return fmt.Sprintf("git fsck --strict after the export run again: %v: %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// CopyTree copies a directory of regular files and directories on the
// real filesystem (a store, a work tree, a git repository), leaving out
// links and special files.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(t, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(t, b, 0o644)
	})
}
