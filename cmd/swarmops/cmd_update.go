package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/worktree"
)

// updateCmd is `swarmops update`: bring a work tree forward onto a newer
// revision, keeping its own changes.
func (a *app) updateCmd() *cobra.Command {
	var onto string
	var sync bool
	cmd := &cobra.Command{
		Use:   "update [DIR] [--onto REV] [--sync]",
		Short: "Bring a work tree onto a newer revision, keeping its own changes (three-way merge)",
		Long: `Merge a work tree's own changes (its files against its base, and changes
committed on its base that REV lacks) onto REV, three ways per path: base
the common ancestor of the tree's base and REV (the tree's base when they
share none), ours the work tree, theirs REV. A path only one side changed
takes that side. Text files both sides changed merge by lines; what cannot
merge is written with diff3-style conflict markers (the base shown) and
recorded as a conflict. A binary, mode or type conflict, a file one side
deleted and the other changed, and a directory in the way keep the work
tree's side on disk and are recorded too. The tree's base becomes REV:
the next commit --dir has REV as its parent.

REV defaults to the ref the tree follows: the one it was checked out from
or last updated onto by name (status --json shows it as "ref"); a tree
checked out by id needs --onto. An update that leaves conflicts has
still moved the tree onto REV, and exits E_UNRESOLVED (18) with its
result and the conflicted "paths", as git's merge exits 1: the conflicts
are listed by status (C) and refuse commit --dir (E_UNRESOLVED) until
'swarmops resolve' marks them resolved. Only paths whose content changes are written, never anything
outside DIR; --sync makes them durable before the command returns.`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if onto != "" {
				if err := checkRev(onto); err != nil {
					return usagef("--onto: %w", err)
				}
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				t, err := a.openTree(args, false)
				if err != nil {
					return err
				}
				defer t.Close()
				rev := onto
				if rev == "" {
					rev = t.Index().Ref
				}
				if rev == "" {
					return usageHint(nil, nil, "update %s: the tree follows no ref (it was checked out by id): give --onto REV", t.Dir())
				}
				id, err := resolve(sn, rev)
				if err != nil {
					return err
				}
				opts, err := a.treeOptions()
				if err != nil {
					return err
				}
				opts.Sync = sync
				if hasRef(sn, rev) {
					opts.Ref = rev
				}
				dir := t.Dir()
				t.Close()
				if t, err = worktree.Open(dir, opts); err != nil {
					return treeErr("update", dir, err)
				}
				if err := a.leaseTree(s, dir, id); err != nil {
					return err
				}
				res, err := t.Update(sn, id, rev)
				if err != nil {
					return treeErr("update", dir, err)
				}
				a.updated(res, dir, rev, id)
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&onto, "onto", "", "the revision to bring the tree onto (default: the ref the tree follows)")
	cmd.Flags().BoolVar(&sync, "sync", false, "make every file written durable before returning (fsync)")
	return cmd
}

func updateJSON(res *worktree.UpdateResult, dir string) map[string]any {
	merged := res.Merged
	if merged == nil {
		merged = []string{}
	}
	return map[string]any{"changeset": res.Changeset.String(), "merge_base": idOrNull(res.MergeBase), "dir": dir,
		"written": res.Written, "removed": res.Removed, "merged": merged, "conflicts": conflictsJSON(res.Conflicts)}
}

// writeUpdate prints an update for a human; id is what rev resolved to,
// which the tree's base already holds when they differ.
func writeUpdate(w io.Writer, res *worktree.UpdateResult, rev string, id core.ID) {
	if res.Changeset != id && res.Written == 0 && res.Removed == 0 {
		fmt.Fprintf(w, "already up to date: the tree's base %s holds %s (%s)\n", short(res.Changeset), rev, short(id))
		return
	}
	fmt.Fprintf(w, "updated onto %s (%s): %d files written, %d removed, %d merged by lines\n",
		rev, short(res.Changeset), res.Written, res.Removed, len(res.Merged))
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "C %s\n", quotePath(c.Path))
	}
}

// updated reports an update onto rev (resolved to id).
func (a *app) updated(res *worktree.UpdateResult, dir, rev string, id core.ID) {
	if len(res.Conflicts) > 0 {
		a.updateConflicted(res, dir, rev)
		return
	}
	a.ok(updateJSON(res, dir), func(w io.Writer) { writeUpdate(w, res, rev, id) })
}

// updateConflicted reports an update that left conflicts: E_UNRESOLVED,
// with the conflicted paths for a human and the rest of the update's
// result for a program, since the tree did move onto rev.
func (a *app) updateConflicted(res *worktree.UpdateResult, dir, rev string) {
	paths := make([]string, len(res.Conflicts))
	for i, c := range res.Conflicts {
		paths[i] = c.Path
	}
	if !a.jsonOut && !a.jsonFlag {
		writeUpdate(a.stdout, res, rev, res.Changeset)
	}
	a.fail = &cliError{kind: kindUnresolved,
		err:     fmt.Errorf("update onto %s left %d conflicts in %s", rev, len(paths), quotedList(paths)),
		hint:    "edit each file to what it should hold, then 'swarmops resolve PATH...' (or --all) and commit",
		extra:   map[string]any{"paths": paths},
		subject: updateJSON(res, dir)}
}

// conflictsJSON renders conflict records: each side an entry, or null
// when absent.
func conflictsJSON(cs []worktree.ConflictRecord) []map[string]any {
	out := make([]map[string]any, len(cs))
	for i, c := range cs {
		m := map[string]any{"path": c.Path}
		for k, e := range map[string]objects.Entry{"base": c.Base, "ours": c.Ours, "theirs": c.Theirs} {
			if e.Mode == 0 {
				m[k] = nil
				continue
			}
			m[k] = map[string]any{"mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": idOrNull(e.ID)}
		}
		out[i] = m
	}
	return out
}

// resolveCmd is `swarmops resolve`: mark conflicted paths resolved.
func (a *app) resolveCmd() *cobra.Command {
	var all, force bool
	cmd := &cobra.Command{
		Use:   "resolve [DIR] (PATH... | --all) [--force]",
		Short: "Mark conflicted paths of a work tree resolved, after editing them",
		Long: `Mark paths that update left conflicted as resolved, once their files hold
what they should (or are removed, to delete them): the next commit --dir
records them as they are. DIR is the work tree when the first argument
is a work tree's root directory; otherwise every argument is a PATH and
the tree is the one around the current directory. PATHs are relative to
DIR, or to the current directory without one. --all resolves every
conflicted path. A file that still holds a conflict marker line
("<<<<<<<", "|||||||" or ">>>>>>>" at the start of a line) is refused
(E_UNRESOLVED with "paths") unless --force; a path without a conflict is
E_USAGE.`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			var dirArgs []string
			if len(args) > 0 && isTreeRoot(a.path(args[0])) {
				dirArgs, args = args[:1], args[1:]
			}
			if all == (len(args) > 0) {
				return usagef("resolve: give the conflicted PATHs or --all (one of them)")
			}
			t, err := a.openTree(dirArgs, false)
			if err != nil {
				return err
			}
			defer t.Close()
			from := a.path(".")
			if len(dirArgs) > 0 {
				from = a.path(dirArgs[0])
			}
			paths, err := treePaths(t.Dir(), from, args)
			if err != nil {
				return err
			}
			done, err := t.Resolve(paths, all, force)
			if err != nil {
				return treeErr("resolve", t.Dir(), err)
			}
			left := conflictsJSON(t.Index().Conflicts)
			if done == nil {
				done = []string{}
			}
			a.ok(map[string]any{"dir": t.Dir(), "resolved": done, "conflicts": left}, func(w io.Writer) {
				for _, p := range done {
					fmt.Fprintf(w, "resolved %s\n", p)
				}
				if len(left) > 0 {
					fmt.Fprintf(w, "%d conflicts left\n", len(left))
				}
			})
			return nil
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "resolve every conflicted path")
	cmd.Flags().BoolVar(&force, "force", false, "resolve files that still hold conflict markers")
	return cmd
}

// isTreeRoot reports whether dir is a work tree's root directory.
func isTreeRoot(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, worktree.MetaDir))
	return err == nil && fi.IsDir()
}

// treePaths turns paths given relative to from into slash paths relative
// to the tree root; a path outside the tree is E_USAGE.
func treePaths(root, from string, args []string) ([]string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(args))
	for i, p := range args {
		if !filepath.IsAbs(p) {
			p = filepath.Join(from, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(absRoot, abs)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, usagef("resolve: %q is not a path inside the work tree %s", args[i], root)
		}
		out[i] = filepath.ToSlash(rel)
	}
	return out, nil
}

// unresolvedErr places a *worktree.UnresolvedError in the table.
func unresolvedErr(prefix string, ue *worktree.UnresolvedError) error {
	ce := &cliError{kind: kindUnresolved, err: ue, extra: map[string]any{"paths": ue.Paths}}
	if ue.Interrupted {
		ce.msg = fmt.Sprintf("%s: an update of the work tree stopped before it recorded the conflicts it wrote into %s", prefix, quotedList(ue.Paths))
		ce.hint = "run 'swarmops update' again to finish it (it first puts back what those files held), or 'swarmops checkout REV DIR --force' to drop the tree's changes"
		return ce
	}
	if ue.Markers {
		ce.msg = fmt.Sprintf("%s: conflict markers are still in %s", prefix, quotedList(ue.Paths))
		ce.hint = "edit them until no <<<<<<<, ||||||| or >>>>>>> line is left, or use --force to resolve them as they are"
		return ce
	}
	ce.msg = fmt.Sprintf("%s: the work tree has unresolved conflicts in %s", prefix, quotedList(ue.Paths))
	ce.hint = "edit each file to what it should hold, then 'swarmops resolve PATH...' (or --all); 'swarmops status' lists them"
	return ce
}
