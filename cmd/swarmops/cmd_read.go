package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// logCmd is `swarmops log`: first-parent history.
func (a *app) logCmd() *cobra.Command {
	var n int
	var oneline bool
	var format string
	cmd := &cobra.Command{
		Use:   "log [-n N] [--oneline | --format FMT] [REV]",
		Short: "List changesets along the first-parent chain from REV (default main)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			rev := "main"
			if len(args) == 1 {
				rev = args[0]
			}
			if n < 0 {
				return usagef("log: -n %d: want 0 (all) or more", n)
			}
			if oneline {
				if format != "" {
					return usagef("log: --oneline and --format: give one")
				}
				format = "%h %s"
			}
			if err := checkFormat(format); err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				if len(args) == 0 && !hasRef(sn, rev) {
					// Before the first commit to main its history is
					// empty, not missing: git and jj print nothing there
					// too. A REV the user names must exist.
					a.ok([]map[string]any{}, nil)
					return nil
				}
				from, err := resolve(sn, rev)
				if err != nil {
					return err
				}
				ids, err := sn.Log(from, n)
				if err != nil {
					return err
				}
				out := make([]map[string]any, 0, len(ids))
				css := make([]*objects.Changeset, 0, len(ids))
				for _, id := range ids {
					cs, err := sn.Changeset(id)
					if err != nil {
						return err
					}
					out = append(out, changesetJSON(id, cs))
					css = append(css, cs)
				}
				a.ok(out, func(w io.Writer) {
					for i, id := range ids {
						if format != "" {
							fmt.Fprintln(w, formatChangeset(format, id, css[i]))
							continue
						}
						if i > 0 {
							fmt.Fprintln(w)
						}
						writeChangeset(w, id, css[i])
					}
				})
				return nil
			})
		}),
	}
	cmd.Flags().IntVarP(&n, "max-count", "n", 0, "at most N changesets (0: all)")
	cmd.Flags().BoolVar(&oneline, "oneline", false, "one line a changeset: short id and subject")
	cmd.Flags().StringVar(&format, "format", "", "one line a changeset: %H id, %h short id, %s subject, %B message, %a agent, %t time, %P parents, %g generation, %n newline, %% percent")
	return cmd
}

// checkFormat refuses a --format with an unknown placeholder, so a typo is
// an error rather than text printed as is.
func checkFormat(f string) error {
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i+1 == len(f) || !strings.ContainsRune("HhsBatPgn%", rune(f[i+1])) {
			return usagef("log --format %q: unknown placeholder at byte %d (want %%H %%h %%s %%B %%a %%t %%P %%g %%n %%%%)", f, i)
		}
		i++
	}
	return nil
}

// formatChangeset renders a changeset with a checked --format.
func formatChangeset(f string, id core.ID, cs *objects.Changeset) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'H':
			b.WriteString(id.String())
		case 'h':
			b.WriteString(short(id))
		case 's':
			subject, _, _ := strings.Cut(cs.Message, "\n")
			b.WriteString(subject)
		case 'B':
			b.WriteString(cs.Message)
		case 'a':
			b.WriteString(cs.Agent)
		case 't':
			b.WriteString(fmtTime(cs.Time))
		case 'P':
			for j, p := range cs.Parents {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(short(p))
			}
		case 'g':
			fmt.Fprint(&b, cs.Generation)
		case 'n':
			b.WriteByte('\n')
		case '%':
			b.WriteByte('%')
		}
	}
	return b.String()
}

// showCmd is `swarmops show`: one changeset and its changes.
func (a *app) showCmd() *cobra.Command {
	var f diffFormat
	cmd := &cobra.Command{
		Use:   "show REV [--stat | --name-status] [-U N]",
		Short: "Show a changeset and its changes against its first parent",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			a.lazyDiffCollector()
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				cs, err := sn.Changeset(id)
				if err != nil {
					return err
				}
				pcs, err := diffFromParent(sn, id, cs)
				if err != nil {
					return err
				}
				fds, err := contentDiffs(storeBlobs(sn), pcs, f)
				if err != nil {
					return err
				}
				data := changesetJSON(id, cs)
				data["changes"] = diffsJSON(fds, f)
				a.ok(data, func(w io.Writer) {
					writeChangeset(w, id, cs)
					fmt.Fprintln(w)
					writeDiffs(w, fds, f)
				})
				return nil
			})
		}),
	}
	f.flags(cmd)
	return cmd
}

// catCmd is `swarmops cat`: one file's bytes.
func (a *app) catCmd() *cobra.Command {
	return a.revPathCmd("cat REV:PATH", "Print a file's content at a revision", true,
		func(sn *core.Snapshot, id core.ID, rev, path string) error {
			data, e, err := sn.ReadPath(id, path)
			if err != nil {
				return pathNotFound(rev, path, err)
			}
			if e.Mode == objects.ModeDir {
				return usagef("%s:%s is a directory (use ls)", rev, path)
			}
			out := map[string]any{"path": path, "mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": e.ID.String(), "size": len(data)}
			if utf8.Valid(data) {
				out["content"] = string(data)
			} else {
				out["content_base64"] = data // encoding/json writes []byte as base64
			}
			a.ok(out, func(w io.Writer) { w.Write(data) })
			return nil
		})
}

// lsCmd is `swarmops ls`: one directory of a tree.
func (a *app) lsCmd() *cobra.Command {
	return a.revPathCmd("ls REV[:PATH]", "List a directory of a revision's tree", false,
		func(sn *core.Snapshot, id core.ID, rev, path string) error {
			ents, err := sn.ListPath(id, path)
			if err != nil {
				return pathNotFound(rev, path, err)
			}
			okEach(a, ents, func(e objects.Entry) map[string]any {
				return map[string]any{"name": e.Name, "mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": e.ID.String(), "type": entryType(e.Mode)}
			}, func(e objects.Entry) string {
				suffix := ""
				if e.Mode == objects.ModeDir {
					suffix = "/"
				}
				return fmt.Sprintf("%06o %s %s%s", uint32(e.Mode), e.ID, quotePath(e.Name), suffix)
			})
			return nil
		})
}

// revPathCmd is a command, cat or ls, whose one argument is REV[:PATH]
// (PATH required when needPath): it runs fn in a snapshot with REV
// resolved to id.
func (a *app) revPathCmd(use, short string, needPath bool, fn func(sn *core.Snapshot, id core.ID, rev, path string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			rev, path, err := revPath(args[0], needPath)
			if err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, rev)
				if err != nil {
					return err
				}
				return fn(sn, id, rev, path)
			})
		}),
	}
}

// entryType names a mode for JSON: file, exec, symlink or dir.
func entryType(m objects.Mode) string {
	switch m {
	case objects.ModeDir:
		return "dir"
	case objects.ModeExec:
		return "exec"
	case objects.ModeSymlink:
		return "symlink"
	}
	return "file"
}

// diffCmd is `swarmops diff`: the path changes between two revisions.
func (a *app) diffCmd() *cobra.Command {
	var f diffFormat
	var work bool
	cmd := &cobra.Command{
		Use:   "diff (A B | --work [DIR]) [--stat | --name-status] [-U N]",
		Short: "Show the changes from revision A to revision B, or of a work tree against its base",
		Long: `Show the changes from revision A to revision B as a unified diff (git's
format; --stat for changed lines per path, --name-status for the paths
only). With --work, show what a work tree (DIR, or the one around the
current directory) changed against its base: the same changes status lists,
with their content. JSON carries each path's op, entries, line counts and
structured hunks.`,
		Args: cobra.MaximumNArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if work {
				if len(args) > 1 {
					return usagef("diff --work takes at most one DIR")
				}
				return a.diffWork(args, f)
			}
			if len(args) != 2 {
				return usagef("diff: give two revisions A B, or --work [DIR]")
			}
			a.lazyDiffCollector()
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				x, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				y, err := resolve(sn, args[1])
				if err != nil {
					return err
				}
				pcs, err := sn.Diff(x, y)
				if err != nil {
					return err
				}
				return a.okDiffs(storeBlobs(sn), pcs, f)
			})
		}),
	}
	f.flags(cmd)
	cmd.Flags().BoolVar(&work, "work", false, "diff a work tree against its base")
	return cmd
}

// diffWork diffs a work tree against its base: the base's side from the
// store the tree records, the work side from its files.
func (a *app) diffWork(args []string, f diffFormat) error {
	t, err := a.openTree(args, false)
	if err != nil {
		return err
	}
	defer t.Close()
	if a.storeFlag == "" && a.getenv("SWARMOPS_STORE") == "" && a.shared == nil {
		if d := treeStore(t.Dir()); d != "" {
			a.storeFlag = d
		}
	}
	chs, err := t.Diff()
	if err != nil {
		return treeErr("diff --work", t.Dir(), err)
	}
	pcs := make([]core.PathChange, len(chs))
	for i, c := range chs {
		op := "modify"
		switch {
		case c.Old.Mode == 0:
			op = "add"
		case c.New.Mode == 0:
			op = "delete"
		}
		pcs[i] = core.PathChange{Path: c.Path, Op: op, Old: c.Old, New: c.New}
	}
	return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
		src := storeBlobs(sn)
		src.new = func(_ objects.Entry, p string) ([]byte, error) {
			data, _, err := t.ReadWork(p)
			return data, err
		}
		src.parallel = false // the work tree's handles serve one goroutine at a time
		return a.okDiffs(src, pcs, f)
	})
}

// okDiffs answers with the content diffs of pcs, their bytes read from
// src: diff between revisions and diff --work print alike.
func (a *app) okDiffs(src blobSource, pcs []core.PathChange, f diffFormat) error {
	fds, err := contentDiffs(src, pcs, f)
	if err != nil {
		return err
	}
	a.ok(diffsJSON(fds, f), func(w io.Writer) { writeDiffs(w, fds, f) })
	return nil
}

// revPath parses REV:PATH (path required if needPath).
func revPath(arg string, needPath bool) (rev, path string, err error) {
	rev, path, has := splitRevPath(arg)
	if needPath && !has {
		return "", "", usagef("%q: want REV:PATH", arg)
	}
	if err := checkRev(rev); err != nil {
		return "", "", usagef("%w", err)
	}
	if has && !(path == "" && !needPath) {
		if err := checkPath(path); err != nil {
			return "", "", usagef("%w", err)
		}
	}
	return rev, path, nil
}

// changesetJSON renders a changeset.
func changesetJSON(id core.ID, cs *objects.Changeset) map[string]any {
	ps := make([]string, len(cs.Parents))
	for i, p := range cs.Parents {
		ps[i] = p.String()
	}
	return map[string]any{"id": id.String(), "parents": ps, "root": cs.Root.String(), "delta": cs.Delta.String(),
		"generation": cs.Generation, "agent": cs.Agent, "message": cs.Message, "time": fmtTime(cs.Time)}
}

// writeChangeset prints a changeset's header for humans.
func writeChangeset(w io.Writer, id core.ID, cs *objects.Changeset) {
	fmt.Fprintf(w, "changeset %s\n", id)
	for _, p := range cs.Parents {
		fmt.Fprintf(w, "parent    %s\n", p)
	}
	fmt.Fprintf(w, "agent     %s\ntime      %s\ngen       %d\n\n    %s\n", cs.Agent, fmtTime(cs.Time), cs.Generation,
		strings.ReplaceAll(cs.Message, "\n", "\n    "))
}

// pathChangeJSON renders one diff entry.
func pathChangeJSON(pc core.PathChange) map[string]any {
	m := map[string]any{"path": pc.Path, "op": pc.Op}
	if pc.Op != "add" {
		m["old"] = entryJSON(pc.Old)
	}
	if pc.Op != "delete" {
		m["new"] = entryJSON(pc.New)
	}
	return m
}

// entryJSON renders a tree entry's mode and id.
func entryJSON(e objects.Entry) map[string]any {
	return map[string]any{"mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": e.ID.String()}
}

// diffFromParent lists the changes of cs against its first parent.
func diffFromParent(sn *core.Snapshot, id core.ID, cs *objects.Changeset) ([]core.PathChange, error) {
	if len(cs.Parents) > 0 {
		return sn.Diff(cs.Parents[0], id)
	}
	flat, err := sn.Flatten(id)
	if err != nil {
		return nil, err
	}
	out := make([]core.PathChange, 0, len(flat))
	for p, e := range flat {
		out = append(out, core.PathChange{Path: p, Op: "add", New: e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
