package worktree

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"

	"github.com/swarmops/swarmops/core/objects"
)

// MetaDir is the name of a work tree's metadata directory, directly in the
// tree's root. Its name is reserved everywhere in a tree, in any case.
const MetaDir = ".swarmops-tree"

// ErrReservedPath is returned by ValidatePath for a path that names a
// directory no commit may touch: a ".git" directory (in any case), the
// work-tree metadata directory, or the store's own directory.
var ErrReservedPath = errors.New("worktree: reserved path")

// ErrUnsafeTree is wrapped by *UnsafeTreeError: a tree read from a store
// holds an entry a checkout refuses to materialize. Trees are input from
// outside; nothing of such a tree is written.
var ErrUnsafeTree = errors.New("worktree: unsafe tree")

// UnsafeTreeError names the refused entry and the rule it breaks.
type UnsafeTreeError struct {
	Path   string
	Reason string
}

func (e *UnsafeTreeError) Error() string {
	return fmt.Sprintf("%v: %q: %s", ErrUnsafeTree, e.Path, e.Reason)
}

// Unwrap returns ErrUnsafeTree.
func (e *UnsafeTreeError) Unwrap() error { return ErrUnsafeTree }

// folder maps a name to its full Unicode case folding, the key under which
// a case-insensitive filesystem finds it.
var folder = cases.Fold()

// fold returns s's full case folding. ASCII, nearly every name of a real
// tree, folds byte by byte without the Unicode tables.
func fold(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return folder.String(s)
		}
	}
	return strings.ToLower(s)
}

// reservedName reports why a single path component may never be part of a
// work tree's content, or "" if it may.
func reservedName(name string) string {
	// Both reserved names begin with a dot, which no other character folds
	// to: every other name is decided without folding it.
	if name == "" || name[0] != '.' {
		return ""
	}
	switch fold(name) {
	case ".git":
		return "a .git directory is never part of a tree"
	case fold(MetaDir):
		return "the work-tree metadata directory is never part of a tree"
	}
	return ""
}

// under reports whether p is dir or lies below it, comparing case-folded
// names: a store whose directory differs only in case is the same
// directory on a case-insensitive filesystem, and refusing such a path on a
// case-sensitive one costs nothing.
func under(p, dir string) bool {
	if dir == "" {
		return false
	}
	fp, fd := fold(p), fold(dir)
	return fp == fd || strings.HasPrefix(fp, fd+"/")
}

// ValidatePath checks a path a commit is about to record: a canonical
// relative path (objects.CleanPath), no component that is ".git" or the
// metadata directory in any case, and not at or below any of the reserved
// paths (the store's directory relative to the tree, as slash paths). The
// CLI's change-list parser calls it with the store's directory; the
// directory snapshot never produces such paths and checks each one too.
// The error wraps ErrReservedPath or objects.ErrBadPath.
func ValidatePath(p string, reserved ...string) error {
	if _, err := objects.CleanPath(p); err != nil {
		return err
	}
	for _, c := range strings.Split(p, "/") {
		if why := reservedName(c); why != "" {
			return fmt.Errorf("%w: %q: %s", ErrReservedPath, p, why)
		}
	}
	for _, r := range reserved {
		if under(p, r) {
			return fmt.Errorf("%w: %q is inside the store directory %q", ErrReservedPath, p, r)
		}
	}
	return nil
}

// checkEntry validates one entry of a tree read from a store, at path p
// (dir is its directory, "" for the root): a valid name, a valid mode, not
// a reserved name, not the store's directory or above it.
func (t *Tree) checkEntry(p string, e objects.Entry) error {
	if err := objects.ValidName(e.Name); err != nil {
		return &UnsafeTreeError{Path: p, Reason: err.Error()}
	}
	if !e.Mode.Valid() {
		return &UnsafeTreeError{Path: p, Reason: fmt.Sprintf("mode %o", e.Mode)}
	}
	if why := reservedName(e.Name); why != "" {
		return &UnsafeTreeError{Path: p, Reason: why}
	}
	if t.storeRel != "" && (under(p, t.storeRel) || under(t.storeRel, p)) {
		return &UnsafeTreeError{Path: p, Reason: fmt.Sprintf("the store's directory %q is there", t.storeRel)}
	}
	return nil
}

// checkCollisions refuses two names of one directory that a
// case-insensitive filesystem takes for one.
func checkCollisions(dir string, es []objects.Entry) error {
	seen := make(map[string]string, len(es))
	for _, e := range es {
		k := fold(e.Name)
		if other, ok := seen[k]; ok {
			return &UnsafeTreeError{Path: dir + e.Name,
				Reason: fmt.Sprintf("collides with %q on this case-insensitive filesystem", dir+other)}
		}
		seen[k] = e.Name
	}
	return nil
}

// checkLinkTarget refuses a symlink target that no link can hold.
func checkLinkTarget(p string, target []byte) error {
	switch {
	case len(target) == 0:
		return &UnsafeTreeError{Path: p, Reason: "empty symlink target"}
	case len(target) >= objects.MaxPathLen:
		return &UnsafeTreeError{Path: p, Reason: fmt.Sprintf("symlink target of %d bytes", len(target))}
	case strings.IndexByte(string(target), 0) >= 0:
		return &UnsafeTreeError{Path: p, Reason: "symlink target holds a NUL byte"}
	}
	return nil
}
