package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/worktree"
)

// commitFlags are the flags of one `swarmops commit`.
type commitFlags struct {
	listFile, dir, agent, msg, advance string
	parents                            []string
	allowEmpty, root, create           bool
	// advanceParent: without --parent, --advance REF's value is the first
	// parent (not for a work tree, whose parent is its base).
	advanceParent bool
	// carried: the second parent is what a work tree's update carried
	// along, whose work the tree already holds (commitTree).
	carried bool
}

// commitCmd is `swarmops commit`: record a changeset from a change list or a
// work tree.
func (a *app) commitCmd() *cobra.Command {
	c := commitFlags{advanceParent: true}
	cmd := &cobra.Command{
		Use:   "commit [-F FILE | --dir DIR] [--parent REV]... [--advance REF [--create]] [--agent NAME] [-m MSG]",
		Short: "Record a changeset from a change list or a work tree; prints its id",
		Long: `Record a changeset. The changes come from a change list (-F FILE, "-" for
stdin; the format is in docs/cli.md) or from a directory (--dir DIR; without
either, the work tree around the current directory).

A work tree (made by checkout) records its own changes against its base:
only files whose stat data changed are read, the parent is the base, and
the work tree's base moves to the new changeset. A --parent other than the
base is refused (E_STALE): update the tree first (swarmops update), or
give the base first and the other revision second to merge it in. A
plain directory is
diffed against the first parent and becomes a work tree of the new
changeset; its parent is --parent, or the existing ref --advance names,
and with neither it is a first changeset, which needs --root or an
--advance of a ref that does not exist yet.

A second --parent records a merge: the changes are merged with that
parent's work (by lines, as land merges), so a file the changes leave
alone never undoes it; conflicts are E_CONFLICT with the hunks.

--advance REF moves REF to the new changeset: in the same journal frame
when REF is at the first parent (compare-and-swap against it), or, when
REF is an ancestor of a parent (a fast-forward), by a separate
compare-and-swap from REF's value after the commit. A REF holding work no
parent has is E_CONFLICT, with a hint. Without --parent or a work tree,
the first parent is REF's current value. --create creates REF when it does
not exist yet. A commit that changes nothing is refused (E_EMPTY) unless
--allow-empty.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := c.check(); err != nil {
				return err
			}
			var err error
			if c.agent, err = a.agentFlag(cmd, c.agent); err != nil {
				return err
			}
			// The change list is read and checked before the store is
			// opened: a bad list writes nothing and needs no store.
			var changes []core.Change
			if c.listFile != "" {
				var err error
				if changes, err = a.readChangeList(c.listFile); err != nil {
					return err
				}
			} else if c.dir == "" {
				root, err := worktree.FindRoot(nil, a.path("."))
				if err != nil {
					return usageHint(nil, nil, "commit: give -F FILE or --dir DIR, or run it inside a work tree")
				}
				c.dir = root
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				if c.dir != "" {
					return a.commitDir(s, sn, c)
				}
				return a.commit(s, sn, c, changes)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&c.listFile, "changes", "F", "", "change list file (\"-\" = stdin)")
	f.StringVar(&c.dir, "dir", "", "record this directory (a work tree, or a plain directory diffed against the first parent)")
	f.StringArrayVar(&c.parents, "parent", nil, "parent revision (repeatable; the first is the diff base)")
	f.StringVar(&c.agent, "agent", "", "agent name recorded in the changeset and its ref move (default: $"+agentEnv+")")
	f.StringVarP(&c.msg, "message", "m", "", "message")
	f.StringVar(&c.advance, "advance", "", "move this ref to the new changeset (from the first parent, or fast-forward)")
	f.BoolVar(&c.create, "create", false, "with --advance: create the ref if it does not exist")
	f.BoolVar(&c.allowEmpty, "allow-empty", false, "record a changeset even if it changes nothing")
	f.BoolVar(&c.root, "root", false, "allow a changeset without parents from a plain directory")
	return cmd
}

// check refuses flags that can never make a commit, before anything is read.
func (c commitFlags) check() error {
	if c.listFile != "" && c.dir != "" {
		return usagef("commit: give one of -F/--changes FILE and --dir DIR, not both")
	}
	for _, p := range c.parents {
		if err := checkRev(p); err != nil {
			return usagef("--parent: %w", err)
		}
	}
	if c.advance != "" {
		if err := checkRefName(c.advance); err != nil {
			return usagef("--advance: %w", err)
		}
	}
	if c.create && c.advance == "" {
		return usagef("commit: --create goes with --advance REF")
	}
	if c.root && len(c.parents) > 0 {
		return usagef("commit: --root makes a changeset without parents; it cannot go with --parent")
	}
	return nil
}

// readChangeList reads, parses and loads a change list ("-" is stdin).
func (a *app) readChangeList(name string) ([]core.Change, error) {
	var src []byte
	var err error
	if name == "-" {
		src, err = io.ReadAll(a.stdin)
	} else {
		src, err = os.ReadFile(a.path(name))
	}
	if err != nil {
		return nil, usagef("change list: %w", err)
	}
	parsed, err := parseChanges(name, src)
	if err != nil {
		return nil, usagef("%w", err)
	}
	return loadChanges(name, parsed, func(p string) ([]byte, error) { return os.ReadFile(a.path(p)) })
}

// parentsOf resolves --parent, or without it --advance REF's value (none
// when REF does not exist yet).
func parentsOf(sn *core.Snapshot, c commitFlags) ([]core.ID, error) {
	var ps []core.ID
	for _, p := range c.parents {
		id, err := resolve(sn, p)
		if err != nil {
			return nil, err
		}
		ps = append(ps, id)
	}
	if len(ps) == 0 && c.advance != "" && c.advanceParent {
		id, err := sn.Ref(c.advance)
		switch {
		case err == nil:
			ps = append(ps, id)
		case !errors.Is(err, core.ErrNotFound):
			return nil, err
		}
	}
	return ps, nil
}

// commit records a change list on the resolved parents.
func (a *app) commit(s *core.Store, sn *core.Snapshot, c commitFlags, changes []core.Change) error {
	ps, err := parentsOf(sn, c)
	if err != nil {
		return err
	}
	id, n, err := a.commitChanges(s, sn, c, ps, changes)
	if err != nil {
		return err
	}
	a.committed(id, ps, n, c, nil)
	return nil
}

// mergeParents returns the changes a commit on parents ps records: with
// one parent (or none), changes as they are; with two, changes made on the
// first parent merged with the second (core's Snapshot.MergeChanges), so
// that the commit's tree holds the second parent's work and a file the
// author left alone never undoes it. A commit listing a parent whose
// changes are not in its tree would make a later land of it revert them.
func mergeParents(sn *core.Snapshot, ps []core.ID, changes []core.Change) ([]core.Change, error) {
	switch {
	case len(ps) < 2:
		return changes, nil
	case len(ps) > 2:
		return nil, usagef("commit: at most two parents (%d given): a commit's second parent is merged into its tree", len(ps))
	}
	merged, err := sn.MergeChanges(ps[0], ps[1], changes)
	if err != nil {
		var mce *core.MergeConflictError
		if errors.As(err, &mce) {
			return nil, &cliError{kind: kindConflict, err: err,
				extra: map[string]any{"paths": mce.Paths, "hunks": conflictHunks(mce)},
				msg:   fmt.Sprintf("commit: merging the second parent %s conflicts in %s", short(ps[1]), strings.Join(mce.Paths, ", ")),
				hint:  "put the resolved content of those paths in the commit's changes (or the work tree) and commit again"}
		}
		return nil, fmt.Errorf("commit: merge the second parent %s: %w", short(ps[1]), err)
	}
	return merged, nil
}

// commitChanges commits changes on parents ps (a second parent's work
// merged in, see mergeParents), creating --advance's ref with --create when
// it does not exist, and returns the changeset and how many changes it
// holds. Nothing to commit is an error unless --allow-empty.
func (a *app) commitChanges(s *core.Store, sn *core.Snapshot, c commitFlags, ps []core.ID, changes []core.Change) (core.ID, int, error) {
	if !c.carried {
		var err error
		if changes, err = mergeParents(sn, ps, changes); err != nil {
			return core.ID{}, 0, err
		}
	}
	if len(changes) == 0 && !c.allowEmpty && !c.carried {
		return core.ID{}, 0, emptyCommit()
	}
	id, err := a.commitRequest(s, sn, c, core.CommitRequest{Parents: ps, Changes: changes, Agent: c.agent, Message: c.msg, Advance: c.advance,
		RefuseEmpty: !c.allowEmpty})
	if errors.Is(err, core.ErrEmpty) {
		return core.ID{}, 0, emptyCommit()
	}
	return id, len(changes), err
}

// commitRequest commits req and moves --advance's ref to it. When the ref
// is at the first parent, the move is a compare-and-swap from it in the
// commit's own journal frame. When the ref does not exist and --create is
// given, or when the ref is an ancestor of a parent (a fast-forward: the
// new changeset holds all the ref did, as after landing the ref and
// updating a work tree onto the target), the move is a second transaction,
// a compare-and-swap from the value read, so a racing mover wins or loses
// cleanly.
func (a *app) commitRequest(s *core.Store, sn *core.Snapshot, c commitFlags, req core.CommitRequest) (core.ID, error) {
	from, after, err := advanceFrom(sn, c, req.Parents)
	if err != nil {
		return core.ID{}, fmt.Errorf("commit: %w", err)
	}
	if !after {
		id, err := s.Commit(req)
		if err != nil {
			return core.ID{}, advanceConflict(sn, c, req.Parents, fmt.Errorf("commit: %w", err))
		}
		return id, nil
	}
	req.Advance = ""
	id, err := s.Commit(req)
	if err != nil {
		return core.ID{}, fmt.Errorf("commit: %w", err)
	}
	if err := s.UpdateRefsAs(core.Origin{Agent: c.agent, Op: core.OpCommit}, core.RefUpdate{Name: c.advance, Old: from, New: id}); err != nil {
		verb := "advance"
		if from.IsZero() {
			verb = "create"
		}
		return core.ID{}, fmt.Errorf("commit %s: %s ref %q: %w", short(id), verb, c.advance, err)
	}
	return id, nil
}

// committed records a commit's success.
func (a *app) committed(id core.ID, ps []core.ID, n int, c commitFlags, extra map[string]any) {
	pstr := make([]string, len(ps))
	for i, p := range ps {
		pstr[i] = p.String()
	}
	data := map[string]any{"id": id.String(), "parents": pstr, "changes": n, "advanced": nullIfEmpty(c.advance)}
	for k, v := range extra {
		data[k] = v
	}
	a.ok(data, lines(id.String()))
}

func emptyCommit() error {
	return &cliError{kind: kindEmpty, err: errors.New("nothing to commit"),
		msg: "nothing to commit: the changes leave the tree as it is", hint: "use --allow-empty to record it anyway"}
}

// commitDir records a directory: a work tree's own changes against its
// base, or a plain directory against the first parent, which then becomes
// a work tree of the new changeset.
func (a *app) commitDir(s *core.Store, sn *core.Snapshot, c commitFlags) error {
	dir := a.path(c.dir)
	if st, err := os.Stat(dir); err != nil {
		return usagef("--dir: %w", err)
	} else if !st.IsDir() {
		return usagef("--dir %q is a file where a directory is expected", c.dir)
	}
	// A directory inside a work tree commits that tree, as status and a
	// commit run from there do: taken as a plain directory it would record
	// the deletion of everything outside it.
	if root, err := worktree.FindRoot(nil, dir); err == nil {
		if abs, err := filepath.Abs(dir); err == nil && abs != root {
			dir, c.dir = root, root
		}
	}
	opts, err := a.treeOptions()
	if err != nil {
		return err
	}
	a.limitTreeMemory(true)
	t, ps, err := a.commitTree(sn, dir, opts, &c)
	if err != nil {
		return err
	}
	defer t.Close()
	snap, err := t.Snapshot()
	if err != nil {
		return treeErr("commit --dir", c.dir, err)
	}
	if len(ps) > 1 {
		// A merge reads both sides of every change at once.
		if err := snap.Load(); err != nil {
			return treeErr("commit --dir", c.dir, err)
		}
	}
	extra := map[string]any{"dir": c.dir}
	id, n, err := a.commitChanges(s, sn, c, ps, snap.Changes)
	if err != nil {
		prev, ok, rerr := committedBefore(s, c, ps, snap.Changes, err)
		if rerr != nil {
			return rerr
		}
		if !ok {
			// What was skipped may be why nothing was left to commit
			// (E_EMPTY): the failure says so as a success would.
			ce := classify(err)
			if ce.extra == nil {
				ce.extra = map[string]any{}
			}
			a.reportSkipped(snap, ce.extra)
			return ce
		}
		id, n, extra["committed_before"] = prev, len(snap.Changes), true
	}
	a.reportSkipped(snap, extra)
	// The commit is durable now. Recording it as the tree's new base can
	// fail only on the tree's own files; the commit stands either way, so
	// that is a warning, not a failure a caller would retry. The tree's
	// lease moves to the new base first: without --advance no ref holds
	// it, and gc would take the tree's base away.
	err = a.leaseTree(s, dir, id)
	if err == nil {
		err = a.recordTree(s, t, c, ps, snap, id)
	}
	if err != nil {
		extra["warning"] = err.Error()
		fmt.Fprintf(a.stderr, "swarmops: warning: %s\n", err)
	}
	a.committed(id, ps, n, c, extra)
	return nil
}

// commitTree opens DIR as a work tree, or adopts a plain directory as one
// on the first parent, and returns it with the commit's parents: a work
// tree's parent is its base, and a first --parent other than the base is
// E_STALE.
func (a *app) commitTree(sn *core.Snapshot, dir string, opts worktree.Options, c *commitFlags) (*worktree.Tree, []core.ID, error) {
	t, err := worktree.Open(dir, opts)
	inTree := err == nil
	if inTree {
		// A work tree's parent is its base: --advance alone names the
		// ref to move, not where the changes are from.
		c.advanceParent = false
	}
	ps, perr := parentsOf(sn, *c)
	if perr != nil {
		if inTree {
			t.Close()
		}
		return nil, nil, perr
	}
	switch {
	case errors.Is(err, worktree.ErrInterrupted):
		// Not a plain directory: adopting it would record every file the
		// checkout had yet to write as deleted.
		return nil, nil, treeErr("commit --dir", c.dir, err)
	case errors.Is(err, worktree.ErrNotWorkTree):
		if len(ps) == 0 && !c.root && !(c.advance != "" && !hasRef(sn, c.advance)) {
			return nil, nil, usageHint(nil, nil, "commit --dir %q: no parent: give --parent REV (or --advance of an existing ref), or --root for a first changeset", c.dir)
		}
		var base core.ID
		if len(ps) > 0 {
			base = ps[0]
		}
		if t, err = worktree.Adopt(sn, dir, base, opts); err != nil {
			return nil, nil, treeErr("commit --dir", c.dir, err)
		}
	case err != nil:
		return nil, nil, treeErr("commit --dir", c.dir, err)
	default:
		if base := t.Base(); len(ps) > 0 && ps[0] != base {
			t.Close()
			return nil, nil, &cliError{kind: kindStale, err: errors.New("stale base"),
				extra: map[string]any{"base": idOrNull(base)},
				msg: fmt.Sprintf("commit --dir %q: the work tree is at %s, not at the parent %s: its changes are against its own base",
					c.dir, idText(base), short(ps[0])),
				hint: staleHint(base, ps[0], c.dir)}
		}
		if err := baseInStore(sn, t, c.dir); err != nil {
			t.Close()
			return nil, nil, err
		}
		if len(ps) == 0 && !t.Base().IsZero() {
			ps = []core.ID{t.Base()}
		}
		// An update carried commits along as local changes (the tree's
		// old base was not in what it went onto): the tree holds their
		// work, merged and resolved, so they are the commit's second
		// parent, and nothing is merged again.
		if carried := t.Carried(); !carried.IsZero() {
			switch {
			case len(ps) == 1:
				ps = append(ps, carried)
				c.carried = true
			case len(ps) == 2 && ps[1] == carried:
				c.carried = true
			}
		}
	}
	return t, ps, nil
}

// baseInStore refuses a work tree whose base this store lacks: a tree made
// from another store (it records which), whose changes against that base
// would be no changes at all, or a commit on a parent the store lacks.
func baseInStore(sn *core.Snapshot, t *worktree.Tree, dir string) error {
	base := t.Base()
	if base.IsZero() {
		return nil
	}
	if _, err := sn.Changeset(base); !errors.Is(err, core.ErrNotFound) {
		return err
	}
	from, _ := worktree.StorePath(nil, t.Dir())
	if from == "" {
		from = "another store"
	}
	return &cliError{kind: kindNotFound, err: errors.New("base not in store"), subject: map[string]any{"base": base.String()},
		msg:  fmt.Sprintf("commit --dir %q: the work tree's base %s is not in this store (the tree was checked out from %s)", dir, short(base), from),
		hint: "give the tree's store with --store, or remove its " + worktree.MetaDir + " to commit it as a plain directory"}
}

// treeMemoryLimit is the Go runtime's soft memory limit for a status,
// commit, checkout or git import of a tree: the live heap stays near a
// commit's chunk (core.Options.CommitChunkBytes) and the zstd encoder's
// 8 MiB whatever the tree's size, and the limit keeps the collector from
// letting garbage double it. Importing Go's src peaked at 63-65 MB of RSS
// without it and 52 MB with it.
const treeMemoryLimit = 48 << 20

// limitTreeMemory sets treeMemoryLimit unless GOMEMLIMIT sets a limit, or
// the command runs in a server, whose caches and clients it would starve.
// With lazy (status and commit --dir), the collector runs only as the heap
// nears the limit, unless GOGC is set: a status of Go's src allocates about
// 10 MB and then needs no collection at all, where collecting each time
// the heap doubled from the runtime's 4 MB start cost it about 15 % of its
// time. A checkout gains no time from it and would peak higher, so it
// collects as usual.
func (a *app) limitTreeMemory(lazy bool) {
	if a.getenv("GOMEMLIMIT") != "" || a.shared != nil {
		return
	}
	debug.SetMemoryLimit(treeMemoryLimit)
	if lazy && a.getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
	}
}

// diffGCPercent is the collector's target in a process that diffs
// blobs (diff, show): a diff of ten files of Go's src allocates about
// 10 MB, which the runtime's start (a collection each time the heap
// doubles from 4 MB) collected twice, 20 % of the command's wall time
// (GODEBUG=gctrace=1). Five times the live heap, not unbounded: a diff
// of huge files still collects.
const diffGCPercent = 400

// lazyDiffCollector sets diffGCPercent unless GOGC sets the target, or the
// command runs in a server, whose collector serves every client.
func (a *app) lazyDiffCollector() {
	if a.getenv("GOGC") != "" || a.shared != nil {
		return
	}
	debug.SetGCPercent(diffGCPercent)
}

// staleHint says what to do about a work tree at base asked to commit on
// parent: commit on its base, merge parent in, or update the tree.
func staleHint(base, parent core.ID, dir string) string {
	merge := ""
	if !base.IsZero() {
		merge = fmt.Sprintf(", or merge it in with --parent %s --parent %s", short(base), short(parent))
	}
	return fmt.Sprintf("commit without --parent%s, or bring the tree onto it first: swarmops update %s --onto %s", merge, dir, short(parent))
}

// reportSkipped warns of the special files a snapshot skipped and lists
// them in extra["skipped"].
func (a *app) reportSkipped(snap *worktree.Snapshot, extra map[string]any) {
	if len(snap.Skipped) == 0 {
		return
	}
	sk := make([]map[string]any, len(snap.Skipped))
	for i, k := range snap.Skipped {
		sk[i] = map[string]any{"path": k.Path, "reason": k.Reason}
		if !utf8.ValidString(k.Path) {
			// JSON would carry U+FFFD for the bad bytes: the caller
			// could not name the file.
			sk[i]["path_base64"] = base64.StdEncoding.EncodeToString([]byte(k.Path))
		}
		fmt.Fprintf(a.stderr, "swarmops: warning: skipped %q (%s)\n", k.Path, k.Reason)
	}
	extra["skipped"] = sk
}

// recordTree makes the commit id the work tree's base. When the commit
// merged a second parent, its tree can hold more than the work tree's
// files (what the second parent brought): the tree's own changes are then
// recorded as a changeset on the first parent, which the tree is recorded
// at, and the tree is switched from there to id, writing exactly what the
// merge brought. That changeset is on no ref.
func (a *app) recordTree(s *core.Store, t *worktree.Tree, c commitFlags, ps []core.ID, snap *worktree.Snapshot, id core.ID) error {
	after, err := s.Snapshot()
	if err != nil {
		return err
	}
	err = t.Record(after, id, snap)
	if err == nil {
		return nil
	}
	if len(ps) < 2 || !errors.Is(err, worktree.ErrBaseMismatch) {
		return fmt.Errorf("committed, but the work tree still records its old base: %v", plainText(err))
	}
	own, err := s.Commit(core.CommitRequest{Parents: ps[:1], Changes: snap.Changes, Agent: c.agent,
		Message: "work tree changes of " + short(id)})
	if err == nil {
		if after, err = s.Snapshot(); err == nil {
			err = t.Record(after, own, snap)
		}
	}
	if err != nil {
		return fmt.Errorf("committed, but the work tree still records its old base: %v", plainText(err))
	}
	if _, err := t.Switch(after, id); err != nil {
		return fmt.Errorf("committed, but the work tree is at %s, its own changes, without what the merge brought: %v; run: swarmops checkout %s %s",
			short(own), plainText(err), short(id), c.dir)
	}
	return nil
}
