package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// refCmd is `swarmops ref` and its subcommands; every move is a
// compare-and-swap.
func (a *app) refCmd() *cobra.Command {
	return groupCmd("ref (get|set|create|delete|list|log|protect|unprotect)", "Read and move refs (every move is a compare-and-swap)",
		"get, set, create, delete, list, log, protect or unprotect",
		a.refGetCmd(), a.refSetCmd(), a.refCreateCmd(), a.refDeleteCmd(), a.refListCmd(), a.refLogCmd(),
		a.refProtectCmd(true), a.refProtectCmd(false))
}

// refGetCmd is `swarmops ref get`: one ref's value.
func (a *app) refGetCmd() *cobra.Command {
	return refReadCmd(a, "get NAME", "Print the changeset a ref points to", (*core.Snapshot).Ref, func(name string, id core.ID) {
		a.ok(map[string]any{"name": name, "id": id.String()}, lines(id.String()))
	})
}

// refReadCmd is ref get or ref log: a command whose one argument is a ref
// name, that reads, in a snapshot, what read gives for the ref and shows
// it. A bad name is E_USAGE, before the store is opened; a ref that does
// not exist is E_NOT_FOUND with the similar names as a hint.
func refReadCmd[T any](a *app, use, short string, read func(*core.Snapshot, string) (T, error), show func(name string, v T)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkRefName(name); err != nil {
				return usagef("%w", err)
			}
			return a.withStore(func(_ *core.Store, sn *core.Snapshot) error {
				v, err := read(sn, name)
				if err != nil {
					return refNotFound(sn, name, err)
				}
				show(name, v)
				return nil
			})
		}),
	}
}

// refSetCmd is `swarmops ref set`: a compare-and-swap from --expect to NEW.
func (a *app) refSetCmd() *cobra.Command {
	var expect, agent string
	set := &cobra.Command{
		Use:   "set NAME NEW --expect OLD [--agent NAME]",
		Short: "Move a ref from OLD to NEW; E_CONFLICT with \"current\" if it is not at OLD",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("expect") {
				return usagef("ref set: --expect OLD is required (use ref create for a new ref)")
			}
			agent, err := a.agentFlag(cmd, agent)
			if err != nil {
				return err
			}
			return a.refUpdate("set", args[0], expect, args[1], agent)
		}),
	}
	set.Flags().StringVar(&expect, "expect", "", "the value the ref must have now")
	agentFlagVar(set, &agent)
	return set
}

// refCreateCmd is `swarmops ref create`: a compare-and-swap from absent.
func (a *app) refCreateCmd() *cobra.Command {
	var agent string
	create := &cobra.Command{
		Use:   "create NAME REV [--agent NAME]",
		Short: "Create a ref; E_CONFLICT if it exists",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			agent, err := a.agentFlag(cmd, agent)
			if err != nil {
				return err
			}
			return a.refUpdate("create", args[0], "", args[1], agent)
		}),
	}
	agentFlagVar(create, &agent)
	return create
}

// refDeleteCmd is `swarmops ref delete`: a compare-and-swap to absent.
func (a *app) refDeleteCmd() *cobra.Command {
	var expect, agent string
	del := &cobra.Command{
		Use:   "delete NAME [--expect OLD] [--agent NAME]",
		Short: "Delete a ref (at OLD if given, else at the value read now)",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			agent, err := a.agentFlag(cmd, agent)
			if err != nil {
				return err
			}
			return a.refUpdate("delete", args[0], expect, "", agent)
		}),
	}
	del.Flags().StringVar(&expect, "expect", "", "the value the ref must have now")
	agentFlagVar(del, &agent)
	return del
}

// refListCmd is `swarmops ref list`: every ref, sorted by name.
func (a *app) refListCmd() *cobra.Command {
	var protected bool
	list := &cobra.Command{
		Use:   "list [PREFIX] [--protected]",
		Short: "List every ref, or those whose name starts with PREFIX (--protected: the protection patterns)",
		Args:  cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				if protected {
					return a.listProtected(sn, strings.Join(args, ""))
				}
				all, err := sn.Refs()
				if err != nil {
					return err
				}
				refs := all[:0:0]
				for _, r := range all {
					if len(args) == 0 || strings.HasPrefix(r.Name, args[0]) {
						refs = append(refs, r)
					}
				}
				okEach(a, refs, func(r core.RefEntry) map[string]any {
					return map[string]any{"name": r.Name, "id": r.ID.String()}
				}, func(r core.RefEntry) string { return fmt.Sprintf("%s %s", r.ID, r.Name) })
				return nil
			})
		}),
	}
	list.Flags().BoolVar(&protected, "protected", false, "list the protection patterns (ref protect) instead of the refs")
	return list
}

// refLogCmd is `swarmops ref log`: a ref's moves, oldest first.
func (a *app) refLogCmd() *cobra.Command {
	return refReadCmd(a, "log NAME", "List a ref's moves (its reflog), oldest first", (*core.Snapshot).RefLog, func(_ string, entries []core.RefLogEntry) {
		okEach(a, entries, func(e core.RefLogEntry) map[string]any {
			return map[string]any{"seq": e.Seq, "old": idOrNull(e.Old), "new": idOrNull(e.New), "time": fmtTime(e.Time),
				"agent": e.Agent, "op": e.Op.String()}
		}, func(e core.RefLogEntry) string {
			return fmt.Sprintf("%d %s %s -> %s", e.Seq, fmtTime(e.Time), idText(e.Old), idText(e.New))
		})
	})
}

// agentFlagVar adds the --agent flag of a command that moves refs.
func agentFlagVar(cmd *cobra.Command, agent *string) {
	cmd.Flags().StringVar(agent, "agent", "", "agent recorded with the move in the operation log (default: $"+agentEnv+")")
}

// refOps is the operation each ref subcommand records.
var refOps = map[string]core.Op{"set": core.OpRefSet, "create": core.OpRefCreate, "delete": core.OpRefDelete}

// refUpdate performs ref set/create/delete, recorded as made by agent.
// oldRev "" means: absent for create, the current value for delete.
func (a *app) refUpdate(verb, name, oldRev, newRev, agent string) error {
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
				return refNotFound(sn, name, err)
			}
		}
		if err := s.UpdateRefsAs(core.Origin{Agent: agent, Op: refOps[verb]}, u); err != nil {
			return fmt.Errorf("ref %s %q: %w", verb, name, err)
		}
		a.ok(map[string]any{"name": name, "old": idOrNull(u.Old), "new": idOrNull(u.New)},
			lines(fmt.Sprintf("%s: %s -> %s", name, idText(u.Old), idText(u.New))))
		return nil
	})
}
