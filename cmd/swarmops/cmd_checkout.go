package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/worktree"
)

// checkoutCmd is `swarmops checkout`: make DIR a work tree of REV, or
// switch the work tree DIR to REV.
func (a *app) checkoutCmd() *cobra.Command {
	var force, sync bool
	var follow string
	cmd := &cobra.Command{
		Use:   "checkout REV DIR [--force] [--sync]",
		Short: "Make DIR a work tree of REV, or switch the work tree DIR to REV",
		Long: `Make DIR a work tree of REV: every file, executable bit and symbolic link of
REV's tree is written into DIR (created if missing; refused if it holds
anything, unless --force), and DIR/.swarmops-tree records what was written,
so status and commit --dir cost what changed.

When DIR is already a work tree, checkout switches it: only the paths that
differ between its base and REV are written or removed, and local changes
in their way are refused (E_CONFLICT with "paths") unless --force. Nothing
is ever created, written or removed outside DIR (docs/security.md).
--sync makes every file durable before the command returns (git's
core.fsync=all); without it a power loss may tear files, which status then
reports as changed.`,
		Args: cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkRev(args[0]); err != nil {
				return usagef("%w", err)
			}
			dir := args[1]
			if st, err := os.Stat(a.path(dir)); err == nil && !st.IsDir() {
				return usagef("checkout: %q is a file where a directory is expected", dir)
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				opts, err := a.treeOptions()
				if err != nil {
					return err
				}
				opts.Force, opts.Sync, opts.Progress = force, sync, a.progress("checkout")
				if hasRef(sn, args[0]) {
					opts.Ref = args[0] // the tree follows it: update's default
				}
				if follow != "" {
					if err := checkRefName(follow); err != nil {
						return usagef("checkout --follow: %w", err)
					}
					if !hasRef(sn, follow) {
						return &cliError{kind: kindNotFound, err: core.ErrNotFound, subject: map[string]any{"ref": follow},
							msg: fmt.Sprintf("checkout --follow: no ref %q", follow)}
					}
					opts.Ref = follow
				}
				a.limitTreeMemory(false)
				// The base is held from garbage collection before it is read.
				if err := a.leaseTree(s, dir, id); errors.Is(err, core.ErrReadOnly) {
					// A reader may look at a revision in a tree of its
					// own; without a lease, a writer's gc may take the
					// base away, which a tree that cannot commit here
					// loses nothing by.
					fmt.Fprintf(a.stderr, "swarmops: warning: the store is read-only: the tree holds no lease, and gc may collect its base\n")
				} else if err != nil {
					return err
				}
				res, err := worktree.Checkout(sn, id, a.path(dir), opts)
				if err != nil {
					return treeErr("checkout", dir, err)
				}
				a.ok(map[string]any{"changeset": id.String(), "dir": dir, "files": res.Written,
					"removed": res.Removed, "bytes": res.Bytes},
					lines(fmt.Sprintf("checked out %s into %s: %d files written, %d removed, %d bytes",
						short(id), dir, res.Written, res.Removed, res.Bytes)))
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "write into a non-empty directory, or overwrite local changes in a work tree")
	cmd.Flags().BoolVar(&sync, "sync", false, "make every file durable before returning (fsync, as git's core.fsync=all)")
	cmd.Flags().StringVar(&follow, "follow", "", "the ref the tree follows (update's default), when REV is not that ref's name")
	return cmd
}

// statusCmd is `swarmops status`: what changed in a work tree against its
// base.
func (a *app) statusCmd() *cobra.Command {
	var noIgnore bool
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "List the paths of a work tree that differ from its base (default: the work tree around the current directory)",
		Long: `List what changed in a work tree against the changeset it was checked out
from or last committed: added (A), modified (M), deleted (D), type-changed
(T: a file became a link, or the reverse) and conflicted (C: left by update,
until resolve) paths, one a
line as in git status --short. Untracked paths that .gitignore files or the
store's exclude file match are left out (--no-ignore keeps them). Only files
whose size, times or inode changed since they were recorded are read, and
status needs no store.`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			a.limitTreeMemory(true)
			t, err := a.openTree(args, noIgnore)
			if err != nil {
				return err
			}
			defer t.Close()
			st, err := t.Status()
			if err != nil {
				return treeErr("status", t.Dir(), err)
			}
			// Stat data re-hashed clean is recorded, so the next status
			// need not read those files again; a failure here costs only
			// that, so it is not the command's.
			t.Refresh(st)
			data := statusJSON(st)
			data["ref"] = nullIfEmpty(t.Index().Ref)
			a.ok(data, func(w io.Writer) { writeStatus(w, st) })
			return nil
		}),
	}
	cmd.Flags().BoolVar(&noIgnore, "no-ignore", false, "report untracked paths that ignore rules match, too")
	return cmd
}

// statusJSON renders a status.
func statusJSON(st *worktree.Status) map[string]any {
	changes := make([]map[string]any, len(st.Changes))
	for i, c := range st.Changes {
		m := map[string]any{"path": c.Path, "kind": c.Kind.String()}
		if c.Old.Mode != 0 {
			m["old"] = entryJSON(c.Old)
		}
		if c.New.Mode != 0 && !c.New.ID.IsZero() {
			m["new"] = entryJSON(c.New)
		}
		changes[i] = m
	}
	skipped := make([]map[string]any, len(st.Skipped))
	for i, s := range st.Skipped {
		skipped[i] = map[string]any{"path": s.Path, "reason": s.Reason}
	}
	interrupted := st.Interrupted
	if interrupted == nil {
		interrupted = []string{}
	}
	return map[string]any{"base": idOrNull(st.Base), "changes": changes, "skipped": skipped, "clean": len(st.Changes) == 0,
		"conflicts": conflictsJSON(st.Conflicts), "interrupted": interrupted, "switching": idOrNull(st.Switching)}
}

// statusLetter is git status --short's letter for a kind.
func statusLetter(k worktree.Kind) string {
	switch k {
	case worktree.Added:
		return "A"
	case worktree.Modified:
		return "M"
	case worktree.Deleted:
		return "D"
	case worktree.TypeChanged:
		return "T"
	case worktree.Conflicted:
		return "C"
	}
	return "?"
}

func writeStatus(w io.Writer, st *worktree.Status) {
	for _, c := range st.Changes {
		fmt.Fprintf(w, "%s %s\n", statusLetter(c.Kind), quotePath(c.Path))
	}
	for _, s := range st.Skipped {
		fmt.Fprintf(w, "! %s (%s)\n", quotePath(s.Path), s.Reason)
	}
	if len(st.Interrupted) > 0 {
		fmt.Fprintln(w, "an update stopped before it recorded its conflicts: run 'swarmops update' again to finish it")
	}
	if !st.Switching.IsZero() {
		fmt.Fprintf(w, "a checkout of %s stopped before it finished: run it again to finish it\n", short(st.Switching))
	}
}

// treeOptions are the work-tree options every command shares: the store's
// directory, which a tree never writes into nor records, and the crash
// tests' filesystem when SWARMOPS_TEST_CRASH_AT is set.
func (a *app) treeOptions() (worktree.Options, error) {
	dir := a.storeDir()
	if a.shared != nil {
		dir = a.sharedDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return worktree.Options{}, err
	}
	// The crash knob reaches the tree's files too; the read-only one is
	// the store's alone.
	fsys, err := crashAtFS(a.getenv)
	if err != nil {
		return worktree.Options{}, err
	}
	o := worktree.Options{StoreDir: abs, FS: fsys}
	switch v := a.getenv(dirRecordsEnv); v {
	case "", "on":
	case "off":
		o.NoDirCache = true
	default:
		return worktree.Options{}, usagef("%s=%q: want on or off", dirRecordsEnv, v)
	}
	return o, nil
}

// dirRecordsEnv turns a work tree's directory records off (worktree's
// "Directory records"): for a filesystem that does not move a directory's
// times when its entries change, as some network and FUSE filesystems do
// not.
const dirRecordsEnv = "SWARMOPS_DIR_RECORDS"

// openTree opens the work tree named by args (one directory) or, without
// one, the work tree around the current directory.
func (a *app) openTree(args []string, noIgnore bool) (*worktree.Tree, error) {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	root, err := worktree.FindRoot(nil, a.path(dir))
	if err != nil {
		return nil, treeErr("", dir, err)
	}
	opts, err := a.treeOptions()
	if err != nil {
		return nil, err
	}
	opts.NoIgnore = noIgnore
	t, err := worktree.Open(root, opts)
	if err != nil {
		return nil, treeErr("", dir, err)
	}
	return t, nil
}

// treeErr places a work-tree error in the table.
func treeErr(verb, dir string, err error) error {
	var (
		local      *worktree.LocalChangesError
		unsafe     *worktree.UnsafeTreeError
		unresolved *worktree.UnresolvedError
		switching  *worktree.SwitchError
	)
	prefix := dir
	if verb != "" {
		prefix = verb + " " + dir
	}
	var finish *worktree.FinishError
	switch {
	case errors.As(err, &finish) && errors.As(err, &local):
		// Commit, the usual way out, is refused while a switch is
		// pending: the edits have to be moved aside.
		return &cliError{kind: kindConflict, err: err, extra: map[string]any{"paths": local.Paths, "onto": finish.Onto.String()},
			msg: fmt.Sprintf("%s: local changes are in the way of finishing the checkout of %s that stopped midway", prefix, short(finish.Onto)),
			hint: "copy them aside, then check out with --force (every tracked path then holds the revision's content); " +
				"a commit is refused until the stopped checkout is finished"}
	case errors.As(err, &local):
		return &cliError{kind: kindConflict, err: err, extra: map[string]any{"paths": local.Paths},
			msg:  fmt.Sprintf("%s: local changes would be overwritten", prefix),
			hint: "commit them, or use --force to overwrite them"}
	case errors.As(err, &unresolved):
		return unresolvedErr(prefix, unresolved)
	case errors.As(err, &switching):
		return &cliError{kind: kindUnresolved, err: err, extra: map[string]any{"onto": switching.Onto.String()},
			msg:  fmt.Sprintf("%s: a checkout of %s into the work tree stopped before it finished", prefix, short(switching.Onto)),
			hint: fmt.Sprintf("run 'swarmops checkout %s %s' to finish it; a checkout of any revision finishes it first", short(switching.Onto), dir)}
	case errors.Is(err, worktree.ErrNotConflicted):
		return &cliError{kind: kindUsage, err: err, msg: fmt.Sprintf("%s: %s has no conflict", prefix, plainText(err)),
			hint: "'swarmops status' lists the conflicted paths (C)"}
	case errors.As(err, &unsafe):
		return &cliError{kind: kindUnsafe, err: err, extra: map[string]any{"path": unsafe.Path},
			msg: fmt.Sprintf("%s: the tree holds a path no checkout writes: %q: %s", prefix, unsafe.Path, unsafe.Reason)}
	case errors.Is(err, worktree.ErrReservedPath):
		return &cliError{kind: kindUnsafe, err: err, msg: fmt.Sprintf("%s: %s", prefix, plainText(err))}
	case errors.Is(err, worktree.ErrNotEmpty):
		return usageHint(nil, nil, "%s: %q is not empty and not a work tree (use --force to write into it)", verb, dir)
	case errors.Is(err, worktree.ErrInterrupted):
		return &cliError{kind: kindNotFound, err: err, subject: map[string]any{"dir": dir},
			msg:  fmt.Sprintf("%q is not a work tree yet: its first checkout was interrupted", dir),
			hint: "run the same 'swarmops checkout REV DIR' again to finish it"}
	case errors.Is(err, worktree.ErrNotWorkTree):
		return &cliError{kind: kindNotFound, err: err, subject: map[string]any{"dir": dir},
			msg:  fmt.Sprintf("%q is not inside a work tree (no %s at or above it)", dir, worktree.MetaDir),
			hint: "make one with 'swarmops checkout REV DIR'"}
	case errors.Is(err, worktree.ErrIndexCorrupt):
		return &cliError{kind: kindCorrupt, err: err, msg: fmt.Sprintf("%s: %s", prefix, plainText(err)),
			hint: "check the tree out again with 'swarmops checkout REV DIR --force'"}
	case errors.Is(err, worktree.ErrSpecialFile):
		return usagef("%s: %w", prefix, err)
	}
	return err
}
