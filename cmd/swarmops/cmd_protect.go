package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// refProtectCmd is `swarmops ref protect` (on) and `ref unprotect` (off):
// set or clear a protection pattern, so that only land moves the refs it
// matches.
func (a *app) refProtectCmd(on bool) *cobra.Command {
	use, short := "protect NAME|PREFIX/", "Let only land move NAME, or every ref under PREFIX/ (E_PROTECTED otherwise)"
	if !on {
		use, short = "unprotect NAME|PREFIX/", "Clear a protection set by ref protect"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

A pattern is a ref name (main) or a prefix ending in "/" (release/). While
it is set, ref set, ref delete, commit --advance, undo and import refuse to
move an existing ref it matches, with E_PROTECTED; land moves it as before.
A matching ref that does not exist yet may still be created. The pattern
is recorded in the store's journal, so it holds for every client and
survives a crash once the command has succeeded.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			pat := args[0]
			if err := checkRefName(strings.TrimSuffix(pat, "/")); err != nil {
				return usagef("%w", err)
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				if !on {
					if err := isProtected(sn, pat); err != nil {
						return err
					}
				}
				if err := s.Protect(pat, on); err != nil {
					return fmt.Errorf("ref %s %q: %w", cmd.Name(), pat, err)
				}
				verb := "protected"
				if !on {
					verb = "unprotected"
				}
				a.ok(map[string]any{"pattern": pat, "protected": on}, lines(verb+" "+pat))
				return nil
			})
		}),
	}
}

// isProtected returns an E_NOT_FOUND error unless pat is protected.
func isProtected(sn *core.Snapshot, pat string) error {
	ps, err := sn.Protected()
	if err != nil {
		return err
	}
	var names []string
	for _, p := range ps {
		if p.Pattern == pat {
			return nil
		}
		names = append(names, p.Pattern)
	}
	return &notFoundError{field: "pattern", name: pat, similar: names, err: core.ErrNotFound,
		reason: fmt.Sprintf("%q is not protected", pat)}
}

// listProtected prints the protected patterns (`ref list --protected`),
// those starting with prefix if it is not empty.
func (a *app) listProtected(sn *core.Snapshot, prefix string) error {
	ps, err := sn.Protected()
	if err != nil {
		return err
	}
	var shown []core.Protection
	for _, p := range ps {
		if strings.HasPrefix(p.Pattern, prefix) {
			shown = append(shown, p)
		}
	}
	okEach(a, shown, func(p core.Protection) map[string]any {
		return map[string]any{"pattern": p.Pattern, "seq": p.Seq}
	}, func(p core.Protection) string { return p.Pattern })
	return nil
}
