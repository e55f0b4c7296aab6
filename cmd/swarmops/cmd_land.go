package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// landCmd is `swarmops land`: apply a change onto a ref's head and move the ref.
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
with parents [head, CHANGE] moves REF. A text file both sides changed is
merged by lines (as git merge-file does); edits of the same or adjacent
lines, and any other path both sides changed differently (binary, mode or
type, delete against edit), are E_CONFLICT with "paths" and, per path
merged by lines, its conflicting "hunks". When another writer moves REF first, only the
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
				if _, err := sn.Ref(onto); err != nil {
					return refNotFound(sn, onto, err)
				}
				if msg == "" {
					cs, err := sn.Changeset(change)
					if err != nil {
						return err
					}
					msg = core.LandMessage(args[0], onto, cs.Message)
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
	f.StringVarP(&msg, "message", "m", "", "message of the merge (default: \"land CHANGE onto REF: \" and CHANGE's subject)")
	f.IntVar(&maxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before E_BUSY (0: %d)", core.DefaultLandAttempts))
	return cmd
}
