// Package refs is the ref table of a store: a projection of the journal that
// maps names to changeset ids, with a reflog per ref. Refs move only through
// journal frames; this package validates names, checks compare-and-swap
// expectations against the projection, and applies the moves a frame carries.
//
// Every move is kept with the sequence number of its frame, so the table can
// answer "what was ref R at sequence S" for a reader whose view ends at the
// durable sequence while the writer's projection already includes frames
// that are appended but not yet durable.
package refs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/objects"
)

// ErrInvalidName is returned for a ref name that breaks the naming rules.
var ErrInvalidName = errors.New("refs: invalid ref name")

// ErrConflict is wrapped by *Conflict.
var ErrConflict = errors.New("refs: compare-and-swap failed")

// MaxNameLen bounds a ref name.
const MaxNameLen = 255

// ValidateName checks a ref name against git-like rules: non-empty
// components separated by "/", no "..", no "@{", no leading "-" or ".", no
// trailing "/" or ".lock", no space, control character, NUL or any of
// ~^:?*[\ .
func ValidateName(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrInvalidName, name, why) }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxNameLen:
		return bad("too long")
	case strings.HasPrefix(name, "-"):
		return bad("starts with '-'")
	case strings.HasSuffix(name, "/"):
		return bad("ends with '/'")
	case strings.HasSuffix(name, ".lock"), strings.HasSuffix(name, "."):
		return bad("ends with '.lock' or '.'")
	case strings.Contains(name, ".."):
		return bad("contains '..'")
	case strings.Contains(name, "@{"):
		return bad("contains '@{'")
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || c == ' ' || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return bad(fmt.Sprintf("contains byte %#x", c))
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" {
			return bad("empty path component")
		}
		if strings.HasPrefix(comp, ".") {
			return bad("component starts with '.'")
		}
	}
	return nil
}

// Move is one ref move carried by a frame. Old is the expected value (zero:
// the ref must not exist); New zero deletes the ref.
type Move struct {
	Name     string
	Old, New objects.ID
	// Since, when not zero, is a second expectation, checked with Old when
	// the move is written and never recorded: the ref's last move must be
	// the one of frame Since. An undo uses it, so that a ref moved away
	// and back to the same value since the move it reverses is still a
	// conflict.
	Since uint64
}

// Entry is one reflog entry: a move, the frame that made it, and that
// frame's time and origin.
type Entry struct {
	Seq      uint64
	Old, New objects.ID
	Time     time.Time
	Origin
}

// Conflict is a failed expectation. MovedAt is set when the value was as
// expected but the ref's last move was not the one of frame Move.Since: it
// is the frame of that last move.
type Conflict struct {
	Ref      string
	Expected objects.ID
	Current  objects.ID
	MovedAt  uint64
}

func (c *Conflict) Error() string {
	if c.MovedAt != 0 {
		return fmt.Sprintf("refs: %q is %s again, but moved since (frame %d)", c.Ref, c.Current, c.MovedAt)
	}
	return fmt.Sprintf("refs: %q expected %s, is %s", c.Ref, c.Expected, c.Current)
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (c *Conflict) Unwrap() error { return ErrConflict }

// Table is the ref table with reflogs. It is not safe for concurrent use;
// the store guards it.
//
// A table may hold only part of each reflog: the moves of frames from its
// base on, plus the last move of each ref before base (what a checkpoint
// keeps; the older moves live in the store's reflog file). Such a table
// answers Get, List and Len exactly for every seq with Covers(seq), and Log
// returns only the moves it holds.
type Table struct {
	logs map[string][]Entry
	base uint64
	// prot holds each protection pattern's changes (protect.go), trimmed
	// like the moves.
	prot map[string][]protEntry
}

// New returns an empty table.
func New() *Table { return &Table{logs: map[string][]Entry{}} }

// Get returns the value of name as of sequence seq (inclusive); zero if
// absent.
func (t *Table) Get(name string, seq uint64) objects.ID {
	log := t.logs[name]
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Seq <= seq {
			return log[i].New
		}
	}
	return objects.ZeroID
}

// Check verifies every move's expectation against the latest values and
// that no name appears twice. It returns a *Conflict for the first failed
// expectation.
func (t *Table) Check(moves []Move) error { return t.CheckIf(moves, false) }

// CheckIf is Check; ifExists is the test-only canary
// testknobs.CASIfExists, which checks an expectation only when the ref
// exists, so a compare-and-swap of a deleted ref succeeds whatever it
// expected.
func (t *Table) CheckIf(moves []Move, ifExists bool) error {
	seen := map[string]bool{}
	for _, m := range moves {
		if err := ValidateName(m.Name); err != nil {
			return err
		}
		if seen[m.Name] {
			return fmt.Errorf("%w: %q moved twice in one transaction", ErrInvalidName, m.Name)
		}
		seen[m.Name] = true
		if cur := t.Get(m.Name, ^uint64(0)); cur != m.Old && !(ifExists && cur.IsZero()) {
			return &Conflict{Ref: m.Name, Expected: m.Old, Current: cur}
		}
		if m.Since != 0 {
			if e, ok := t.Last(m.Name, ^uint64(0)); !ok || e.Seq != m.Since {
				return &Conflict{Ref: m.Name, Expected: m.Old, Current: m.Old, MovedAt: e.Seq}
			}
		}
	}
	return nil
}

// Apply records the moves of the frame seq, made at time at by o. The
// caller has checked them (a replayed frame was checked when it was
// written).
func (t *Table) Apply(seq uint64, at time.Time, o Origin, moves []Move) {
	for _, m := range moves {
		t.logs[m.Name] = append(t.logs[m.Name], Entry{Seq: seq, Old: m.Old, New: m.New, Time: at, Origin: o})
	}
}

// List returns every ref that exists as of seq, sorted by name.
func (t *Table) List(seq uint64) []Move {
	var out []Move
	for name := range t.logs {
		if id := t.Get(name, seq); !id.IsZero() {
			out = append(out, Move{Name: name, New: id})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Log returns the reflog of name up to seq, oldest first.
func (t *Table) Log(name string, seq uint64) []Entry {
	var out []Entry
	for _, e := range t.logs[name] {
		if e.Seq <= seq {
			out = append(out, e)
		}
	}
	return out
}

// Names returns every name with a reflog, sorted.
func (t *Table) Names() []string {
	out := make([]string, 0, len(t.logs))
	for n := range t.logs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Len returns how many refs exist as of seq.
func (t *Table) Len(seq uint64) int { return len(t.List(seq)) }

// Restore appends reflog entries of name, oldest first (loading a
// checkpoint).
func (t *Table) Restore(name string, entries []Entry) {
	t.logs[name] = append(t.logs[name], entries...)
}

// Base returns the first sequence number from which the table holds every
// move; before it, it holds only the last move of each ref.
func (t *Table) Base() uint64 { return t.base }

// SetBase records that the table holds every move from base on, and only
// the last move of each ref before it (a table restored from a checkpoint
// whose next seq is base).
func (t *Table) SetBase(base uint64) { t.base = base }

// Covers reports whether Get, List and Len are exact at seq: every ref's
// value at seq is a move the table holds.
func (t *Table) Covers(seq uint64) bool { return seq+1 >= t.base }

// Since returns every held move of frames lo <= seq < hi, by ref name
// (sorted), oldest first.
func (t *Table) Since(lo, hi uint64) ([]string, [][]Entry) {
	var names []string
	var logs [][]Entry
	for _, n := range t.Names() {
		var es []Entry
		for _, e := range t.logs[n] {
			if e.Seq >= lo && e.Seq < hi {
				es = append(es, e)
			}
		}
		if len(es) > 0 {
			names = append(names, n)
			logs = append(logs, es)
		}
	}
	return names, logs
}

// Last returns the last move of name at or before seq.
func (t *Table) Last(name string, seq uint64) (Entry, bool) {
	log := t.logs[name]
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Seq <= seq {
			return log[i], true
		}
	}
	return Entry{}, false
}

// Trim drops the moves of frames before base except each ref's last one,
// and raises the table's base to base: a checkpoint at base has made the
// dropped moves durable elsewhere. It keeps a long-lived table's memory
// proportional to the refs and the moves since the last checkpoint.
func (t *Table) Trim(base uint64) {
	if base <= t.base {
		return
	}
	t.trimProtections(base)
	for n, log := range t.logs {
		i := 0
		for i+1 < len(log) && log[i+1].Seq < base {
			i++
		}
		if i > 0 {
			t.logs[n] = append([]Entry(nil), log[i:]...)
		}
	}
	t.base = base
}

// Fill puts back the moves before the table's base from older (every move
// of frames before base, by ref, oldest first), making the table whole
// (base 0).
func (t *Table) Fill(older map[string][]Entry) {
	for n, es := range older {
		var keep []Entry
		for _, e := range t.logs[n] {
			if e.Seq >= t.base {
				keep = append(keep, e)
			}
		}
		t.logs[n] = append(append([]Entry(nil), es...), keep...)
	}
	t.base = 0
}
