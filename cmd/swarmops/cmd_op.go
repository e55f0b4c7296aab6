package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// agentEnv names the agent of a command that records one when its --agent
// is not given.
const agentEnv = "SWARMOPS_AGENT"

// agentFlag returns the value of cmd's --agent, or $SWARMOPS_AGENT when the
// flag is not given. A name that is not UTF-8 or holds a control
// character is E_USAGE: it is recorded, and printed back by log and op
// log, where a newline or an escape sequence would forge lines or drive
// the reader's terminal.
func (a *app) agentFlag(cmd *cobra.Command, agent string) (string, error) {
	from := "--agent"
	if !cmd.Flags().Changed("agent") {
		agent, from = a.getenv(agentEnv), agentEnv
	}
	if !utf8.ValidString(agent) {
		return "", usagef("%s %q is not UTF-8", from, agent)
	}
	for _, r := range agent {
		if unicode.IsControl(r) {
			return "", usagef("%s %q holds the control character %U", from, agent, r)
		}
	}
	return agent, nil
}

// opCmd is `swarmops op`: the operation log.
func (a *app) opCmd() *cobra.Command {
	return groupCmd("op (log)", "The operation log: every ref move, with the agent and operation that made it",
		"log", a.opLogCmd())
}

// opLogCmd is `swarmops op log`: ref moves, newest first.
func (a *app) opLogCmd() *cobra.Command {
	var (
		agents, refs []string
		n            int
		from         uint64
		reverse      bool
	)
	cmd := &cobra.Command{
		Use:   "log [--agent A]... [--ref R]... [-n N] [--from SEQ] [--reverse]",
		Short: "List every ref move of the store, newest first, with agent, time, old and new values and operation",
		Long: `List the ref moves of the store, newest first (oldest first with --reverse):
each with its id (the journal sequence number of the frame that made it,
followed by :REF when that frame moved several refs), the time, the
operation (commit, ref-set, ref-create, ref-delete, land, undo, import, or
unknown for a move recorded before operations were), the agent, the ref and
its old and new values ("(none)": absent). An undo names the move it
reversed. --agent and --ref keep the moves of those agents or refs (each
repeatable), -n N the newest N of them, --from SEQ those after sequence
number SEQ. Any id can be given to 'swarmops undo'.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return usagef("op log: -n %d: want 0 (all) or more", n)
			}
			for _, r := range refs {
				if err := checkRefName(r); err != nil {
					return usagef("op log: --ref: %w", err)
				}
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				ms, err := sn.Moves(core.MoveQuery{After: from, Refs: refs, Agents: agents, Limit: n})
				if err != nil {
					return err
				}
				if !reverse {
					slices.Reverse(ms)
				}
				okEach(a, ms, moveJSON, moveText)
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&agents, "agent", nil, "only moves by this agent (repeatable)")
	f.StringArrayVar(&refs, "ref", nil, "only moves of this ref (repeatable)")
	f.IntVarP(&n, "n", "n", 0, "only the newest N moves (0: all)")
	f.Uint64Var(&from, "from", 0, "only moves after this sequence number")
	f.BoolVar(&reverse, "reverse", false, "oldest first")
	return cmd
}

// undoCmd is `swarmops undo`: reverse one ref move by compare-and-swap.
func (a *app) undoCmd() *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "undo OP [--agent NAME]",
		Short: "Reverse one ref move of the operation log by compare-and-swap; E_CONFLICT if the ref moved since",
		Long: `Reverse the ref move OP (an id from 'swarmops op log': SEQ, or SEQ:REF when
that frame moved several refs) by compare-and-swap: the ref goes from the
move's new value back to its old one; a ref the move created is deleted, one
it deleted is created again. The undo is itself a move, recorded as
operation undo naming OP, so it can be undone too. If the ref has moved
since OP (even away and back to the same value), nothing is written and the
undo fails with E_CONFLICT ("current": the ref's value; "moved_at": the
sequence number of its last move when the value is the same). --agent
(default $SWARMOPS_AGENT) names the agent recorded with the undo.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id, err := core.ParseOpID(args[0])
			if err != nil {
				return usagef("undo: %w", err)
			}
			agent, err := a.agentFlag(cmd, agent)
			if err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, _ *core.Snapshot) error {
				u, err := s.Undo(id, agent)
				if err != nil {
					return err
				}
				data := moveJSON(u)
				a.ok(data, lines(fmt.Sprintf("undid %s: %s %s -> %s (as %s)", undone(u), u.Ref, idText(u.Old), idText(u.New), u.ID())))
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent recorded with the undo (default: $"+agentEnv+")")
	return cmd
}

// undone names the move an undo reversed, in its full form: the undo knows
// the frame and the ref, not how many refs that frame moved.
func undone(m core.RefMove) string {
	return core.OpID{Seq: m.Undoes, Ref: m.Ref}.String()
}

// moveJSON renders a ref move for JSON: the fields op log, undo and watch
// print.
func moveJSON(m core.RefMove) map[string]any {
	out := map[string]any{"id": m.ID().String(), "seq": m.Seq, "ref": m.Ref, "old": idOrNull(m.Old), "new": idOrNull(m.New),
		"agent": m.Agent, "op": m.Op.String(), "time": fmtTime(m.Time), "undoes": nil}
	if m.Op == core.OpUndo {
		out["undoes"] = undone(m)
	}
	return out
}

// moveText renders a ref move as one line for a human.
func moveText(m core.RefMove) string {
	s := fmt.Sprintf("%s %s %s %s %s %s -> %s", m.ID(), fmtTime(m.Time), m.Op, agentText(m.Agent),
		m.Ref, shortOrNone(m.Old), shortOrNone(m.New))
	if m.Op == core.OpUndo {
		s += " (undoes " + undone(m) + ")"
	}
	return s
}

// agentText renders an agent for a line of text: "-" when there is none,
// quoted when it holds a space or a byte a terminal would not show as it is.
func agentText(a string) string {
	switch {
	case a == "":
		return "-"
	case !utf8.ValidString(a) || strings.IndexFunc(a, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0:
		return strconv.Quote(a)
	}
	return a
}

// shortOrNone is the 12-digit form of an id, "(none)" when absent.
func shortOrNone(id core.ID) string {
	if id.IsZero() {
		return "(none)"
	}
	return short(id)
}
