// Package scenarios holds the declarative crash-test workflows of SwarmOps
// (the *.yaml files beside this file, embedded into the binary so crashsim
// finds them from any working directory) and the loader that validates them.
//
// A scenario is a list of steps run against a store: init, commit, ref
// create/set/delete with an expected old value, land, undo of a ref's
// move, protect or clear a ref pattern, an explicit checkpoint, a race of
// two steps interleaved at a lock, repeat loops, reopen, recover and read. The crash
// sweep (package crashsweep) runs a scenario once to count its filesystem
// calls, then crashes it at every call. See docs/crash-testing.md for the file
// format by example.
//
// Every error the loader returns wraps ErrInvalid and names the file, line and
// column of the offending node, because a scenario that silently means
// something else than its author wrote proves nothing.
package scenarios

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// ErrInvalid is wrapped by every loader error: the file is not a valid
// scenario.
var ErrInvalid = errors.New("scenarios: invalid scenario")

// Claim names one of the store's durability claims, C1 to C10
// (docs/durability.md states each).
type Claim string

// The claims a scenario can ask the sweep to check. C1–C4 are checked on every
// crash state whatever the scenario lists (they are one comparison against the
// oracle); C6 adds Verify(deep), C9 adds the fault-injection sweep and C10 the
// double recovery and the crash-during-recovery sweep.
const (
	C1  Claim = "C1"
	C2  Claim = "C2"
	C3  Claim = "C3"
	C4  Claim = "C4"
	C6  Claim = "C6"
	C9  Claim = "C9"
	C10 Claim = "C10"
)

// AllClaims lists the claim names a scenario may use.
var AllClaims = []Claim{C1, C2, C3, C4, C6, C9, C10}

// Kind is a step's type.
type Kind string

// The step kinds. The YAML key of a step is its kind.
const (
	KindInit      Kind = "init"
	KindCommit    Kind = "commit"
	KindRefCreate Kind = "ref_create"
	KindRefSet    Kind = "ref_set"
	KindRefDelete Kind = "ref_delete"
	KindLand      Kind = "land"
	KindUndo      Kind = "undo"
	// KindCheckpoint is an explicit checkpoint (Store.Checkpoint), which
	// also makes the index merges (compaction) that are due.
	KindCheckpoint Kind = "checkpoint"
	KindProtect    Kind = "protect"
	// KindGC is a garbage collection (Store.GC, retention 0), after
	// leases on Leases.
	KindGC      Kind = "gc"
	KindRace    Kind = "race"
	KindRepeat  Kind = "repeat"
	KindRecover Kind = "recover"
	KindReopen  Kind = "reopen"
	KindRead    Kind = "read"
)

// Outcome is what a step must return in an uncrashed, fault-free run. A
// scenario whose reference run disagrees is itself reported as broken, so a
// "conflict" step cannot silently succeed and test nothing.
type Outcome string

// Outcomes.
const (
	OutcomeOK       Outcome = "ok"
	OutcomeConflict Outcome = "conflict" // ErrConflict (CAS or merge)
	OutcomeNoop     Outcome = "noop"     // land found the delta already on the target
	// OutcomeProtected is a move refused with ErrProtected: its ref is
	// protected and the step is not a land.
	OutcomeProtected Outcome = "protected"
)

// Pos is a position in a scenario file.
type Pos struct {
	File      string
	Line, Col int
}

// String returns "file:line:col".
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is a loader error at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// Rev names a changeset in a step: a label given to an earlier step's result
// ("a"), the value of a ref when the step runs ("@main"), or absence
// ("none", only where absence is meaningful: an expected old value).
type Rev struct {
	Label string
	Ref   string
	None  bool
}

// String returns the rev as written.
func (r Rev) String() string {
	switch {
	case r.None:
		return "none"
	case r.Ref != "":
		return "@" + r.Ref
	}
	return r.Label
}

// IsZero reports whether the rev was not given.
func (r Rev) IsZero() bool { return r == Rev{} }

// File is one file written by a commit: literal Content, or Size
// pseudo-random bytes drawn from Seed (for large objects).
type File struct {
	Path    string
	Content []byte
	Size    int
	Seed    uint64
	Gen     bool // Size/Seed form
}

// Data returns the file's bytes. Generated content is a pure function of
// (Size, Seed), so every run of a scenario writes identical objects.
func (f File) Data() []byte {
	if !f.Gen {
		return f.Content
	}
	r := rand.New(rand.NewPCG(f.Seed, uint64(f.Size)))
	b := make([]byte, f.Size)
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// Step is one step of a scenario. Which fields are meaningful depends on
// Kind; the loader rejects keys that do not belong to the kind.
type Step struct {
	Kind   Kind
	Pos    Pos
	Writer int // store handle (0 or 1): two handles on one FS act as two processes

	// commit
	Label   string // names the result (commit, land) for later steps
	Agent   string
	Message string
	Parents []Rev
	Files   []File
	Deletes []string
	Advance string

	// ref_create, ref_set, ref_delete, undo
	Ref    string
	To     Rev
	Expect Rev
	// undo: which of Ref's moves to undo, counting back from its newest
	// (0); any other is a move the ref has made since, so its undo
	// conflicts.
	Back int

	// land
	Change Rev
	Onto   string
	// Merged lists files the land's changeset must hold, with their
	// content: what a merge by lines gives, written down independently of
	// the code that computes it.
	Merged []File

	// protect: Pattern (a ref name or a prefix ending in "/") is protected,
	// or cleared when Off.
	Pattern string
	Off     bool

	// gc: changesets held by a lease during the collection.
	Leases []Rev

	Outcome Outcome

	// race: First runs; when it first takes the lock file named At, Second
	// runs to completion before First continues.
	At            string
	First, Second *Step

	// repeat
	Times int
	Body  []Step
}

// Options are the store options a scenario sets (zero: the store's default).
type Options struct {
	CheckpointEvery int
	CheckpointBytes int64
	InlineThreshold int
	SegmentSize     int64
}

// Scenario is a validated scenario file.
type Scenario struct {
	Name        string
	Description string
	File        string
	Claims      []Claim
	Options     Options
	Steps       []Step
	// Preamble is how many of the first Steps are a set-up that other
	// scenarios already sweep (generated workloads share one): the sweep
	// crashes only at the calls after them. Never set from YAML.
	Preamble int
}

// Has reports whether the scenario lists claim c.
func (s *Scenario) Has(c Claim) bool {
	for _, x := range s.Claims {
		if x == c {
			return true
		}
	}
	return false
}

// Ops counts the operations a run performs (repeat bodies expanded, races
// counting both sides), which is what the oracle records.
func (s *Scenario) Ops() int { return countOps(s.Steps) }

func countOps(steps []Step) int {
	n := 0
	for i := range steps {
		st := &steps[i]
		switch st.Kind {
		case KindRepeat:
			n += st.Times * countOps(st.Body)
		case KindRace:
			n += 2
		default:
			n++
		}
	}
	return n
}

// ParseClaim parses a claim name such as "C1".
func ParseClaim(s string) (Claim, error) {
	for _, c := range AllClaims {
		if strings.EqualFold(string(c), s) {
			return c, nil
		}
	}
	names := make([]string, len(AllClaims))
	for i, c := range AllClaims {
		names[i] = string(c)
	}
	return "", fmt.Errorf("%w: unknown claim %q (known: %s)", ErrInvalid, s, strings.Join(names, ", "))
}
