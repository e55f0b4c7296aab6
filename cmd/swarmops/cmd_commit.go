package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// commitFlags are the flags of one `swarmops commit`.
type commitFlags struct {
	listFile, dir, agent, msg, advance string
	parents                            []string
}

// commitCmd is `swarmops commit`: record a changeset from a change list or a
// directory snapshot.
func (a *app) commitCmd() *cobra.Command {
	var c commitFlags
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
			if err := c.check(); err != nil {
				return err
			}
			// The change list is read and checked before the store is
			// opened: a bad list writes nothing and needs no store.
			var changes []core.Change
			if c.listFile != "" {
				var err error
				if changes, err = a.readChangeList(c.listFile); err != nil {
					return err
				}
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				return a.commit(s, sn, c, changes)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&c.listFile, "changes", "F", "", "change list file (\"-\" = stdin)")
	f.StringVar(&c.dir, "dir", "", "snapshot this directory (diffed against the first parent)")
	f.StringArrayVar(&c.parents, "parent", nil, "parent revision (repeatable; the first is the diff base)")
	f.StringVar(&c.agent, "agent", "", "agent name recorded in the changeset")
	f.StringVarP(&c.msg, "message", "m", "", "message")
	f.StringVar(&c.advance, "advance", "", "move this ref to the new changeset in the same transaction")
	return cmd
}

// check refuses flags that can never make a commit, before anything is read.
func (c commitFlags) check() error {
	if (c.listFile == "") == (c.dir == "") {
		return usagef("commit: give exactly one of -F/--changes FILE and --dir DIR")
	}
	for _, p := range c.parents {
		if err := checkRev(p); err != nil {
			return usagef("--parent: %w", err)
		}
	}
	if c.advance != "" {
		if err := checkRefName(c.advance); err != nil {
			return usagef("--advance: %w", err)
		}
	}
	return nil
}

// readChangeList reads, parses and loads a change list ("-" is stdin).
func (a *app) readChangeList(name string) ([]core.Change, error) {
	var src []byte
	var err error
	if name == "-" {
		src, err = io.ReadAll(a.stdin)
	} else {
		src, err = os.ReadFile(a.path(name))
	}
	if err != nil {
		return nil, usagef("change list: %w", err)
	}
	parsed, err := parseChanges(name, src)
	if err != nil {
		return nil, usagef("%w", err)
	}
	return loadChanges(name, parsed, func(p string) ([]byte, error) { return os.ReadFile(a.path(p)) })
}

// commit resolves the parents, snapshots --dir if given, and commits.
// Without --parent, --advance REF takes REF's value as the first parent, or
// none when REF does not exist yet.
func (a *app) commit(s *core.Store, sn *core.Snapshot, c commitFlags, changes []core.Change) error {
	var ps []core.ID
	for _, p := range c.parents {
		id, err := resolve(sn, p)
		if err != nil {
			return err
		}
		ps = append(ps, id)
	}
	if len(ps) == 0 && c.advance != "" {
		id, err := sn.Ref(c.advance)
		switch {
		case err == nil:
			ps = append(ps, id)
		case !errors.Is(err, core.ErrNotFound):
			return err
		}
	}
	if c.dir != "" {
		var err error
		if changes, err = snapshotDir(sn, a.path(c.dir), ps, a.storeDir()); err != nil {
			return err
		}
	}
	id, err := s.Commit(core.CommitRequest{Parents: ps, Changes: changes, Agent: c.agent, Message: c.msg, Advance: c.advance})
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	pstr := make([]string, len(ps))
	for i, p := range ps {
		pstr[i] = p.String()
	}
	a.ok(map[string]any{"id": id.String(), "parents": pstr, "changes": len(changes), "advanced": nullIfEmpty(c.advance)},
		lines(id.String()))
	return nil
}
