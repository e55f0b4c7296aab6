package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// snapshotDir lists the changes that turn the first parent's tree (empty
// without parents) into the contents of dir: every regular file is a put
// unless the parent holds the same bytes and mode, every parent path missing
// from dir is a delete. The store directory is skipped if it lies inside
// dir. Symlinks and special files are refused: the store holds regular
// files only, and silently skipping them would record a tree that is not
// the directory.
func snapshotDir(sn *core.Snapshot, dir string, parents []core.ID, storeDir string) ([]core.Change, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, usagef("--dir: %w", err)
	}
	if !st.IsDir() {
		return nil, usagef("--dir %q is a file where a directory is expected", dir)
	}
	old := map[string]objects.Entry{}
	if len(parents) > 0 {
		if old, err = sn.Flatten(parents[0]); err != nil {
			return nil, err
		}
	}
	skip, _ := filepath.Abs(storeDir)
	var changes []core.Change
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return usagef("--dir: %w", err)
		}
		if d.IsDir() {
			if abs, _ := filepath.Abs(p); abs == skip {
				return filepath.SkipDir
			}
			return nil
		}
		path, mode, data, err := readDirFile(dir, p, d)
		if err != nil {
			return err
		}
		seen[path] = true
		if e, ok := old[path]; ok && e.Mode == mode {
			prev, err := sn.Blob(e.ID)
			if err != nil {
				return err
			}
			if bytes.Equal(prev, data) {
				return nil
			}
		}
		changes = append(changes, core.Change{Path: path, Data: data, Mode: mode})
		return nil
	})
	if err != nil {
		var ce *cliError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fmt.Errorf("--dir %q: %w", dir, err)
	}
	var dels []string
	for p := range old {
		if !seen[p] {
			dels = append(dels, p)
		}
	}
	sort.Strings(dels)
	for _, p := range dels {
		changes = append(changes, core.Change{Path: p, Delete: true})
	}
	return changes, nil
}

// readDirFile reads the file p found at d while walking dir: its store path
// (relative to dir, slash-separated and checked), its mode (executable if
// any x bit is set) and its bytes. Anything but a regular file is refused.
func readDirFile(dir, p string, d fs.DirEntry) (string, objects.Mode, []byte, error) {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return "", 0, nil, usagef("--dir: %w", err)
	}
	path := filepath.ToSlash(rel)
	if !d.Type().IsRegular() {
		return "", 0, nil, usagef("--dir: %q is not a regular file (symlinks and special files are not stored)", path)
	}
	if err := checkPath(path); err != nil {
		return "", 0, nil, usagef("--dir: %w", err)
	}
	info, err := d.Info()
	if err != nil {
		return "", 0, nil, usagef("--dir: %w", err)
	}
	mode := objects.ModeFile
	if info.Mode().Perm()&0o111 != 0 {
		mode = objects.ModeExec
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", 0, nil, usagef("--dir: %w", err)
	}
	return path, mode, data, nil
}
