package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// storeDir returns the store directory: --store, else SWARMOPS_STORE, else
// ".swarmops" in the current directory.
func (a *app) storeDir() string {
	dir, _ := a.storeChoice()
	return dir
}

// storeChoice returns the store directory and where it came from:
// "--store", "SWARMOPS_STORE", "worktree" (the store a work tree around
// the current directory records), or "" for the default.
func (a *app) storeChoice() (dir, from string) {
	if a.storeFlag != "" {
		return a.path(a.storeFlag), "--store"
	}
	if v := a.getenv("SWARMOPS_STORE"); v != "" {
		return a.path(v), "SWARMOPS_STORE"
	}
	if d := treeStore(a.path(".")); d != "" {
		return d, "worktree"
	}
	return a.path(".swarmops"), ""
}

// treeStore returns the store recorded by the work tree around dir, or ""
// when dir is in no work tree or the tree records none. Like git finding
// .git, it lets an agent run commands inside its tree without naming the
// store.
func treeStore(dir string) string {
	root, err := worktree.FindRoot(nil, dir)
	if err != nil {
		return ""
	}
	p, err := worktree.StorePath(nil, root)
	if err != nil {
		return ""
	}
	return p
}

// notStore wraps an error of opening or creating the store: an ErrNotStore
// or ErrExist becomes a *storeError that says which directory was tried and
// how to get a store.
func (a *app) notStore(verb string, err error) error {
	dir, from := a.storeChoice()
	if errors.Is(err, core.ErrNotStore) || errors.Is(err, core.ErrExist) {
		return newStoreError(dir, from, err)
	}
	return fmt.Errorf("%s %q: %w", verb, dir, err)
}

// options builds the store options, wrapping the OS filesystem for crash
// tests when SWARMOPS_TEST_CRASH_AT is set.
func (a *app) options() (core.Options, error) {
	if a.lockTimeout <= 0 {
		return core.Options{}, usagef("--lock-timeout %v: want a positive duration", a.lockTimeout)
	}
	o := core.Options{LockTimeout: a.lockTimeout, GroupCache: a.groupCache}
	fsys, err := a.crashFS()
	if err != nil {
		return o, err
	}
	o.FS = fsys
	if weakenHook != nil {
		if err := weakenHook(a.getenv, &o); err != nil {
			return o, err
		}
	}
	if v := a.getenv(segmentSizeEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 4096 || n > 1<<40 {
			return o, usagef("%s=%q: want a segment size in bytes, 4096 to 2^40", segmentSizeEnv, v)
		}
		o.SegmentSize = n
	}
	return o, nil
}

// weakenHook applies the canaries a crash test asks for to a
// *core.Options or a *server.Config. Only canary.go sets it, in a binary
// built with the swarmops_canary tag (crashsim --self-test builds one): in
// a normal build it is nil, so nothing can weaken a store or a server.
var weakenHook func(getenv func(string) string, opts any) error

// segmentSizeEnv sets the journal segment size a command's writes roll
// over at (tests only: a small size makes gc reclaim segments in a test's
// small history).
const segmentSizeEnv = "SWARMOPS_TEST_SEGMENT_SIZE"

// crashFS returns the filesystem crash tests ask for (nil: the OS), made
// once per command so the store's calls and the work tree's share one
// count.
func (a *app) crashFS() (vfs.FS, error) {
	if !a.testFSSet {
		fsys, err := crashFS(a.getenv)
		if err != nil {
			return nil, err
		}
		a.testFS, a.testFSSet = fsys, true
	}
	return a.testFS, nil
}

// open opens the store for a command; the caller calls release when done
// with it. Under a server the store is the server's open one, which
// release leaves open.
func (a *app) open() (s *core.Store, release func(), err error) {
	o, err := a.options()
	if err != nil {
		return nil, nil, err
	}
	if a.shared != nil {
		if err := a.sameStore(); err != nil {
			return nil, nil, err
		}
		return a.shared, func() {}, nil
	}
	s, err = core.Open(a.storeDir(), o)
	if err != nil {
		return nil, nil, a.notStore("open store", err)
	}
	return s, func() { s.Close() }, nil
}

// path resolves a path argument against the invoking process's working
// directory: a server runs commands for clients in other directories.
func (a *app) path(p string) string {
	if a.cwd == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(a.cwd, p)
}

// jsonEnv is a's environment with SWARMOPS_JSON=1: the environment of a
// command line run from within this one (an MCP tool's, a hook's step),
// whose JSON envelope the caller reads.
func (a *app) jsonEnv() func(string) string {
	return func(k string) string {
		if k == "SWARMOPS_JSON" {
			return "1"
		}
		return a.getenv(k)
	}
}

// withStore runs f on an open store and a fresh snapshot.
func (a *app) withStore(f func(s *core.Store, sn *core.Snapshot) error) error {
	s, release, err := a.open()
	if err != nil {
		return err
	}
	defer release()
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	return f(s, sn)
}

// ok records a success.
func (a *app) ok(data any, text func(io.Writer)) {
	a.data, a.text = data, text
}

// okEach records a success that is a list: in JSON an array of one object
// a item (obj), as text one line a item (line, without its newline).
func okEach[T any](a *app, items []T, obj func(T) map[string]any, line func(T) string) {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = obj(it)
	}
	a.ok(out, func(w io.Writer) {
		for _, it := range items {
			fmt.Fprintln(w, line(it))
		}
	})
}

// lines is a text renderer of fixed lines.
func lines(ls ...string) func(io.Writer) {
	return func(w io.Writer) {
		for _, l := range ls {
			fmt.Fprintln(w, l)
		}
	}
}

// runE adapts a command body so every error it returns is classified.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return classify(err)
		}
		return nil
	}
}

// groupCmd is a command that only holds subcommands (op, ref): run bare it
// is E_USAGE naming the ones to give (want), and an argument is a mistyped
// subcommand (noSubcommand).
func groupCmd(use, short, want string, subs ...*cobra.Command) *cobra.Command {
	group := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noSubcommand,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return usagef("%s: give a subcommand: %s", cmd.Name(), want)
		}),
	}
	group.AddCommand(subs...)
	return group
}

// resolve checks a revision's syntax, then resolves it.
func resolve(sn *core.Snapshot, rev string) (core.ID, error) {
	if err := checkRev(rev); err != nil {
		return core.ID{}, usagef("%w", err)
	}
	id, err := sn.Resolve(rev)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return core.ID{}, revNotFound(sn, rev, err)
	case err != nil:
		return core.ID{}, fmt.Errorf("revision %q: %w", rev, err)
	}
	return id, nil
}

// hasRef reports whether a ref exists. Any error other than not found
// counts as existing, so the caller's own lookup reports it.
func hasRef(sn *core.Snapshot, name string) bool {
	_, err := sn.Ref(name)
	return !errors.Is(err, core.ErrNotFound)
}

// nullIfEmpty renders an optional name for JSON: null when empty.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// short is the 12-digit form of an id that human text uses.
func short(id core.ID) string { return id.String()[:12] }

// idText renders an id for human text, "(none)" when absent.
func idText(id core.ID) string {
	if id.IsZero() {
		return "(none)"
	}
	return id.String()
}

// fmtTime renders a time as RFC 3339 UTC with nanoseconds.
func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// quotePath is p as text output prints it: as it is, or, when it holds a
// control character, a quote, a backslash or bytes that are not UTF-8,
// quoted as a Go string, as git quotes such names, so that one name is
// one line and cannot drive the reader's terminal.
func quotePath(p string) string {
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || (r >= 0x80 && !unicode.IsPrint(r)) {
			return strconv.Quote(p)
		}
	}
	return p
}

// quotedList is paths for a message, each as quotePath prints it.
func quotedList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = quotePath(p)
	}
	return strings.Join(q, ", ")
}
