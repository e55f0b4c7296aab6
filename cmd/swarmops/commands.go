package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// rootCmd builds the command tree for one invocation.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "swarmops",
		Short:         "A crash-safe changeset store shared by many agent processes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.help(cmd)
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeFlag, "store", "", "store directory (default: $SWARMOPS_STORE, else ./.swarmops)")
	pf.BoolVar(&a.jsonFlag, "json", false, "print one JSON envelope on stdout (also SWARMOPS_JSON=1)")
	pf.DurationVar(&a.lockTimeout, "lock-timeout", 10*time.Second, "how long to wait for the writer lock before E_BUSY")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%s: %w", c.CommandPath(), err)
	})
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { a.help(c) })
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Show usage and the error table",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usagef("help: unknown command %q", strings.Join(args, " "))
			}
			a.help(target)
			return nil
		},
	})
	root.AddCommand(a.initCmd(), a.commitCmd(), a.landCmd(), a.refCmd(), a.logCmd(),
		a.showCmd(), a.catCmd(), a.lsCmd(), a.diffCmd(), a.checkoutCmd(), a.infoCmd(),
		a.verifyCmd(), a.recoverCmd())
	return root
}

// help records the usage of c (and, for the root, the error table) as the
// command's result, so --json gets it in the envelope too.
func (a *app) help(c *cobra.Command) {
	usage := c.UsageString()
	if c.Long != "" {
		usage = c.Long + "\n\n" + usage
	}
	data := map[string]any{"command": c.CommandPath(), "usage": usage}
	if !c.HasParent() {
		data["errors"] = errorTable()
	}
	a.ok(data, func(w io.Writer) {
		fmt.Fprint(w, usage)
		if !c.HasParent() {
			fmt.Fprintln(w, "\nErrors (code, exit status, retryable):")
			writeErrorTable(w)
			fmt.Fprintln(w, "\nThe change-list format, the JSON envelope and every command: docs/cli.md.")
		}
	})
}

func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create an empty store (in --store, $SWARMOPS_STORE or ./.swarmops)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			o, err := a.options()
			if err != nil {
				return err
			}
			dir := a.storeDir()
			s, err := core.Create(dir, o)
			if err != nil {
				return fmt.Errorf("init %q: %w", dir, err)
			}
			if err := s.Close(); err != nil {
				return err
			}
			a.ok(map[string]any{"store": dir}, lines("initialized an empty store in "+dir))
			return nil
		}),
	}
}

// resolve checks a revision's syntax, then resolves it.
func resolve(sn *core.Snapshot, rev string) (core.ID, error) {
	if err := checkRev(rev); err != nil {
		return core.ID{}, usagef("%w", err)
	}
	id, err := sn.Resolve(rev)
	if err != nil {
		return core.ID{}, fmt.Errorf("revision %q: %w", rev, err)
	}
	return id, nil
}

func (a *app) commitCmd() *cobra.Command {
	var (
		listFile, dir, agent, msg, advance string
		parents                            []string
	)
	cmd := &cobra.Command{
		Use:   "commit (-F FILE | --dir DIR) [--parent REV]... [--advance REF] [--agent NAME] [-m MSG]",
		Short: "Record a changeset from a change list or a directory snapshot; prints its id",
		Long: `Record a changeset. The changes come from a change list (-F FILE, "-" for
stdin; the format is in docs/cli.md) or from a directory snapshot (--dir DIR,
diffed against the first parent). --advance REF moves REF to the new
changeset in the same journal frame (compare-and-swap against the first
parent); without --parent, the first parent is REF's current value.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if (listFile == "") == (dir == "") {
				return usagef("commit: give exactly one of -F/--changes FILE and --dir DIR")
			}
			for _, p := range parents {
				if err := checkRev(p); err != nil {
					return usagef("--parent: %w", err)
				}
			}
			if advance != "" {
				if err := checkRefName(advance); err != nil {
					return usagef("--advance: %w", err)
				}
			}
			// The change list is read and checked before the store is
			// opened: a bad list writes nothing and needs no store.
			var changes []core.Change
			if listFile != "" {
				var src []byte
				var err error
				if listFile == "-" {
					src, err = io.ReadAll(a.stdin)
				} else {
					src, err = os.ReadFile(listFile)
				}
				if err != nil {
					return usagef("change list: %w", err)
				}
				parsed, err := parseChanges(listFile, src)
				if err != nil {
					return usagef("%w", err)
				}
				if changes, err = loadChanges(listFile, parsed, os.ReadFile); err != nil {
					return err
				}
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				var ps []core.ID
				for _, p := range parents {
					id, err := resolve(sn, p)
					if err != nil {
						return err
					}
					ps = append(ps, id)
				}
				if len(ps) == 0 && advance != "" {
					id, err := sn.Ref(advance)
					switch {
					case err == nil:
						ps = append(ps, id)
					case !errors.Is(err, core.ErrNotFound):
						return err
					}
				}
				if dir != "" {
					var err error
					if changes, err = snapshotDir(sn, dir, ps, a.storeDir()); err != nil {
						return err
					}
				}
				id, err := s.Commit(core.CommitRequest{Parents: ps, Changes: changes, Agent: agent, Message: msg, Advance: advance})
				if err != nil {
					return fmt.Errorf("commit: %w", err)
				}
				pstr := make([]string, len(ps))
				for i, p := range ps {
					pstr[i] = p.String()
				}
				a.ok(map[string]any{"id": id.String(), "parents": pstr, "changes": len(changes), "advanced": nullIfEmpty(advance)},
					lines(id.String()))
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&listFile, "changes", "F", "", "change list file (\"-\" = stdin)")
	f.StringVar(&dir, "dir", "", "snapshot this directory (diffed against the first parent)")
	f.StringArrayVar(&parents, "parent", nil, "parent revision (repeatable; the first is the diff base)")
	f.StringVar(&agent, "agent", "", "agent name recorded in the changeset")
	f.StringVarP(&msg, "message", "m", "", "message")
	f.StringVar(&advance, "advance", "", "move this ref to the new changeset in the same transaction")
	return cmd
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (a *app) landCmd() *cobra.Command {
	var (
		onto, agent, msg string
		maxAttempts      int
	)
	cmd := &cobra.Command{
		Use:   "land CHANGE --onto REF",
		Short: "Merge CHANGE's changes onto the head of REF (3-way, idempotent)",
		Long: `Land CHANGE onto REF. If REF's first-parent history already holds CHANGE's
delta hash, nothing happens ("noop": true). If REF's head is CHANGE's first
parent, REF is fast-forwarded to CHANGE. Otherwise CHANGE is merged three
ways onto the head against their nearest common ancestor and one changeset
with parents [head, CHANGE] moves REF. A path both sides changed differently
is E_CONFLICT listing "paths". When another writer moves REF first, only the
paths REF gained are re-merged ("remerged" counts them per retry), up to
--max-attempts; running out is E_BUSY.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if onto == "" {
				return usagef("land: --onto REF is required")
			}
			if err := checkRefName(onto); err != nil {
				return usagef("--onto: %w", err)
			}
			if maxAttempts < 0 {
				return usagef("--max-attempts %d: want 0 (default) or more", maxAttempts)
			}
			if err := landPauseHook(a.getenv); err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				change, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				r, err := s.Land(change, onto, core.LandOptions{MaxAttempts: maxAttempts, Agent: agent, Message: msg})
				if err != nil {
					return err
				}
				remerged := r.Remerged
				if remerged == nil {
					remerged = []int{}
				}
				data := map[string]any{"change": change.String(), "onto": onto, "changeset": r.Changeset.String(),
					"noop": r.NoOp, "attempts": r.Attempts, "remerged": remerged}
				text := fmt.Sprintf("landed %s onto %s: %s (attempts %d)", short(change), onto, r.Changeset, r.Attempts)
				switch {
				case r.NoOp:
					text = fmt.Sprintf("%s is already on %s: nothing to do (head %s)", short(change), onto, r.Changeset)
				case r.Changeset == change:
					text = fmt.Sprintf("fast-forwarded %s to %s", onto, change)
				}
				a.ok(data, lines(text))
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&onto, "onto", "", "target ref")
	f.StringVar(&agent, "agent", "", "agent recorded in the merge (default: CHANGE's)")
	f.StringVarP(&msg, "message", "m", "", "message of the merge")
	f.IntVar(&maxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before E_BUSY (0: %d)", core.DefaultLandAttempts))
	return cmd
}

func short(id core.ID) string { return id.String()[:12] }

func (a *app) refCmd() *cobra.Command {
	ref := &cobra.Command{
		Use:   "ref (get|set|create|delete|list|log)",
		Short: "Read and move refs (every move is a compare-and-swap)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return usagef("ref: give a subcommand: get, set, create, delete, list or log")
		}),
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Print the changeset a ref points to",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkRefName(args[0]); err != nil {
				return usagef("%w", err)
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := sn.Ref(args[0])
				if err != nil {
					return fmt.Errorf("ref %q: %w", args[0], err)
				}
				a.ok(map[string]any{"name": args[0], "id": id.String()}, lines(id.String()))
				return nil
			})
		}),
	}
	var expect string
	set := &cobra.Command{
		Use:   "set NAME NEW --expect OLD",
		Short: "Move a ref from OLD to NEW; E_CONFLICT with \"current\" if it is not at OLD",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("expect") {
				return usagef("ref set: --expect OLD is required (use ref create for a new ref)")
			}
			return a.refUpdate("set", args[0], expect, args[1])
		}),
	}
	set.Flags().StringVar(&expect, "expect", "", "the value the ref must have now")
	create := &cobra.Command{
		Use:   "create NAME REV",
		Short: "Create a ref; E_CONFLICT if it exists",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.refUpdate("create", args[0], "", args[1])
		}),
	}
	var expectDel string
	del := &cobra.Command{
		Use:   "delete NAME [--expect OLD]",
		Short: "Delete a ref (at OLD if given, else at the value read now)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.refUpdate("delete", args[0], expectDel, "")
		}),
	}
	del.Flags().StringVar(&expectDel, "expect", "", "the value the ref must have now")
	list := &cobra.Command{
		Use:   "list",
		Short: "List every ref",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				refs, err := sn.Refs()
				if err != nil {
					return err
				}
				out := make([]map[string]any, len(refs))
				for i, r := range refs {
					out[i] = map[string]any{"name": r.Name, "id": r.ID.String()}
				}
				a.ok(out, func(w io.Writer) {
					for _, r := range refs {
						fmt.Fprintf(w, "%s %s\n", r.ID, r.Name)
					}
				})
				return nil
			})
		}),
	}
	log := &cobra.Command{
		Use:   "log NAME",
		Short: "List a ref's moves (its reflog), oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkRefName(args[0]); err != nil {
				return usagef("%w", err)
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				entries, err := sn.RefLog(args[0])
				if err != nil {
					return fmt.Errorf("ref %q: %w", args[0], err)
				}
				out := make([]map[string]any, len(entries))
				for i, e := range entries {
					out[i] = map[string]any{"seq": e.Seq, "old": idOrNull(e.Old), "new": idOrNull(e.New), "time": fmtTime(e.Time)}
				}
				a.ok(out, func(w io.Writer) {
					for _, e := range entries {
						fmt.Fprintf(w, "%d %s %s -> %s\n", e.Seq, fmtTime(e.Time), idText(e.Old), idText(e.New))
					}
				})
				return nil
			})
		}),
	}
	ref.AddCommand(get, set, create, del, list, log)
	return ref
}

func idText(id core.ID) string {
	if id.IsZero() {
		return "(none)"
	}
	return id.String()
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// refUpdate performs ref set/create/delete. oldRev "" means: absent for
// create, the current value for delete.
func (a *app) refUpdate(verb, name, oldRev, newRev string) error {
	if err := checkRefName(name); err != nil {
		return usagef("%w", err)
	}
	for _, r := range []string{oldRev, newRev} {
		if r != "" {
			if err := checkRev(r); err != nil {
				return usagef("%w", err)
			}
		}
	}
	return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
		var u core.RefUpdate
		u.Name = name
		var err error
		if newRev != "" {
			if u.New, err = resolve(sn, newRev); err != nil {
				return err
			}
		}
		switch {
		case oldRev != "":
			if u.Old, err = resolve(sn, oldRev); err != nil {
				return err
			}
		case verb == "delete":
			if u.Old, err = sn.Ref(name); err != nil {
				return fmt.Errorf("ref %q: %w", name, err)
			}
		}
		if err := s.UpdateRefs(u); err != nil {
			return fmt.Errorf("ref %s %q: %w", verb, name, err)
		}
		a.ok(map[string]any{"name": name, "old": idOrNull(u.Old), "new": idOrNull(u.New)},
			lines(fmt.Sprintf("%s: %s -> %s", name, idText(u.Old), idText(u.New))))
		return nil
	})
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

func writeChangeset(w io.Writer, id core.ID, cs *objects.Changeset) {
	fmt.Fprintf(w, "changeset %s\n", id)
	for _, p := range cs.Parents {
		fmt.Fprintf(w, "parent    %s\n", p)
	}
	fmt.Fprintf(w, "agent     %s\ntime      %s\ngen       %d\n\n    %s\n", cs.Agent, fmtTime(cs.Time), cs.Generation,
		strings.ReplaceAll(cs.Message, "\n", "\n    "))
}

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

func entryJSON(e objects.Entry) map[string]any {
	return map[string]any{"mode": fmt.Sprintf("%06o", uint32(e.Mode)), "id": e.ID.String()}
}

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
					return fmt.Errorf("%s:%s: %w", rev, path, err)
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
					return fmt.Errorf("%s:%s: %w", rev, path, err)
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

func entryType(m objects.Mode) string {
	switch m {
	case objects.ModeDir:
		return "dir"
	case objects.ModeExec:
		return "exec"
	}
	return "file"
}

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

func (a *app) checkoutCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "checkout REV DIR [--force]",
		Short: "Write a revision's tree into DIR (refuses a non-empty DIR without --force)",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if err := checkRev(args[0]); err != nil {
				return usagef("%w", err)
			}
			dir := args[1]
			if err := checkoutTarget(dir, force); err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				n, bytes, err := checkout(sn, id, dir, a.progress("checkout"))
				if err != nil {
					return err
				}
				a.ok(map[string]any{"changeset": id.String(), "dir": dir, "files": n, "bytes": bytes},
					lines(fmt.Sprintf("checked out %s into %s: %d files, %d bytes", short(id), dir, n, bytes)))
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "write into a non-empty directory, overwriting files")
	return cmd
}

func (a *app) infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Counts, the durable position and the last checkpoint",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				in, err := s.Info()
				if err != nil {
					return err
				}
				data := map[string]any{"store": a.storeDir(), "changesets": in.Changesets, "objects": in.Objects,
					"loose_objects": in.LooseObjects, "refs": in.Refs, "journal_bytes": in.JournalBytes,
					"segments": in.Segments, "durable_seq": in.DurableSeq, "durable_offset": in.DurableOffset,
					"checkpoint_seq": in.CheckpointSeq}
				a.ok(data, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
					fmt.Fprintf(tw, "store:\t%s\nchangesets:\t%d\nobjects:\t%d (%d loose)\nrefs:\t%d\njournal:\t%d bytes in %d segments\ndurable:\tseq %d, offset %d\ncheckpoint:\tseq %d\n",
						a.storeDir(), in.Changesets, in.Objects, in.LooseObjects, in.Refs, in.JournalBytes, in.Segments,
						in.DurableSeq, in.DurableOffset, in.CheckpointSeq)
					tw.Flush()
				})
				return nil
			})
		}),
	}
}

// problemsJSON renders verification problems.
func problemsJSON(ps []core.VerifyProblem) []map[string]any {
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		out[i] = map[string]any{"file": p.File, "offset": p.Offset, "object": p.Object, "reason": p.Reason}
	}
	return out
}

func (a *app) verifyCmd() *cobra.Command {
	var deep bool
	cmd := &cobra.Command{
		Use:   "verify [--deep]",
		Short: "Check frames (and with --deep every object's hash); E_CORRUPT lists problems",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				var prog func(done, total int)
				if deep {
					prog = a.progress("verify")
				}
				r, err := s.Verify(deep, prog)
				if err != nil {
					return err
				}
				if len(r.Problems) > 0 {
					a.fail = &cliError{kind: kindCorrupt,
						err:   fmt.Errorf("verify found %d problems in %d frames and %d objects", len(r.Problems), r.Frames, r.Objects),
						extra: map[string]any{"problems": problemsJSON(r.Problems)}}
					return nil
				}
				a.ok(map[string]any{"deep": deep, "frames": r.Frames, "objects": r.Objects, "problems": []any{}},
					lines(fmt.Sprintf("ok: %d frames, %d objects checked", r.Frames, r.Objects)))
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&deep, "deep", false, "also read every object and check its hash")
	return cmd
}

func (a *app) recoverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "recover",
		Short: "Repair a torn journal tail and report; exit 0 clean, E_REPAIRED cut, E_CORRUPT corrupt",
		Long: `Open the store with repair and report what was done. The exit status says
which case it was: 0 (E_* none) when there was nothing to repair, 12
(E_REPAIRED) when a torn tail of unacknowledged bytes was cut, 6 (E_CORRUPT)
when corruption was found inside the acknowledged prefix (nothing is cut then:
the store fails closed).`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			o, err := a.options()
			if err != nil {
				return err
			}
			dir := a.storeDir()
			r, err := core.Recover(dir, o)
			if err != nil {
				return fmt.Errorf("recover %q: %w", dir, err)
			}
			extra := map[string]any{"torn_bytes_cut": r.TornBytesCut, "frames_replayed": r.FramesReplayed,
				"corrupt": problemsJSON(r.Corrupt)}
			switch {
			case len(r.Corrupt) > 0:
				a.fail = &cliError{kind: kindCorrupt, err: fmt.Errorf("recover found %d corrupt places; nothing was cut", len(r.Corrupt)), extra: extra}
			case r.TornBytesCut > 0:
				a.fail = &cliError{kind: kindRepaired, err: fmt.Errorf("recover cut a torn tail of %d bytes; %d frames replayed; the store is consistent", r.TornBytesCut, r.FramesReplayed), extra: extra}
			default:
				a.ok(extra, lines(fmt.Sprintf("nothing to repair: %d frames replayed", r.FramesReplayed)))
			}
			return nil
		}),
	}
}

// checkoutTarget refuses a DIR that is a file, or non-empty without force.
func checkoutTarget(dir string, force bool) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return usagef("checkout: %w", err)
	case !st.IsDir():
		return usagef("checkout: %q is a file where a directory is expected", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return usagef("checkout: %w", err)
	}
	if len(ents) > 0 && !force {
		return usagef("checkout: %q is not empty (use --force to write into it)", dir)
	}
	return nil
}

// checkout writes every file of id's tree under dir.
func checkout(sn *core.Snapshot, id core.ID, dir string, progress func(done, total int)) (int, int64, error) {
	flat, err := sn.Flatten(id)
	if err != nil {
		return 0, 0, err
	}
	paths := make([]string, 0, len(flat))
	for p := range flat {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var total int64
	for i, p := range paths {
		e := flat[p]
		data, err := sn.Blob(e.ID)
		if err != nil {
			return i, total, fmt.Errorf("checkout %q: %w", p, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return i, total, fmt.Errorf("%w: checkout %q: %w", core.ErrIO, p, err)
		}
		perm := os.FileMode(0o644)
		if e.Mode == objects.ModeExec {
			perm = 0o755
		}
		if err := os.WriteFile(dst, data, perm); err != nil {
			return i, total, fmt.Errorf("%w: checkout %q: %w", core.ErrIO, p, err)
		}
		if err := os.Chmod(dst, perm); err != nil {
			return i, total, fmt.Errorf("%w: checkout %q: %w", core.ErrIO, p, err)
		}
		total += int64(len(data))
		if progress != nil {
			progress(i+1, len(paths))
		}
	}
	return len(paths), total, nil
}
