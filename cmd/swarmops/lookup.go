package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core"
)

// notFoundError is a ref, revision or path the user named that does not
// exist, said in the user's terms. classify puts the name in a JSON field
// named after what it is ("ref", "rev" or "path"; a path also carries its
// "rev"), so a program need not parse the message, and turns similar into
// a "did you mean" hint.
type notFoundError struct {
	field   string   // "ref", "rev" or "path"
	name    string   // what the user typed
	rev     string   // for a path: the revision it was looked up in
	reason  string   // the whole message, in the user's terms
	similar []string // existing names close to name
	err     error    // the store's error, for errors.Is
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %q: %v", e.field, e.name, e.err) }
func (e *notFoundError) Unwrap() error { return e.err }

// refNotFound wraps the store's error for a missing ref, with the existing
// refs whose names are close to it.
func refNotFound(sn *core.Snapshot, name string, err error) error {
	if !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("ref %q: %w", name, err)
	}
	return &notFoundError{field: "ref", name: name, reason: fmt.Sprintf("ref %q does not exist", name),
		similar: similarRefs(sn, name), err: err}
}

// revNotFound wraps the store's error for a revision that did not resolve,
// saying which part failed: the ref or id prefix, or a ~N that walks past
// the first changeset.
func revNotFound(sn *core.Snapshot, rev string, err error) error {
	base, _, tilde := strings.Cut(rev, "~")
	nf := &notFoundError{field: "rev", name: rev, err: err}
	if tilde {
		if _, berr := sn.Resolve(base); berr == nil {
			nf.reason = fmt.Sprintf("revision %q goes back past the first changeset", rev)
			return nf
		}
	}
	switch {
	case len(base) == 64 && isHex(base):
		nf.reason = fmt.Sprintf("no changeset has the id %s", base)
	case len(base) >= 4 && isHex(base):
		nf.reason = fmt.Sprintf("no ref or changeset id matches %q", base)
	default:
		nf.reason = fmt.Sprintf("no ref named %q", base)
	}
	if base != rev {
		nf.reason = fmt.Sprintf("revision %q: %s", rev, nf.reason)
	}
	nf.similar = similarRefs(sn, base)
	return nf
}

// pathNotFound wraps the store's error for a path missing from a revision.
func pathNotFound(rev, path string, err error) error {
	if !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("%s:%s: %w", rev, path, err)
	}
	return &notFoundError{field: "path", name: path, rev: rev,
		reason: fmt.Sprintf("path %q does not exist in %s", path, rev), err: err}
}

// similarRefs lists the refs whose names are close to name. It runs only on
// the way to an error, so listing every ref is cheap enough.
func similarRefs(sn *core.Snapshot, name string) []string {
	refs, err := sn.Refs()
	if err != nil {
		return nil
	}
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Name
	}
	return similar(name, names)
}

// maxSuggestions bounds a "did you mean" list: more is noise, not help.
const maxSuggestions = 3

// similar returns the candidates within a small edit distance of name,
// closest first. The distance allowed grows with the name (1 up to three
// characters, 2 beyond), so a short name is not "close" to everything.
func similar(name string, candidates []string) []string {
	limit := 1
	if len(name) > 3 {
		limit = 2
	}
	type scored struct {
		s string
		d int
	}
	var hits []scored
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := editDistance(name, c); d <= limit {
			hits = append(hits, scored{c, d})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].d != hits[j].d {
			return hits[i].d < hits[j].d
		}
		return hits[i].s < hits[j].s
	})
	var out []string
	for i := 0; i < len(hits) && i < maxSuggestions; i++ {
		out = append(out, hits[i].s)
	}
	return out
}

// editDistance is the optimal-string-alignment distance between a and b in
// bytes: insertions, deletions, substitutions and swaps of two neighbours
// each cost one, so "mian" is one edit from "main".
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// didYouMean renders suggestions as a hint, each shown by show.
func didYouMean(suggestions []string, show func(string) string) string {
	if len(suggestions) == 0 {
		return ""
	}
	shown := make([]string, len(suggestions))
	for i, s := range suggestions {
		shown[i] = show(s)
	}
	if len(shown) == 1 {
		return "did you mean " + shown[0] + "?"
	}
	return "did you mean one of " + strings.Join(shown, ", ") + "?"
}

// quoted shows a suggestion as a Go-quoted string.
func quoted(s string) string { return fmt.Sprintf("%q", s) }

// storeError is a store directory that holds no store (for init: that
// holds something already), with where the directory came from, so the
// message can say which one was tried and the hint how to get a store.
type storeError struct {
	dir   string // as given
	from  string // "--store", "SWARMOPS_STORE" or "" for the default
	state string // "missing", "empty", "file" or "other"
	err   error  // core.ErrNotStore or core.ErrExist, wrapped
}

func (e *storeError) Error() string { return fmt.Sprintf("store %q: %v", e.dir, e.err) }
func (e *storeError) Unwrap() error { return e.err }

// newStoreError wraps err for dir, looking at the directory to tell a
// missing one or an empty one (which init would take) from anything else.
func newStoreError(dir, from string, err error) *storeError {
	e := &storeError{dir: dir, from: from, state: "other", err: err}
	st, serr := os.Stat(dir)
	switch {
	case errors.Is(serr, os.ErrNotExist):
		e.state = "missing"
	case serr == nil && !st.IsDir():
		e.state = "file"
	case serr == nil:
		if ents, rerr := os.ReadDir(dir); rerr == nil && len(ents) == 0 {
			e.state = "empty"
		}
	}
	return e
}

// message says which directory was tried, where that choice came from, and
// what is there.
func (e *storeError) message() string {
	where := e.dir
	if abs, err := filepath.Abs(e.dir); err == nil {
		where = abs
	}
	from := "the default ./.swarmops: neither --store nor SWARMOPS_STORE is set"
	switch e.from {
	case "--store":
		from = "from --store " + e.dir
	case "SWARMOPS_STORE":
		from = "from SWARMOPS_STORE=" + e.dir
	case "worktree":
		from = "recorded by the work tree around the current directory"
	}
	what := map[string]string{
		"missing": "it does not exist",
		"empty":   "it is an empty directory",
		"file":    "it is a file",
		"other":   "the directory holds no store",
	}[e.state]
	if errors.Is(e.err, core.ErrExist) {
		what = "it is a file"
		if e.state != "file" {
			what = "the directory is not empty"
		}
		return fmt.Sprintf("cannot create a store at %q: %s (%s)", where, what, from)
	}
	return fmt.Sprintf("no SwarmOps store at %q: %s (%s)", where, what, from)
}

// hint says how to get a store: init where init would succeed, else point
// at an existing one.
func (e *storeError) hint() string {
	pointAt := "point --store or SWARMOPS_STORE at an existing store"
	if errors.Is(e.err, core.ErrExist) {
		return "if it is a store already, use it; else run 'swarmops init --store DIR' with a new or empty directory"
	}
	if e.state == "missing" || e.state == "empty" {
		init := "swarmops init"
		if e.from == "--store" {
			init += " --store " + e.dir
		}
		return fmt.Sprintf("run '%s' to create one there, or %s", init, pointAt)
	}
	return pointAt + ", or run 'swarmops init --store DIR' for a new directory"
}
