package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
	"github.com/swarmops/swarmops/mergequeue"
	"github.com/swarmops/swarmops/worktree"
)

// errorKind is one row of the CLI's error table: a stable code for programs,
// a distinct exit status, and whether the same command may succeed if it is
// simply run again.
type errorKind struct {
	Code      string `json:"code"`
	Exit      int    `json:"exit"`
	Retryable bool   `json:"retryable"`
	Meaning   string `json:"meaning"`
}

// The error table. It is the single source of the codes and statuses: docs/cli.md
// and `swarmops help` print it, and classify maps every error onto it. The
// statuses are stable; new rows get new numbers.
var (
	kindUsage      = errorKind{"E_USAGE", 2, false, "bad command line, flag, environment value, path, revision syntax or change list"}
	kindNotFound   = errorKind{"E_NOT_FOUND", 3, false, "a revision, ref, path or object does not exist"}
	kindConflict   = errorKind{"E_CONFLICT", 4, false, "a ref compare-and-swap failed (\"current\" holds the value) or a land or merge conflicted (\"paths\", \"hunks\")"}
	kindBusy       = errorKind{"E_BUSY", 5, true, "the writer lock was not free within --lock-timeout, land lost every race, or a commit was built again three times after other processes' recoveries or garbage collections; run it again"}
	kindCorrupt    = errorKind{"E_CORRUPT", 6, false, "a checksum or structural check failed; the store refuses to guess (run verify, recover)"}
	kindIO         = errorKind{"E_IO", 7, false, "an I/O error from the filesystem"}
	kindNoSpace    = errorKind{"E_NO_SPACE", 8, false, "the filesystem is full; nothing was acknowledged"}
	kindAmbiguous  = errorKind{"E_AMBIGUOUS", 9, false, "an id prefix matches several objects (\"candidates\")"}
	kindExists     = errorKind{"E_EXISTS", 10, false, "init found a store or other files in the directory"}
	kindNotStore   = errorKind{"E_NOT_STORE", 11, false, "the store directory is not a SwarmOps store"}
	kindRepaired   = errorKind{"E_REPAIRED", 12, false, "recover cut a torn tail (unacknowledged bytes); the store is consistent now"}
	kindGone       = errorKind{"E_UNAVAILABLE", 13, true, "the store's server went away during the command (it may or may not have taken effect; look, then run it again), or SWARMOPS_SERVER=required and none runs, or the store's directory was moved or replaced while it was open (nothing was written; run it again)"}
	kindRunning    = errorKind{"E_SERVER_RUNNING", 14, false, "serve found another server running for the store (\"pid\")"}
	kindEmpty      = errorKind{"E_EMPTY", 15, false, "commit found nothing to record (--allow-empty records it anyway)"}
	kindUnsafe     = errorKind{"E_UNSAFE", 16, false, "a path would leave the work tree, go through a symbolic link, or name .git, .swarmops-tree or the store (\"path\")"}
	kindStale      = errorKind{"E_STALE", 17, false, "the work tree's base is not the parent asked for (\"base\"); update it first"}
	kindUnresolved = errorKind{"E_UNRESOLVED", 18, false, "the work tree has conflicts an update left (\"paths\"), or a file to resolve still holds conflict markers; edit, then resolve"}
	kindProtected  = errorKind{"E_PROTECTED", 19, false, "the ref is protected (ref protect): only land moves it (\"ref\", \"pattern\")"}
	kindReadOnly   = errorKind{"E_READ_ONLY", 20, false, "the store cannot be written with this access (a read-only mount, or another user's store); reads work, unless the store needs recovery first, which needs write access"}
	kindCheckFail  = errorKind{"E_CHECK_FAILED", 21, false, "land --check ejected the change: the check failed on it (\"exit_status\", \"timed_out\", \"output\": the output's tail, \"checks\")"}
	kindInternal   = errorKind{"E_INTERNAL", 70, false, "a bug: an error the table does not know"}
	kindCrashed    = errorKind{"E_CRASHED", crashExitStatus, false, "a simulated crash (SWARMOPS_TEST_CRASH_AT); tests only"}
)

// errorTable lists every row, ordered by exit status.
func errorTable() []errorKind {
	t := []errorKind{kindUsage, kindNotFound, kindConflict, kindBusy, kindCorrupt, kindIO,
		kindNoSpace, kindAmbiguous, kindExists, kindNotStore, kindRepaired, kindGone, kindRunning, kindEmpty, kindUnsafe, kindStale, kindUnresolved, kindProtected, kindReadOnly, kindCheckFail, kindInternal, kindCrashed}
	sort.Slice(t, func(i, j int) bool { return t[i].Exit < t[j].Exit })
	return t
}

// writeErrorTable prints the table for humans.
func writeErrorTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tEXIT\tRETRYABLE\tMEANING")
	for _, k := range errorTable() {
		fmt.Fprintf(tw, "%s\t%d\t%v\t%s\n", k.Code, k.Exit, k.Retryable, k.Meaning)
	}
	tw.Flush()
}

// cliError is an error already placed in the table, said in the user's
// terms, with the extra fields the JSON envelope carries ("current",
// "paths", "candidates", ...).
type cliError struct {
	kind errorKind
	err  error
	// msg is the message; when empty it is err's text without the names of
	// the store's sentinels (see plainText).
	msg string
	// hint says what to do next ("did you mean", "run swarmops init"); it
	// is the "hint" field in JSON and a "hint:" line on a terminal.
	hint string
	// extra holds the fields a human reads too; subject holds the ones only
	// a program needs, because the message already says them (the name of
	// what was not found, the suggestions behind the hint).
	extra, subject map[string]any
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// message is the text the user reads.
func (e *cliError) message() string {
	if e.msg != "" {
		return e.msg
	}
	return plainText(e.err)
}

// usagef makes an E_USAGE error.
func usagef(format string, args ...any) error {
	return &cliError{kind: kindUsage, err: fmt.Errorf(format, args...)}
}

// usageHint makes an E_USAGE error with a "did you mean" hint from
// suggestions, each shown by show.
func usageHint(suggestions []string, show func(string) string, format string, args ...any) error {
	ce := &cliError{kind: kindUsage, err: fmt.Errorf(format, args...)}
	if len(suggestions) > 0 {
		ce.hint = didYouMean(suggestions, show)
		ce.subject = map[string]any{"suggestions": suggestions}
	}
	return ce
}

// layerNames are the sentinels whose text names a package ("core: not
// found"): errors.Is matches them, but to a user they are noise, since the
// code already says what kind of failure it is and the text after them
// says what was wrong.
var layerNames = []error{core.ErrConflict, core.ErrNotFound, core.ErrAmbiguous, core.ErrCorrupt,
	core.ErrInvalid, core.ErrNoSpace, core.ErrIO, core.ErrExist, core.ErrNotStore, core.ErrClosed,
	core.ErrBusy, core.ErrCrashed, core.ErrProtected, core.ErrReadOnly, core.ErrMoved, objects.ErrBadID, objects.ErrBadPath, objects.ErrBadPrefix,
	objects.ErrMalformed, objects.ErrInvalid, worktree.ErrLocalChanges, worktree.ErrUnsafeTree,
	worktree.ErrReservedPath, worktree.ErrNotWorkTree, worktree.ErrNotEmpty, worktree.ErrIndexCorrupt,
	worktree.ErrSpecialFile, worktree.ErrBaseMismatch, worktree.ErrUnresolved, worktree.ErrNotConflicted, mergequeue.ErrCheckFailed}

// plainText is err's text with the layer names taken out: "core: not
// found: " before a detail is dropped, and a bare "core: not found" keeps
// only "not found".
func plainText(err error) string {
	s := err.Error()
	for _, l := range layerNames {
		t := l.Error()
		s = strings.ReplaceAll(s, t+": ", "")
		if _, bare, ok := strings.Cut(t, ": "); ok {
			s = strings.ReplaceAll(s, t, bare)
		}
	}
	return s
}

// classify places err in the table. Sentinels are matched with errors.Is, in
// an order where the more specific wins (a merge conflict is a conflict, a
// simulated crash beats whatever I/O error surfaced it). It is one switch,
// and one piece, because that order is the table's meaning: split, the
// order would be spread over functions a reader must put back together.
func classify(err error) *cliError {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce
	}
	out := &cliError{err: err, extra: map[string]any{}, subject: map[string]any{}}
	var (
		conflict  *core.ConflictError
		protected *core.ProtectedError
		merge     *core.MergeConflictError
		ambiguous *core.AmbiguousError
		corrupt   *core.CorruptError
		notFound  *notFoundError
		noStore   *storeError
		recovery  *core.NeedsRecoveryError
		ejected   *mergequeue.CheckFailedError
	)
	switch {
	case errors.Is(err, core.ErrCrashed):
		out.kind = kindCrashed
	case errors.As(err, &ejected):
		out.kind = kindCheckFail
		o := ejected.Outcome
		out.extra["change"] = o.Change.String()
		out.extra["onto"] = o.Target
		out.extra["exit_status"] = o.Exit
		out.extra["timed_out"] = o.TimedOut
		out.extra["output"] = o.Output
		out.subject["checks"] = o.Checks
	case errors.Is(err, mergequeue.ErrCheckFailed):
		out.kind = kindCheckFail
	case errors.Is(err, core.ErrBusy):
		out.kind = kindBusy
	case errors.As(err, &protected):
		out.kind = kindProtected
		out.extra["ref"] = protected.Ref
		out.extra["pattern"] = protected.Pattern
		out.hint = fmt.Sprintf("land a change onto it: swarmops land CHANGE --onto %s", protected.Ref)
	case errors.Is(err, core.ErrProtected):
		out.kind = kindProtected
	case errors.As(err, &merge):
		out.kind = kindConflict
		out.extra["paths"] = merge.Paths
		out.extra["hunks"] = conflictHunks(merge)
	case errors.As(err, &conflict):
		out.kind = kindConflict
		out.extra["ref"] = conflict.Ref
		out.extra["current"] = idOrNull(conflict.Current)
		if conflict.MovedAt != 0 {
			out.extra["moved_at"] = conflict.MovedAt
		}
		if conflict.UndoneBy != 0 {
			out.extra["undone_by"] = conflict.UndoneBy
		}
	case errors.Is(err, core.ErrConflict):
		out.kind = kindConflict
	case errors.As(err, &ambiguous):
		out.kind = kindAmbiguous
		c := make([]string, len(ambiguous.Candidates))
		for i, id := range ambiguous.Candidates {
			c[i] = id.String()
		}
		out.extra["candidates"] = c
	case errors.Is(err, core.ErrAmbiguous):
		out.kind = kindAmbiguous
	case errors.As(err, &corrupt):
		out.kind = kindCorrupt
		out.extra["file"] = corrupt.File
		out.extra["offset"] = corrupt.Offset
	case errors.Is(err, core.ErrCorrupt):
		out.kind = kindCorrupt
	case errors.As(err, &noStore) && (errors.Is(err, core.ErrNotStore) || errors.Is(err, core.ErrExist)):
		out.kind = kindExists
		if errors.Is(err, core.ErrNotStore) {
			out.kind = kindNotStore
		}
		out.msg, out.hint = noStore.message(), noStore.hint()
		out.subject["store"] = noStore.dir
	case errors.Is(err, core.ErrNotStore):
		out.kind = kindNotStore
	case errors.Is(err, core.ErrExist):
		out.kind = kindExists
	case errors.As(err, &notFound) && errors.Is(err, core.ErrNotFound):
		out.kind = kindNotFound
		out.msg = notFound.reason
		out.subject[notFound.field] = notFound.name
		if notFound.rev != "" {
			out.subject["rev"] = notFound.rev
		}
		if len(notFound.similar) > 0 {
			out.hint = didYouMean(notFound.similar, quoted)
			out.subject["suggestions"] = notFound.similar
		}
	case errors.Is(err, core.ErrNotFound):
		out.kind = kindNotFound
	case errors.Is(err, core.ErrInvalid), errors.Is(err, objects.ErrBadID):
		out.kind = kindUsage
	case errors.Is(err, core.ErrNoSpace):
		out.kind = kindNoSpace
	case errors.As(err, &recovery):
		out.kind = kindReadOnly
		out.hint = "run swarmops recover as a user who can write the store (recovery after a crash or power loss writes); then reads work without write access"
	case errors.Is(err, core.ErrMoved):
		out.kind = kindGone
		out.hint = "the store's path now names another directory, or none: run the command again, which opens whatever the path names now"
	case errors.Is(err, core.ErrReadOnly):
		out.kind = kindReadOnly
		out.hint = "commands that only read (log, show, cat, ls, diff, ref get, ref list, op log, verify, info) work, and checkout into a directory of yours; to write, run as a user who can write the store, on a writable mount"
	case errors.Is(err, core.ErrIO), errors.Is(err, core.ErrClosed):
		out.kind = kindIO
	case errors.Is(err, syscall.ENOSPC):
		out.kind = kindNoSpace
	case isOSError(err):
		// A work tree's files are the user's, reached through the OS
		// directly: their errors are I/O errors like the store's.
		out.kind = kindIO
	default:
		out.kind = kindInternal
	}
	return out
}

// isOSError reports whether err comes from a system call on a path.
func isOSError(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &errno)
}

// idOrNull renders an id for JSON, null when absent.
func idOrNull(id core.ID) any {
	if id.IsZero() {
		return nil
	}
	return id.String()
}

// hunkJSON is one conflicting hunk of E_CONFLICT's "hunks": the lines
// base, ours (the side merged onto: land's REF) and theirs (the side
// merged in: land's CHANGE) have there, each with its 1-based start line
// and count in its own file.
type hunkJSON struct {
	Base   textmerge.Region `json:"base"`
	Ours   textmerge.Region `json:"ours"`
	Theirs textmerge.Region `json:"theirs"`
}

// conflictHunks is E_CONFLICT's "hunks": for each conflicting path merged
// by lines, its conflicting hunks. A path of "paths" missing here
// conflicted as a whole file (binary, a mode or type change, a delete
// against an edit, a file against a directory).
func conflictHunks(e *core.MergeConflictError) map[string][]hunkJSON {
	out := make(map[string][]hunkJSON, len(e.Hunks))
	for p, hs := range e.Hunks {
		js := make([]hunkJSON, len(hs))
		for i, h := range hs {
			js[i] = hunkJSON{Base: h.Base, Ours: h.Ours, Theirs: h.Theirs}
		}
		out[p] = js
	}
	return out
}
