package refs

import (
	"errors"
	"fmt"
)

// Op is the operation that made a ref move. It is recorded with every move
// in the journal, the reflog file and the checkpoint, so a move's origin
// survives as long as the move does.
type Op uint8

// The operations. OpUnknown is what a move written before operations were
// recorded reads as; a writer never records it.
const (
	OpUnknown   Op = iota
	OpCommit       // a commit that advanced the ref
	OpRefSet       // a compare-and-swap of an existing ref
	OpRefCreate    // a compare-and-swap from absence
	OpRefDelete    // a compare-and-swap to absence
	OpLand         // a land (merge commit or fast-forward)
	OpUndo         // the reversal of an earlier move (Origin.Undoes)
	OpImport       // an import from outside the store (git)
	opEnd
)

var opNames = [opEnd]string{"unknown", "commit", "ref-set", "ref-create", "ref-delete", "land", "undo", "import"}

// String returns the operation's name as the CLI prints it.
func (o Op) String() string {
	if o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Known reports whether o is an operation a writer records (not OpUnknown,
// and not a value from a newer format).
func (o Op) Known() bool { return o > OpUnknown && o < opEnd }

// ParseOp returns the operation named s (String's names, "unknown"
// included).
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n == s {
			return Op(i), nil
		}
	}
	return OpUnknown, fmt.Errorf("%w: unknown operation %q", ErrInvalidOrigin, s)
}

// ErrInvalidOrigin is returned for an origin a writer may not record.
var ErrInvalidOrigin = errors.New("refs: invalid move origin")

// MaxAgentLen bounds an origin's agent name, as a changeset's agent is
// bounded.
const MaxAgentLen = 1<<16 - 1

// Origin says who made a frame's ref moves and by which operation; every
// move of one frame shares it.
type Origin struct {
	Agent string
	Op    Op
	// Undoes is, for OpUndo, the sequence number of the frame whose move
	// of the same ref this one reverses; zero otherwise.
	Undoes uint64
}

// Validate checks that a writer may record o: a known operation, an agent
// (opaque bytes, as a changeset's) within MaxAgentLen, and Undoes set exactly for OpUndo.
func (o Origin) Validate() error {
	switch {
	case !o.Op.Known():
		return fmt.Errorf("%w: operation %s", ErrInvalidOrigin, o.Op)
	case len(o.Agent) > MaxAgentLen:
		return fmt.Errorf("%w: agent of %d bytes exceeds %d", ErrInvalidOrigin, len(o.Agent), MaxAgentLen)
	case (o.Op == OpUndo) != (o.Undoes != 0):
		return fmt.Errorf("%w: an undo, and only an undo, names the frame it undoes (op %s, undoes %d)", ErrInvalidOrigin, o.Op, o.Undoes)
	}
	return nil
}

// ValidateStored checks an origin read back from the reflog file or a
// checkpoint: what Validate accepts, or the unknown origin (no operation, no
// agent) of a move written before origins were recorded, which is carried
// forward as it is.
func (o Origin) ValidateStored() error {
	if o == (Origin{}) {
		return nil
	}
	return o.Validate()
}
