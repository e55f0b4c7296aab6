package gitx

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// ImportOptions configure Import.
type ImportOptions struct {
	// Rev is the git revision to import (a branch, tag, commit id, HEAD,
	// ...). It may not start with '-'.
	Rev string
	// As is the store ref to move; "": the branch Rev names (refs/heads/X
	// gives X, HEAD its branch). A Rev that names no branch needs As.
	As string
	// History imports every ancestor of Rev, each commit as a changeset
	// with its parents; without it Rev's tree becomes one changeset
	// without parents.
	History bool
	// CheckRef, if set, checks the store ref's name before anything is
	// imported (the store checks it again when it moves the ref).
	CheckRef func(name string) error
	// Progress, if set, is called after each changeset committed, with the
	// number committed and the number to commit.
	Progress func(done, total int)
	// Agent is the agent the ref's move records in the operation log
	// (operation import); the changesets keep their git authors.
	Agent string
	// Force moves an existing ref even when the import does not contain
	// its value (the ref's own history would leave it). Without it such
	// an import is a *NotFastForwardError and the ref stays.
	Force bool
}

// ImportResult says what an import did.
type ImportResult struct {
	GitDir    string
	GitCommit string // the commit Rev resolved to
	Ref       string // the store ref moved
	// Old is the ref's value when the import started (zero: it did not
	// exist), New the changeset imported from GitCommit. Moved says the
	// ref was set; it is false when it already held New.
	Old, New core.ID
	Moved    bool
	// Changesets counts the commits imported as new changesets; Reused
	// the commits an export wrote (the mapping file names them), taken
	// back as the changesets they came from.
	Changesets, Reused int
	// Skipped lists, sorted, the paths of submodules (gitlinks) left out.
	Skipped []string
	// MapNote says why the imported commits were not recorded in the
	// repository's mapping file (see recordImported); empty when they
	// were.
	MapNote string
}

// gitlinkMode is a submodule entry's mode.
const gitlinkMode = "160000"

// Import brings git revision o.Rev of the repository at dir into the store
// (see the package doc) and moves the store ref by compare-and-swap from
// the value it had when the import started. Errors: core.ErrNotFound (with
// ErrNotRepository) when dir is not a repository or the revision does not
// exist; core.ErrInvalid for a bad revision, a revision that names no
// branch without As, or (with ErrUnrepresentable) a path, mode or header
// the store cannot hold; *core.ConflictError when the ref moved during the
// import, and *NotFastForwardError (core.ErrConflict) when the imported
// changeset does not contain the ref's value (in both, the changesets are
// in the store and the ref is left alone); and the store's and git's
// errors.
func Import(s *core.Store, dir string, o ImportOptions) (*ImportResult, error) {
	if o.Rev == "" || strings.HasPrefix(o.Rev, "-") || strings.ContainsAny(o.Rev, "\x00\n") {
		return nil, fmt.Errorf("%w: git revision %q: empty, starting with '-', or holding a NUL or newline", core.ErrInvalid, o.Rev)
	}
	r, err := findRepo(dir)
	if err != nil {
		return nil, err
	}
	res := &ImportResult{GitDir: r.gitDir}
	if res.GitCommit, res.Ref, err = r.resolve(o.Rev, o.As); err != nil {
		return nil, err
	}
	if o.CheckRef != nil {
		if err := o.CheckRef(res.Ref); err != nil {
			return nil, err
		}
	}
	sn, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	if res.Old, err = sn.Ref(res.Ref); err != nil && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	commits := [][]string{{res.GitCommit}}
	if o.History {
		if commits, err = r.revList(res.GitCommit); err != nil {
			return nil, err
		}
	}
	im := &importer{r: r, s: s, ids: map[string]core.ID{}, skipped: map[string]bool{}}
	if commits, err = im.known(sn, commits); err != nil {
		return nil, err
	}
	res.Reused = len(im.ids)
	if im.cat, err = r.startCatFile(); err != nil {
		return nil, err
	}
	defer im.cat.close()
	for i, c := range commits {
		if i%diffBatch == 0 {
			if err := im.diffAhead(commits[i:min(i+diffBatch, len(commits))]); err != nil {
				return nil, err
			}
		}
		if _, err = im.commit(c[0], c[1:]); err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress(i+1, len(commits))
		}
	}
	res.Changesets, res.New = len(commits), im.ids[res.GitCommit]
	for p := range im.skipped {
		res.Skipped = append(res.Skipped, p)
	}
	sort.Strings(res.Skipped)
	if err := r.recordImported(im.ids); err != nil {
		res.MapNote = "imported commits not recorded for export: " + err.Error()
	}
	if res.Old == res.New {
		return res, nil
	}
	if err := fastForward(s, res, o.Force); err != nil {
		return nil, err
	}
	if err := s.UpdateRefsAs(core.Origin{Agent: o.Agent, Op: core.OpImport}, core.RefUpdate{Name: res.Ref, Old: res.Old, New: res.New}); err != nil {
		return nil, fmt.Errorf("%s is imported as changeset %s, but ref %q was not moved: %w",
			res.GitCommit, res.New, res.Ref, err)
	}
	res.Moved = true
	return res, nil
}

// known takes out of commits those an export wrote from changesets the
// store still holds (the repository's mapping file names them), recording
// each as that changeset, so store to git to store keeps the ids. It
// returns the commits left to import. Exports write every ancestor of what they write, so what is
// left never has a parent that is neither taken out nor imported before it.
func (im *importer) known(sn *core.Snapshot, commits [][]string) ([][]string, error) {
	m := loadMap(vfs.OS(), im.r.commonDir)
	back := make(map[string]core.ID, len(m.commits))
	for _, cs := range m.order {
		if _, ok := back[m.commits[cs]]; !ok {
			_, err := sn.Changeset(cs)
			switch {
			case err == nil:
				back[m.commits[cs]] = cs
			case !errors.Is(err, core.ErrNotFound):
				return nil, err
			}
		}
	}
	left := commits[:0:0]
	for _, c := range commits {
		if cs, ok := back[c[0]]; ok {
			im.ids[c[0]] = cs
			continue
		}
		left = append(left, c)
	}
	return left, nil
}

// fastForward refuses, unless force, an import that would move an
// existing ref to a changeset that does not contain its value: the ref's
// own work (agents' lands, say) would leave its history.
func fastForward(s *core.Store, res *ImportResult, force bool) error {
	if force || res.Old.IsZero() {
		return nil
	}
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	base, err := sn.MergeBase(res.Old, res.New)
	if err != nil {
		return err
	}
	if base == res.Old {
		return nil
	}
	return &NotFastForwardError{Ref: res.Ref, Current: res.Old, New: res.New, GitCommit: res.GitCommit}
}

// NotFastForwardError is an import refused because the store ref holds
// Current, which the imported changeset New (from GitCommit) does not
// contain. It matches core.ErrConflict; the changesets stay in the store.
type NotFastForwardError struct {
	Ref          string
	Current, New core.ID
	GitCommit    string
}

func (e *NotFastForwardError) Error() string {
	return fmt.Sprintf("ref %q holds %s, which git commit %.12s (changeset %s) does not contain: moving it would drop that work",
		e.Ref, e.Current.String()[:12], e.GitCommit, e.New.String()[:12])
}

func (e *NotFastForwardError) Is(target error) bool { return target == core.ErrConflict }

// recordImported adds each imported changeset to the repository's mapping
// file as the git commit it came from, unless an export mapped it already:
// an export into this repository then builds on the commits imported
// rather than writing them again, so a branch the swarm started from and
// the exported one share their history (git merges one into the other).
// It is an optimisation of what export writes, like the file itself; the
// caller reports a failure without failing the import.
func (r *repo) recordImported(ids map[string]core.ID) error {
	fsys := vfs.OS()
	unlock, err := lockRepo(fsys, r.commonDir)
	if err != nil {
		return err
	}
	defer unlock()
	m := loadMap(fsys, r.commonDir)
	shas := make([]string, 0, len(ids))
	for sha := range ids {
		shas = append(shas, sha)
	}
	sort.Strings(shas)
	added := false
	for _, sha := range shas {
		if _, ok := m.commits[ids[sha]]; !ok {
			m.add(ids[sha], sha)
			added = true
		}
	}
	if !added && m.note == "" {
		return nil
	}
	return m.save(r.commonDir)
}

// resolve returns the commit rev names and the store ref to move: as, or
// the branch rev names.
func (r *repo) resolve(rev, as string) (sha, ref string, err error) {
	out, err := r.run(nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%w: git revision %q is not a commit in %s", core.ErrNotFound, rev, r.gitDir)
	}
	sha = strings.TrimSpace(string(out))
	if as != "" {
		return sha, as, nil
	}
	out, err = r.run(nil, "rev-parse", "--verify", "--quiet", "--symbolic-full-name", rev)
	full := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(full, "refs/heads/") {
		return "", "", fmt.Errorf("%w: git revision %q names no branch: give the store ref to move with --as", core.ErrInvalid, rev)
	}
	return sha, strings.TrimPrefix(full, "refs/heads/"), nil
}

// revList returns every ancestor of sha, itself included, parents first,
// each as its id followed by its parents' ids.
func (r *repo) revList(sha string) ([][]string, error) {
	out, err := r.run(nil, "rev-list", "--topo-order", "--reverse", "--parents", sha)
	if err != nil {
		return nil, err
	}
	var list [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		list = append(list, strings.Fields(line))
	}
	return list, nil
}

// importer turns git commits into changesets.
type importer struct {
	r       *repo
	s       *core.Store
	cat     *catFile
	ids     map[string]core.ID // git commit -> changeset imported
	skipped map[string]bool
	// diffs holds, for the next commits to import, their diff-tree
	// records against their first parent (diffAhead).
	diffs map[string][]string
}

// diffBatch is how many commits one `git diff-tree --stdin` diffs: one
// process per commit cost about 25 ms each (most of an import of a long
// history of small commits), and a batch bounds the records held.
const diffBatch = 512

// diffAhead asks one `git diff-tree --stdin` for the changes of every
// commit of batch that has parents, against its first parent, and keeps
// each commit's records for diffChanges.
func (im *importer) diffAhead(batch [][]string) error {
	var in bytes.Buffer
	var want []string
	for _, c := range batch {
		if len(c) > 1 {
			fmt.Fprintf(&in, "%s %s\n", c[0], c[1])
			want = append(want, c[0])
		}
	}
	if len(want) == 0 {
		return nil
	}
	out, err := im.r.run(in.Bytes(), "diff-tree", "--stdin", "--always", "-r", "-z", "--no-renames", "--no-ext-diff")
	if err != nil {
		return err
	}
	im.diffs = make(map[string][]string, len(want))
	toks := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	n := -1
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !strings.HasPrefix(t, ":") {
			// A commit's header: the commits come in the order asked.
			if n++; n >= len(want) || strings.TrimSpace(t) != want[n] {
				return fmt.Errorf("%w: %w: git diff-tree --stdin: header %q, want commit %d of %d", core.ErrIO, ErrGitFailed, t, n+1, len(want))
			}
			im.diffs[want[n]] = []string{}
			continue
		}
		if n < 0 || i+1 >= len(toks) {
			return fmt.Errorf("%w: %w: git diff-tree --stdin: record %q without a commit or a path", core.ErrIO, ErrGitFailed, t)
		}
		im.diffs[want[n]] = append(im.diffs[want[n]], t, toks[i+1])
		i++
	}
	if n != len(want)-1 {
		return fmt.Errorf("%w: %w: git diff-tree --stdin: %d commits answered of %d", core.ErrIO, ErrGitFailed, n+1, len(want))
	}
	return nil
}

// commit imports git commit sha with the given parents (already imported;
// none: sha's whole tree, as a changeset without parents).
func (im *importer) commit(sha string, parents []string) (core.ID, error) {
	raw, err := im.cat.read(sha, "commit")
	if err != nil {
		return core.ID{}, err
	}
	c, err := parseCommit(sha, raw)
	if err != nil {
		return core.ID{}, err
	}
	var ps []core.ID
	seen := map[core.ID]bool{}
	for _, p := range parents {
		id, ok := im.ids[p]
		if !ok {
			return core.ID{}, fmt.Errorf("%w: git commit %s: parent %s was not imported before it", core.ErrIO, sha, p)
		}
		if !seen[id] {
			seen[id] = true
			ps = append(ps, id)
		}
	}
	var changes []core.Change
	if len(parents) == 0 {
		changes, err = im.treeChanges(sha)
	} else {
		changes, err = im.diffChanges(parents[0], sha)
	}
	if err != nil {
		return core.ID{}, err
	}
	id, err := im.s.Commit(core.CommitRequest{Parents: ps, Changes: changes, Agent: c.author,
		Message: c.message, Time: c.time})
	if err != nil {
		return core.ID{}, fmt.Errorf("import: git commit %s: %w", sha, err)
	}
	im.ids[sha] = id
	return id, nil
}

// gitCommit is what a changeset takes from a git commit.
type gitCommit struct {
	author  string
	time    time.Time
	message string
}

// parseCommit reads the author and message of a raw commit object.
func parseCommit(sha string, raw []byte) (*gitCommit, error) {
	head, msg, _ := bytes.Cut(raw, []byte("\n\n"))
	c := &gitCommit{message: string(msg)}
	for _, line := range strings.Split(string(head), "\n") {
		rest, ok := strings.CutPrefix(line, "author ")
		if !ok {
			continue
		}
		lt := strings.IndexByte(rest, '<')
		gt := strings.LastIndexByte(rest, '>')
		f := strings.Fields(rest[max(gt+1, 0):])
		if lt < 0 || gt < lt || len(f) < 1 {
			return nil, fmt.Errorf("%w: %w: git commit %s: malformed author %q", core.ErrInvalid, ErrUnrepresentable, sha, rest)
		}
		sec, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %w: git commit %s: author time %q", core.ErrInvalid, ErrUnrepresentable, sha, f[0])
		}
		c.author = strings.TrimSpace(rest[:lt])
		c.time = time.Unix(sec, 0).UTC()
		return c, nil
	}
	return nil, fmt.Errorf("%w: %w: git commit %s has no author", core.ErrInvalid, ErrUnrepresentable, sha)
}

// treeChanges lists every file of commit sha's tree as a put.
func (im *importer) treeChanges(sha string) ([]core.Change, error) {
	out, err := im.r.run(nil, "ls-tree", "-r", "-z", "--full-tree", sha)
	if err != nil {
		return nil, err
	}
	var changes []core.Change
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		meta, path, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("%w: %w: git ls-tree: unexpected record %q", core.ErrIO, ErrGitFailed, rec)
		}
		c, keep, err := im.put(sha, path, f[0], f[2])
		if err != nil {
			return nil, err
		}
		if keep {
			changes = append(changes, c)
		}
	}
	return changes, nil
}

// diffChanges lists what commit sha changes against its first parent,
// deletions first.
func (im *importer) diffChanges(parent, sha string) ([]core.Change, error) {
	recs, ok := im.diffs[sha]
	delete(im.diffs, sha)
	if !ok {
		out, err := im.r.run(nil, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", parent, sha)
		if err != nil {
			return nil, err
		}
		recs = strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	}
	var dels, puts []core.Change
	for i := 0; i+1 < len(recs); i += 2 {
		f := strings.Fields(strings.TrimPrefix(recs[i], ":"))
		path := recs[i+1]
		if len(f) != 5 {
			return nil, fmt.Errorf("%w: %w: git diff-tree: unexpected record %q", core.ErrIO, ErrGitFailed, recs[i])
		}
		oldMode, newMode, newSha, status := f[0], f[1], f[3], f[4]
		if status == "D" || newMode == gitlinkMode {
			if newMode == gitlinkMode {
				im.skipped[path] = true
			}
			if oldMode != gitlinkMode && oldMode != "000000" {
				dels = append(dels, core.Change{Path: path, Delete: true})
			}
			continue
		}
		c, keep, err := im.put(sha, path, newMode, newSha)
		if err != nil {
			return nil, err
		}
		if keep {
			puts = append(puts, c)
		}
	}
	// Deletions first: a directory whose files are all deleted may then
	// become a file.
	return append(dels, puts...), nil
}

// put makes the change that sets path to blob bsha with git mode mode,
// reading each blob once per commit; keep is false for a submodule, which
// is skipped and remembered.
func (im *importer) put(commit, path, mode, bsha string) (c core.Change, keep bool, err error) {
	var m objects.Mode
	switch mode {
	case "100644":
		m = objects.ModeFile
	case "100755":
		m = objects.ModeExec
	case "120000":
		m = objects.ModeSymlink
	case gitlinkMode:
		im.skipped[path] = true
		return c, false, nil
	default:
		return c, false, fmt.Errorf("%w: %w: git commit %s: path %q has mode %s", core.ErrInvalid, ErrUnrepresentable, commit, path, mode)
	}
	if err := worktree.ValidatePath(path); err != nil {
		return c, false, fmt.Errorf("%w: %w: git commit %s: %w", core.ErrInvalid, ErrUnrepresentable, commit, err)
	}
	// The commit reads the content when it needs it, and holds it only
	// until its chunk is written: a whole tree is never in memory.
	open := func() ([]byte, error) { return im.cat.read(bsha, "blob") }
	return core.Change{Path: path, Mode: m, Open: open}, true, nil
}
