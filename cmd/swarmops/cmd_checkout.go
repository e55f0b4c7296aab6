package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// checkoutCmd is `swarmops checkout`: write a tree into a directory.
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
			if err := checkoutTarget(a.path(dir), force); err != nil {
				return err
			}
			return a.withStore(func(s *core.Store, sn *core.Snapshot) error {
				id, err := resolve(sn, args[0])
				if err != nil {
					return err
				}
				n, bytes, err := checkout(sn, id, a.path(dir), a.progress("checkout"))
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
