package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/mergequeue"
)

// landLong is land's help.
const landLong = `Land CHANGE onto REF. If REF's first-parent history already holds CHANGE's
delta hash, nothing happens ("noop": true). If REF's head is CHANGE's first
parent, REF is fast-forwarded to CHANGE. Otherwise CHANGE is merged three
ways onto the head against their nearest common ancestor and one changeset
with parents [head, CHANGE] moves REF. A text file both sides changed is
merged by lines (as git merge-file does); edits of the same or adjacent
lines, and any other path both sides changed differently (binary, mode or
type, delete against edit), are E_CONFLICT with "paths" and, per path
merged by lines, its conflicting "hunks". When another writer moves REF first, only the
paths REF gained are re-merged ("remerged" counts them per retry), up to
--max-attempts; running out is E_BUSY.

With --check CMD the land goes through REF's merge queue and REF moves
only to a tree CMD passed on: CMD runs with sh -c in a scratch work tree
holding the merged tree (exit 0 passes; --check-timeout bounds it). Lands
queued together from any number of processes are stacked and checked as
one batch; in a failing batch a binary search finds the first change
that makes it fail, which is ejected: E_CHECK_FAILED with "exit_status", "timed_out" and "output"
(its last 64 KiB). A change that conflicts with what is ahead of it in
the batch is E_CONFLICT. A land that passes reports "batch" (how many
landed in the frame that landed it) and "checks" (how many checks the
batch's runner had run by then).`

// gateOptions are land --check's options, nil without --check; a
// malformed timeout, or a timeout without a check, is E_USAGE.
func gateOptions(cmd *cobra.Command, check, timeout, agent string) (*mergequeue.Options, error) {
	if check == "" {
		if cmd.Flags().Changed("check") || cmd.Flags().Changed("check-timeout") {
			return nil, usagef("--check: want a command (--check-timeout needs --check)")
		}
		return nil, nil
	}
	d, err := time.ParseDuration(timeout)
	if err != nil || d < 0 {
		return nil, usagef("--check-timeout %q: want a duration such as 90s or 10m (0: none)", timeout)
	}
	return &mergequeue.Options{Check: check, Timeout: d, Agent: agent}, nil
}

// landCmd is `swarmops land`: apply a change onto a ref's head and move the ref.
func (a *app) landCmd() *cobra.Command {
	var (
		onto, agent, msg string
		check, timeout   string
		maxAttempts      int
	)
	cmd := &cobra.Command{
		Use:   "land CHANGE --onto REF",
		Short: "Merge CHANGE's changes onto the head of REF (3-way, idempotent)",
		Long:  landLong,
		Args:  cobra.ExactArgs(1),
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
			gate, err := gateOptions(cmd, check, timeout, agent)
			if err != nil {
				return err
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
				if gate != nil {
					return a.gatedLand(s, change, onto, *gate)
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
	f.StringVar(&check, "check", "", "land through REF's merge queue: publish only a tree this command (sh -c, in a scratch work tree) passes on")
	f.StringVar(&timeout, "check-timeout", "10m", "bound on each run of the check (0: none)")
	f.IntVar(&maxAttempts, "max-attempts", 0, fmt.Sprintf("attempts before E_BUSY (0: %d)", core.DefaultLandAttempts))
	return cmd
}

// gatedLand is land --check: the change goes through onto's merge queue
// (package mergequeue) and is reported as a land is, with the batch.
func (a *app) gatedLand(s *core.Store, change core.ID, onto string, o mergequeue.Options) error {
	r, err := mergequeue.Land(s, change, onto, o)
	if err != nil {
		return err
	}
	data := map[string]any{"change": change.String(), "onto": onto, "changeset": r.Changeset.String(),
		"head": r.Head.String(), "noop": r.NoOp, "batch": r.Batch, "checks": r.Checks}
	text := fmt.Sprintf("landed %s onto %s: %s (checked in a batch of %d, %d checks)", short(change), onto, r.Changeset, r.Batch, r.Checks)
	if r.NoOp {
		text = fmt.Sprintf("%s is already on %s: nothing to do (head %s)", short(change), onto, r.Head)
	}
	a.ok(data, lines(text))
	return nil
}
