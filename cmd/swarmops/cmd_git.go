package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/gitx"
)

// exportCmd is `swarmops export --git DIR`: write the history of refs into
// a git repository as commits.
func (a *app) exportCmd() *cobra.Command {
	var gitDir, prefix string
	var force bool
	cmd := &cobra.Command{
		Use:        "export --git DIR [REF]... [--prefix refs/heads/swarm/] [--force]",
		SuggestFor: []string{"git"},
		Short:      "Write the history of refs (default: every ref) into git repository DIR as commits",
		Long: `Write every changeset the refs reach (default: every ref) into the git
repository DIR as commits, and set git ref PREFIX+REF to each ref's commit.
DIR is created as a bare repository if it is missing or empty. Only
changesets no earlier export wrote are written (swarmops-export.map in the
git directory says which); the same history always gives the same commit
ids. The export reads one snapshot, so agents may keep committing.

A git ref follows its store ref wherever it moved, while it holds a
commit an export wrote. One that holds a commit made in git, which the
new value does not contain, is E_CONFLICT ("refs": each git_ref, its
commit and the commit wanted) and no ref moves, unless --force: the
commit would be left reachable only from git's reflog. The refs move in
one git transaction, each from the value the export read: one moved
meanwhile is E_CONFLICT too (run the export again).`,
		Args: cobra.ArbitraryArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if gitDir == "" {
				return usagef("export: --git DIR is required (the git repository to write)")
			}
			if prefix == "" {
				return usagef("export: --prefix is empty (want refs/.../, default %s)", gitx.DefaultPrefix)
			}
			for _, r := range args {
				if err := checkRefName(r); err != nil {
					return usagef("export: %w", err)
				}
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				for _, r := range args {
					if _, err := sn.Ref(r); err != nil {
						return refNotFound(sn, r, err)
					}
				}
				res, err := gitx.Export(sn, a.path(gitDir), gitx.ExportOptions{Refs: args, Prefix: prefix,
					Force: force, Progress: a.progress("export")})
				if err != nil {
					return gitError("export", err)
				}
				a.exported(gitDir, res)
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&gitDir, "git", "", "the git repository to write (created bare if missing or empty)")
	f.StringVar(&prefix, "prefix", gitx.DefaultPrefix, "where the refs land: store ref REF becomes git ref PREFIX+REF")
	f.BoolVar(&force, "force", false, "move git refs that hold commits made in git, dropping them from the branch")
	return cmd
}

// exported records an export's result.
func (a *app) exported(dir string, res *gitx.ExportResult) {
	refs := make([]map[string]any, len(res.Refs))
	for i, r := range res.Refs {
		refs[i] = map[string]any{"name": r.Name, "git_ref": r.GitRef, "changeset": r.Changeset.String(), "commit": r.Commit}
	}
	a.ok(map[string]any{"git_dir": res.GitDir, "created": res.Created, "refs": refs,
		"commits_written": res.CommitsWritten, "blobs_written": res.BlobsWritten,
		"commits_reused": res.CommitsReused, "mapping_note": nullIfEmpty(res.MapNote)},
		func(w io.Writer) {
			for _, r := range res.Refs {
				fmt.Fprintf(w, "%s %s (changeset %s)\n", r.Commit, r.GitRef, short(r.Changeset))
			}
			verb := "exported into"
			if res.Created {
				verb = "exported into new repository"
			}
			fmt.Fprintf(w, "%s %s: %d commits and %d blobs written, %d commits reused\n", verb, dir,
				res.CommitsWritten, res.BlobsWritten, res.CommitsReused)
			if res.MapNote != "" {
				fmt.Fprintf(w, "note: %s\n", res.MapNote)
			}
		})
}

// importCmd is `swarmops import --git DIR REV`: bring a git revision, or
// its history, into the store and move a ref to it.
func (a *app) importCmd() *cobra.Command {
	var gitDir, as string
	var history, force bool
	cmd := &cobra.Command{
		Use:        "import --git DIR REV [--as REF] [--history] [--force]",
		SuggestFor: []string{"git"},
		Short:      "Bring git revision REV (or with --history its whole history) into the store and move a ref to it",
		Long: `Bring git revision REV of repository DIR into the store as changesets and
move a store ref to the result by compare-and-swap (created if missing).
The ref is --as REF, else the branch REV names; a tag or commit id needs
--as. Without --history REV's tree becomes one changeset without parents;
with it every ancestor becomes a changeset with its parents. Author name,
author time and message are kept, so importing the same history again
gives the same ids. Submodules are skipped and listed. The imported
changesets are recorded in DIR's export mapping as the commits they came
from, so an export into DIR builds on those commits: the exported branch
shares the history of the one imported, and git merges it. The other way,
commits an export wrote come back as the changesets they came from
("reused"), so a branch built in git on an exported one imports as a
fast-forward. A ref the import would move to a changeset that does not
contain its value is E_CONFLICT ("current", "new") and stays, unless
--force.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if gitDir == "" {
				return usagef("import: --git DIR is required (the git repository to read)")
			}
			if as != "" {
				if err := checkRefName(as); err != nil {
					return usagef("import: --as: %w", err)
				}
			}
			a.limitTreeMemory(false)
			return a.withStore(func(s *core.Store, _ *core.Snapshot) error {
				res, err := gitx.Import(s, a.path(gitDir), gitx.ImportOptions{Rev: args[0], As: as, History: history, Force: force,
					CheckRef: func(name string) error {
						if err := checkRefName(name); err != nil {
							return usagef("import: branch %q cannot be a store ref (give one with --as): %w", name, err)
						}
						return nil
					},
					Progress: a.progress("import"), Agent: a.getenv(agentEnv)})
				if err != nil {
					return gitError("import", err)
				}
				a.imported(res)
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&gitDir, "git", "", "the git repository to read")
	f.StringVar(&as, "as", "", "the store ref to move (default: the branch REV names)")
	f.BoolVar(&history, "history", false, "import every ancestor of REV, not only its tree")
	f.BoolVar(&force, "force", false, "move the ref even when the import does not contain its value (drops that work from it)")
	return cmd
}

// imported records an import's result.
func (a *app) imported(res *gitx.ImportResult) {
	skipped := res.Skipped
	if skipped == nil {
		skipped = []string{}
	}
	a.ok(map[string]any{"git_dir": res.GitDir, "git_commit": res.GitCommit, "ref": res.Ref,
		"old": idOrNull(res.Old), "new": res.New.String(), "moved": res.Moved, "changesets": res.Changesets, "reused": res.Reused,
		"skipped": skipped, "mapping_note": nullIfEmpty(res.MapNote)},
		func(w io.Writer) {
			fmt.Fprintln(w, res.New.String())
			state := "moved from " + idText(res.Old)
			switch {
			case res.Old.IsZero():
				state = "created"
			case !res.Moved:
				state = "already there"
			}
			fmt.Fprintf(w, "%s: %s (git %s, %d changesets imported, %d taken back from exports)\n", res.Ref, state, res.GitCommit, res.Changesets, res.Reused)
			for _, p := range res.Skipped {
				fmt.Fprintf(a.stderr, "warning: skipped submodule %s (the store holds no gitlinks)\n", p)
			}
			if res.MapNote != "" {
				fmt.Fprintf(a.stderr, "warning: %s\n", res.MapNote)
			}
		})
}

// gitError places an error of export or import in the table, in the
// user's terms: the package names behind it are dropped from the message.
func gitError(verb string, err error) error {
	ce := classify(fmt.Errorf("%s: %w", verb, err))
	ce.msg = strings.ReplaceAll(ce.message(), "gitx: ", "")
	var fe *gitx.ForeignError
	if errors.As(err, &fe) {
		refs := make([]map[string]any, len(fe.Refs))
		for i, r := range fe.Refs {
			refs[i] = map[string]any{"git_ref": r.GitRef, "commit": r.Commit, "want": r.Want}
		}
		ce.extra = map[string]any{"refs": refs}
		ce.hint = "keep those commits on another git branch first, or export with --force to drop them from the branch (they are left unreferenced: a bare repository keeps no reflog, and git gc prunes them), or export under another --prefix"
	}
	var nf *gitx.NotFastForwardError
	if errors.As(err, &nf) {
		ce.extra = map[string]any{"ref": nf.Ref, "current": nf.Current.String(), "new": nf.New.String()}
		ce.hint = "land the imported changeset onto the ref instead (swarmops land NEW --onto REF), or import with --force to move the ref anyway"
	}
	return ce
}
