package gitx

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/swarmops/swarmops/core"
)

// scratchRef is the git ref fast-import writes an export's new commits
// on. The refs the export sets are moved afterwards, by compare-and-swap
// (setRefs), so fast-import never moves a ref someone else may be
// writing. The repository lock (lockRepo) makes one export at a time use
// it; a scratch ref a killed export left is moved or deleted by the next.
const scratchRef = "refs/swarmops/export-scratch"

// ErrForeignCommit: a git ref the export would set holds a commit that no
// export wrote and that the new value does not contain, so moving the ref
// would drop it (a commit made in git on an exported branch). Counts as
// core.ErrConflict; ExportOptions.Force overwrites.
var ErrForeignCommit = errors.New("gitx: the git ref holds a commit no export wrote")

// ForeignRef is a git ref an export refused to move: it holds Commit,
// which the export did not write and Want does not contain.
type ForeignRef struct {
	GitRef, Commit, Want string
}

// ForeignError is the error of an export that found ForeignRefs and moved
// no ref. It matches ErrForeignCommit and core.ErrConflict.
type ForeignError struct{ Refs []ForeignRef }

func (e *ForeignError) Error() string {
	names := make([]string, len(e.Refs))
	for i, r := range e.Refs {
		names[i] = fmt.Sprintf("%s (at %.12s)", r.GitRef, r.Commit)
	}
	return fmt.Sprintf("%v: %s: moving them would drop commits made in git", ErrForeignCommit, strings.Join(names, ", "))
}

func (e *ForeignError) Is(target error) bool {
	return target == ErrForeignCommit || target == core.ErrConflict
}

// setRefs moves every ref of refs to its commit in one git transaction,
// each from its value in current (refValues, read before the export wrote
// anything), and deletes the scratch ref. A ref that holds a commit no
// export wrote (m lacks it) and the new commit does not contain is refused
// unless force: then no ref moves. A ref that moved since current was read
// makes the transaction fail as a whole, with core.ErrConflict.
func (r *repo) setRefs(m *exportMap, refs []ExportedRef, current map[string]string, force bool) error {
	written := make(map[string]bool, len(m.commits))
	for _, c := range m.commits {
		written[c] = true
	}
	var tx bytes.Buffer
	var foreign []ForeignRef
	for _, e := range refs {
		want := m.commits[e.Changeset]
		old := current[e.GitRef]
		if old == want {
			continue
		}
		if old != "" && !written[old] && !force {
			contained, err := r.isAncestor(old, want)
			if err != nil {
				return err
			}
			if !contained {
				foreign = append(foreign, ForeignRef{GitRef: e.GitRef, Commit: old, Want: want})
				continue
			}
		}
		if old == "" {
			old = strings.Repeat("0", len(want)) // the ref must not exist
		}
		fmt.Fprintf(&tx, "update %s %s %s\n", e.GitRef, want, old)
	}
	// The scratch ref is not compared: fast-import moved it since.
	scratch := r.hasRef(scratchRef)
	if scratch {
		fmt.Fprintf(&tx, "delete %s\n", scratchRef)
	}
	if len(foreign) > 0 {
		// No ref moves. The commits written stay mapped, so the export
		// run again (with Force, or after the ref was cleared) reuses them.
		if scratch {
			r.run(nil, "update-ref", "-d", scratchRef)
		}
		return &ForeignError{Refs: foreign}
	}
	if tx.Len() == 0 {
		return nil
	}
	if _, err := r.run(tx.Bytes(), "update-ref", "--stdin"); err != nil {
		if scratch {
			r.run(nil, "update-ref", "-d", scratchRef)
		}
		if strings.Contains(err.Error(), "but expected") || strings.Contains(err.Error(), "reference already exists") {
			return fmt.Errorf("%w: a git ref moved while the export ran; run it again: %w", core.ErrConflict, err)
		}
		return err
	}
	return nil
}

// refValues returns the commits the refs hold now; an absent ref has none.
func (r *repo) refValues(refs []ExportedRef) (map[string]string, error) {
	vals := map[string]string{}
	if len(refs) == 0 {
		return vals, nil // for-each-ref without a pattern lists every ref
	}
	args := []string{"for-each-ref", "--format=%(objectname) %(refname)"}
	for _, e := range refs {
		args = append(args, e.GitRef)
	}
	out, err := r.run(nil, args...)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok {
			vals[name] = sha
		}
	}
	return vals, nil
}

// hasRef reports whether ref exists.
func (r *repo) hasRef(ref string) bool {
	_, err := r.run(nil, "show-ref", "--verify", "--quiet", ref)
	return err == nil
}

// isAncestor reports whether commit a is an ancestor of (or is) commit b.
func (r *repo) isAncestor(a, b string) (bool, error) {
	cmd, err := r.command("merge-base", "--is-ancestor", a, b)
	if err != nil {
		return false, err
	}
	var errOut bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: stderrLimit, b: &errOut}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, gitFailed([]string{"merge-base"}, err, errOut.String())
}
