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
	cmd := &cobra.Command{
		Use:   "log [-n N] [REV]",
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
	return cmd
}

// showCmd is `swarmops show`: one changeset and its changes.
func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show REV",
		Short: "Show a changeset and its changes against its first parent",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
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
				data := changesetJSON(id, cs)
				ch := make([]map[string]any, len(pcs))
				for i, pc := range pcs {
					ch[i] = pathChangeJSON(pc)
				}
				data["changes"] = ch
				a.ok(data, func(w io.Writer) {
					writeChangeset(w, id, cs)
					fmt.Fprintln(w)
					writeDiff(w, pcs)
				})
				return nil
			})
		}),
	}
}

// catCmd is `swarmops cat`: one file's bytes.
func (a *app) catCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cat REV:PATH",
		Short: "Print a file's content at a revision",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			rev, path, err := revPath(args[0], true)
			if err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, rev)
				if err != nil {
					return err
				}
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
		}),
	}
}

// lsCmd is `swarmops ls`: one directory of a tree.
func (a *app) lsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls REV[:PATH]",
		Short: "List a directory of a revision's tree",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			rev, path, err := revPath(args[0], false)
			if err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, rev)
				if err != nil {
					return err
				}
				ents, err := sn.ListPath(id, path)
				if err != nil {
					return pathNotFound(rev, path, err)
				}
				out := make([]map[string]any, len(ents))
				for i, e := range ents {
					out[i] = map[string]any{"name": e.Name, "mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": e.ID.String(), "type": entryType(e.Mode)}
				}
				a.ok(out, func(w io.Writer) {
					for _, e := range ents {
						suffix := ""
						if e.Mode == objects.ModeDir {
							suffix = "/"
						}
						fmt.Fprintf(w, "%06o %s %s%s\n", uint32(e.Mode), e.ID, e.Name, suffix)
					}
				})
				return nil
			})
		}),
	}
}

// entryType names a mode for JSON: file, exec or dir.
func entryType(m objects.Mode) string {
	switch m {
	case objects.ModeDir:
		return "dir"
	case objects.ModeExec:
		return "exec"
	}
	return "file"
}

// diffCmd is `swarmops diff`: the path changes between two revisions.
func (a *app) diffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "List the path changes from revision A to revision B",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
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
				out := make([]map[string]any, len(pcs))
				for i, pc := range pcs {
					out[i] = pathChangeJSON(pc)
				}
				a.ok(out, func(w io.Writer) { writeDiff(w, pcs) })
				return nil
			})
		}),
	}
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

// writeDiff prints path changes as A/M/D lines.
func writeDiff(w io.Writer, pcs []core.PathChange) {
	for _, pc := range pcs {
		fmt.Fprintf(w, "%s %s\n", map[string]string{"add": "A", "modify": "M", "delete": "D"}[pc.Op], pc.Path)
	}
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
