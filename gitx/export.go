package gitx

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// DefaultPrefix is where exported refs land unless ExportOptions.Prefix
// says otherwise: store ref REF becomes git ref DefaultPrefix+REF.
const DefaultPrefix = "refs/heads/swarm/"

// ExportOptions configure Export.
type ExportOptions struct {
	// Refs names the store refs to export, with everything they reach;
	// empty: every ref of the snapshot.
	Refs []string
	// Prefix is prepended to each store ref name to make its git ref. It
	// must start with "refs/" and end with "/"; "": DefaultPrefix.
	Prefix string
	// Progress, if set, is called after each commit written, with the
	// number written and the number to write.
	Progress func(done, total int)
	// Force sets a git ref even when it holds a commit no export wrote
	// and the new value does not contain (a commit made in git on an
	// exported branch); the commit dropped is left unreferenced (a bare
	// repository keeps no reflog to find it by).
	// Without it, such a ref fails the export with a *ForeignError and no
	// ref moves.
	Force bool
	// FS is the filesystem of the export's own files in the git
	// directory: the mapping file, its temporary files, and the fsyncs of
	// the packs fast-import wrote (nil: the OS). git itself writes the
	// real directory, so FS is the OS or a wrapper of it (faultfs counts
	// and crashes an export's calls through it).
	FS vfs.FS

	// weaken is the test-only canaries (internal/testknobs.Weaken).
	weaken testknobs.Weakening
}

func init() {
	testknobs.RegisterOptions(func(o *ExportOptions) *testknobs.Weakening { return &o.weaken })
}

// ExportedRef is one ref an export set.
type ExportedRef struct {
	Name      string  // the store ref
	GitRef    string  // the git ref set
	Changeset core.ID // the ref's value in the snapshot
	Commit    string  // the commit the git ref now names
}

// ExportResult says what an export did.
type ExportResult struct {
	// GitDir is the repository's git directory (absolute; for a linked
	// work tree, the main one's, which holds the objects and refs).
	GitDir string
	// Created says the export created the repository.
	Created bool
	Refs    []ExportedRef
	// CommitsWritten counts the changesets written as new commits;
	// BlobsWritten the blobs sent to fast-import (each distinct blob once
	// per export); CommitsReused the commits of earlier exports that this
	// one built on or pointed a ref at without writing them.
	CommitsWritten, BlobsWritten, CommitsReused int
	// MapNote says why the mapping file was not (wholly) used: ignored as
	// malformed or from another version, or entries dropped because the
	// repository lacked their commits. Empty when it was used as it was.
	MapNote string
}

// Export writes the history of the snapshot's refs into the git repository
// at dir as commits (see the package doc for the mapping), creating a bare
// repository there if dir is missing or empty, and sets git ref
// Prefix+REF to each ref's commit. Only changesets the repository's
// mapping file does not name are written. Errors: core.ErrNotFound for a
// ref the snapshot lacks; core.ErrConflict for a git ref that holds work
// the export would drop (*ForeignError) or that moved while it ran;
// core.ErrInvalid (with ErrNotRepository or
// ErrUnrepresentable) for a bad prefix or ref name, a directory that is
// not a repository, or a changeset git cannot hold; core.ErrIO (with
// ErrNoGit or ErrGitFailed) when git is missing or fails.
func Export(sn *core.Snapshot, dir string, o ExportOptions) (*ExportResult, error) {
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasPrefix(prefix, "refs/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q: want refs/.../ (starting with refs/, ending with /)", core.ErrInvalid, prefix)
	}
	refs, err := exportRefs(sn, o.Refs, prefix)
	if err != nil {
		return nil, err
	}
	r, created, err := openOrInit(dir)
	if err != nil {
		return nil, err
	}
	fsys := o.FS
	if fsys == nil {
		fsys = vfs.OS()
	}
	unlock, err := lockRepo(fsys, r.commonDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &ExportResult{GitDir: r.commonDir, Created: created}
	m := loadMap(fsys, r.commonDir)
	res.MapNote = m.note
	dirty := m.note != ""
	order, frontier, err := planExport(sn, r, m, refs, res, o.weaken&testknobs.ExportTrustsMap != 0)
	if err != nil {
		return nil, err
	}
	dirty = dirty || res.MapNote != m.note
	res.CommitsReused = len(frontier)
	before, err := packFiles(fsys, r.packDir)
	if err != nil {
		return nil, err
	}
	// The refs' values before anything is written: each moves from its
	// own, so one moved while the export runs is not overwritten.
	current, err := r.refValues(refs)
	if err != nil {
		return nil, err
	}
	if len(order) > 0 {
		st, err := r.fastImport(sn, m, order, o.Progress)
		if err != nil {
			return nil, err
		}
		res.CommitsWritten, res.BlobsWritten = st.commits, st.blobs
	}
	if res.CommitsWritten > 0 || dirty {
		if err := syncNewPacks(fsys, r.packDir, before); err != nil {
			return nil, err
		}
		if err := m.save(r.commonDir); err != nil {
			return nil, err
		}
	}
	// The refs move last, once the mapping names every commit they will
	// hold: a crash before leaves them where they were, at commits the
	// mapping still names.
	if err := r.setRefs(m, refs, current, o.Force); err != nil {
		return nil, err
	}
	for i := range refs {
		refs[i].Commit = m.commits[refs[i].Changeset]
	}
	res.Refs = refs
	return res, nil
}

// exportRefs lists the refs to export with their values and git names,
// sorted by name.
func exportRefs(sn *core.Snapshot, names []string, prefix string) ([]ExportedRef, error) {
	var out []ExportedRef
	if len(names) == 0 {
		all, err := sn.Refs()
		if err != nil {
			return nil, err
		}
		for _, e := range all {
			out = append(out, ExportedRef{Name: e.Name, Changeset: e.ID})
		}
	} else {
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			id, err := sn.Ref(n)
			if err != nil {
				return nil, err
			}
			out = append(out, ExportedRef{Name: n, Changeset: id})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	seen := make(map[string]bool, len(out))
	for i := range out {
		out[i].GitRef = prefix + out[i].Name
		if err := checkGitRef(out[i].GitRef); err != nil {
			return nil, fmt.Errorf("%w: %w: %w", core.ErrInvalid, ErrUnrepresentable, err)
		}
		seen[out[i].Name] = true
	}
	// git keeps a ref as a file named by its path, so it cannot hold both
	// agent and agent/1; the store can.
	for _, e := range out {
		for i := strings.IndexByte(e.Name, '/'); i >= 0; i = nextSlash(e.Name, i) {
			if seen[e.Name[:i]] {
				return nil, fmt.Errorf("%w: %w: refs %q and %q cannot both be git refs (one would be a directory of the other): export them apart, under different --prefix values",
					core.ErrInvalid, ErrUnrepresentable, e.Name[:i], e.Name)
			}
		}
	}
	return out, nil
}

// nextSlash is the index of the next '/' in s after index i, or -1.
func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// planExport returns the changesets to write, parents first, and the
// already exported ones they build on or refs point at (the frontier),
// after checking that the repository holds the frontier's commits. If it
// lacks any, every mapped commit is checked, the missing are dropped (a
// note in res says so), and the plan is made again; the second plan's
// frontier has then been checked already.
//
// trust is the canary testknobs.ExportTrustsMap: the frontier is not
// checked.
func planExport(sn *core.Snapshot, r *repo, m *exportMap, refs []ExportedRef, res *ExportResult, trust bool) ([]core.ID, []core.ID, error) {
	tips := make([]core.ID, len(refs))
	for i, e := range refs {
		tips[i] = e.Changeset
	}
	order, frontier, err := walk(sn, tips, m.commits)
	if err != nil || len(frontier) == 0 || trust {
		return order, frontier, err
	}
	shas := make([]string, len(frontier))
	for i, id := range frontier {
		shas[i] = m.commits[id]
	}
	missing, err := r.missingCommits(shas)
	if err != nil || len(missing) == 0 {
		return order, frontier, err
	}
	all := make([]string, len(m.order))
	for i, id := range m.order {
		all[i] = m.commits[id]
	}
	if missing, err = r.missingCommits(all); err != nil {
		return nil, nil, err
	}
	m.drop(missing)
	note := fmt.Sprintf("%d mapped commits missing from the repository, written again", len(missing))
	if res.MapNote != "" {
		note = res.MapNote + "; " + note
	}
	res.MapNote = note
	return walk(sn, tips, m.commits)
}

// walk returns the changesets reachable from tips that mapped lacks, in
// topological order (every parent before its children), and the mapped
// changesets the walk met (tips, or parents of what it returns), sorted.
// It walks every parent, not only first parents, and never past a mapped
// changeset: a commit present implies its ancestors are.
func walk(sn *core.Snapshot, tips []core.ID, mapped map[core.ID]string) (order, frontier []core.ID, err error) {
	type frame struct {
		id      core.ID
		parents []core.ID
		next    int
	}
	seen := map[core.ID]bool{}
	front := map[core.ID]bool{}
	// visit reports whether id still has to be walked, marking it seen.
	visit := func(id core.ID) bool {
		if _, ok := mapped[id]; ok {
			front[id] = true
			return false
		}
		if seen[id] {
			return false
		}
		seen[id] = true
		return true
	}
	var stack []frame
	push := func(id core.ID) error {
		cs, err := sn.Changeset(id)
		if err != nil {
			return fmt.Errorf("export: changeset %s: %w", id, err)
		}
		stack = append(stack, frame{id: id, parents: cs.Parents})
		return nil
	}
	for _, tip := range tips {
		if !visit(tip) {
			continue
		}
		if err := push(tip); err != nil {
			return nil, nil, err
		}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(top.parents) {
				order = append(order, top.id)
				stack = stack[:len(stack)-1]
				continue
			}
			p := top.parents[top.next]
			top.next++
			if visit(p) {
				if err := push(p); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for id := range front {
		frontier = append(frontier, id)
	}
	sort.Slice(frontier, func(i, j int) bool { return frontier[i].String() < frontier[j].String() })
	return order, frontier, nil
}

// testHookStreamed, when set by a test, runs after each commit is handed
// to fast-import, with the number handed so far and fast-import's process:
// a test kills it there to show what an interrupted export leaves.
var testHookStreamed func(commits int, p *os.Process)

// fastImport runs git fast-import on the stream of order, which writes
// the commits on the scratch ref, then records the new commits in m.
func (r *repo) fastImport(sn *core.Snapshot, m *exportMap, order []core.ID,
	progress func(done, total int)) (*streamer, error) {
	marks, err := os.CreateTemp(r.commonDir, marksPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("%w: marks file: %w", core.ErrIO, err)
	}
	marksName := marks.Name()
	marks.Close()
	defer os.Remove(marksName)
	args := []string{"-c", "fastimport.unpackLimit=0", "fast-import", "--quiet", "--done", "--force",
		"--export-marks=" + marksName}
	cmd, err := r.command(args...)
	if err != nil {
		return nil, err
	}
	st := newStreamer(sn, m)
	st.branch = scratchRef
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, gitFailed(args, err, "")
	}
	var errOut bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: stderrLimit, b: &errOut}
	if err := cmd.Start(); err != nil {
		return nil, gitFailed(args, err, "")
	}
	st.out(in)
	werr := st.writeAll(order, func(done int) {
		if testHookStreamed != nil {
			testHookStreamed(done, cmd.Process)
		}
		if progress != nil {
			progress(done, len(order))
		}
	})
	if werr == nil {
		werr = st.flush()
	}
	if werr != nil && !errors.Is(werr, errPipe) {
		// The store refused or failed a read: fast-import sees the
		// stream end without "done" and exits without moving a ref.
		in.Close()
		cmd.Wait()
		return nil, werr
	}
	if err := closeAndWait(cmd, in, &errOut, args); err != nil {
		// fast-import's own message says more than a broken pipe.
		return nil, err
	}
	if werr != nil {
		return nil, gitFailed(args, werr, errOut.String())
	}
	if err := st.readMarks(marksName); err != nil {
		return nil, err
	}
	return st, nil
}
