package refs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// A protection is a pattern, a ref name or a prefix ending in "/" (main,
// release/), that marks the refs it matches as movable only by a land. It
// is set and cleared by journal frames, like a ref move, so that it is
// checked under the writer lock against the same projection as the moves it
// refuses, and is exactly as durable as they are: a protect that was
// acknowledged holds for every move checked after it.
type Protection struct {
	Pattern string
	On      bool // false: the frame clears the pattern
}

// ErrProtected is wrapped by *Refused.
var ErrProtected = errors.New("refs: protected ref")

// Refused is a move of a protected ref by an operation other than a land.
type Refused struct {
	Ref     string
	Pattern string // the protection that matched
	Op      Op
}

func (r *Refused) Error() string {
	return fmt.Sprintf("refs: %q is protected (%q): only a land moves it, not %s", r.Ref, r.Pattern, r.Op)
}

// Unwrap makes errors.Is(err, ErrProtected) true.
func (r *Refused) Unwrap() error { return ErrProtected }

// ValidatePattern checks a protection pattern: a valid ref name, or a valid
// ref name followed by "/" (a prefix).
func ValidatePattern(p string) error {
	if err := ValidateName(strings.TrimSuffix(p, "/")); err != nil {
		return fmt.Errorf("protection pattern %q: %w", p, err)
	}
	return nil
}

// Matches reports whether pattern p protects ref name: p is name, or p
// ends in "/" and name starts with it.
func Matches(p, name string) bool {
	if strings.HasSuffix(p, "/") {
		return strings.HasPrefix(name, p)
	}
	return p == name
}

// protEntry is one change of a pattern's protection, made by frame Seq.
type protEntry struct {
	Seq uint64
	On  bool
}

// ApplyProtections records the protections set or cleared by frame seq.
func (t *Table) ApplyProtections(seq uint64, ps []Protection) {
	if len(ps) > 0 && t.prot == nil {
		t.prot = map[string][]protEntry{}
	}
	for _, p := range ps {
		t.prot[p.Pattern] = append(t.prot[p.Pattern], protEntry{Seq: seq, On: p.On})
	}
}

// RestoreProtection records that pattern was protected by frame seq
// (loading a checkpoint).
func (t *Table) RestoreProtection(pattern string, seq uint64) {
	t.ApplyProtections(seq, []Protection{{Pattern: pattern, On: true}})
}

// Protected returns every pattern protected as of seq, sorted, each with
// the frame that protected it. It is exact for every seq with Covers(seq);
// for an older one it answers as of the table's base (protections are not
// in the reflog file).
func (t *Table) Protected(seq uint64) ([]string, []uint64) {
	if t.base > 0 && seq < t.base-1 {
		seq = t.base - 1
	}
	var names []string
	var seqs []uint64
	for p, log := range t.prot {
		if e, ok := lastProt(log, seq); ok && e.On {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		e, _ := lastProt(t.prot[p], seq)
		seqs = append(seqs, e.Seq)
	}
	return names, seqs
}

func lastProt(log []protEntry, seq uint64) (protEntry, bool) {
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Seq <= seq {
			return log[i], true
		}
	}
	return protEntry{}, false
}

// ProtectedBy returns the pattern protecting name at the table's latest
// frame, or "".
func (t *Table) ProtectedBy(name string) string {
	ps, _ := t.Protected(^uint64(0))
	for _, p := range ps {
		if Matches(p, name) {
			return p
		}
	}
	return ""
}

// CheckProtected refuses, with a *Refused, a move by operation op of a ref
// that a protection matches at the table's latest frame, unless op is a
// land or the move creates the ref (it is absent and expected absent:
// nothing it held is lost, and a land needs its target to exist).
func (t *Table) CheckProtected(op Op, moves []Move) error {
	if len(t.prot) == 0 || op == OpLand {
		return nil
	}
	for _, m := range moves {
		p := t.ProtectedBy(m.Name)
		if p == "" {
			continue
		}
		if m.Old.IsZero() && t.Get(m.Name, ^uint64(0)).IsZero() {
			continue
		}
		return &Refused{Ref: m.Name, Pattern: p, Op: op}
	}
	return nil
}

// trimProtections drops each pattern's changes before base except its last
// one, and a pattern whose last change before base cleared it.
func (t *Table) trimProtections(base uint64) {
	for p, log := range t.prot {
		i := 0
		for i+1 < len(log) && log[i+1].Seq < base {
			i++
		}
		if i == len(log)-1 && log[i].Seq < base && !log[i].On {
			delete(t.prot, p)
			continue
		}
		if i > 0 {
			t.prot[p] = append([]protEntry(nil), log[i:]...)
		}
	}
}

// Unprotected returns a copy of t that shares its moves and holds no
// protections: a checkpoint written from it forgets them (the crash
// sweep's drop-protections canary).
func (t *Table) Unprotected() *Table {
	c := *t
	c.prot = nil
	return &c
}
