package mergequeue

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
)

// Namespaces of the queue's refs.
const (
	PendingPrefix = "queue/"
	DonePrefix    = "queue-done/"
)

// entry is one queued land: its number, the change, and (while a batch
// is stacked) the changeset its merge made and whether it was a no-op.
type entry struct {
	n      uint64
	change core.ID
	merged core.ID
	noop   bool
}

// entryName is the ref of entry n of target under prefix.
func entryName(prefix, target string, n uint64) string {
	return fmt.Sprintf("%s%s/%020d", prefix, target, n)
}

// entryNumber parses the number of a ref under prefix+target+"/", and
// false for a ref that is not one (a deeper target's entry).
func entryNumber(name, prefix, target string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, prefix+target+"/")
	if !ok || len(rest) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

// pending lists target's queued entries in arrival order, and the highest
// number in use under either namespace.
func pending(sn *core.Snapshot, target string) ([]entry, uint64, error) {
	all, err := sn.Refs()
	if err != nil {
		return nil, 0, err
	}
	var es []entry
	var top uint64
	for _, r := range all {
		if n, ok := entryNumber(r.Name, PendingPrefix, target); ok {
			es = append(es, entry{n: n, change: r.ID})
			top = max(top, n)
		} else if n, ok := entryNumber(r.Name, DonePrefix, target); ok {
			top = max(top, n)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].n < es[j].n })
	return es, top, nil
}

// Outcome is what became of a queued land.
type Outcome struct {
	Change core.ID `json:"change"`
	Target string  `json:"target"`
	Entry  uint64  `json:"entry"`
	Landed bool    `json:"landed"`
	// NoOp: the target held the change already; it did not move for it.
	NoOp bool `json:"noop"`
	// Changeset is the changeset of the target's history that landed the
	// change (its merge, the change itself on a fast-forward, the head on
	// a no-op); Head is the target's head the landing frame published.
	Changeset core.ID `json:"changeset"`
	Head      core.ID `json:"head"`
	// Batch is how many entries the frame that decided this one landed
	// (0 for an ejection); Checks how many checks the runner had run in
	// its batch by then.
	Batch  int `json:"batch"`
	Checks int `json:"checks"`
	// Reason says why an entry was ejected: "check" (the check failed on
	// it alone) or "conflict" (it conflicted with what was ahead of it).
	Reason   string `json:"reason,omitempty"`
	Exit     int    `json:"exit_status"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Output is the tail of the check's combined output (not in the
	// .json file: it is the .out file beside it).
	Output string `json:"-"`
	// Paths and Hunks are a conflict's, as core.MergeConflictError has them.
	Paths []string                        `json:"paths,omitempty"`
	Hunks map[string][]textmerge.Conflict `json:"hunks,omitempty"`
}

// outcomeJSON is Outcome's stored form, its ids in hex (`swarmops cat`
// of an N.json shows them as every other command does).
type outcomeJSON struct {
	*outcomeFields
	Change    string `json:"change"`
	Changeset string `json:"changeset"`
	Head      string `json:"head"`
}

type outcomeFields Outcome

// MarshalJSON writes the ids in hex.
func (o *Outcome) MarshalJSON() ([]byte, error) {
	return json.Marshal(outcomeJSON{(*outcomeFields)(o), o.Change.String(), o.Changeset.String(), o.Head.String()})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	w := outcomeJSON{outcomeFields: (*outcomeFields)(o)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var err error
	for _, f := range []struct {
		s  string
		id *core.ID
	}{{w.Change, &o.Change}, {w.Changeset, &o.Changeset}, {w.Head, &o.Head}} {
		if *f.id, err = objects.ParseID(f.s); err != nil {
			return err
		}
	}
	return nil
}

// CheckFailedError is a land the check refused: the change alone, onto the
// target's head, failed the check. Outcome has the exit status and the
// output tail.
type CheckFailedError struct{ Outcome *Outcome }

func (e *CheckFailedError) Error() string {
	o := e.Outcome
	how := fmt.Sprintf("exit status %d", o.Exit)
	if o.TimedOut {
		how = "timed out"
	}
	return fmt.Sprintf("%v: land %s onto %q: the check failed (%s); the change was ejected", ErrCheckFailed, short(o.Change), o.Target, how)
}

// Unwrap returns ErrCheckFailed.
func (e *CheckFailedError) Unwrap() error { return ErrCheckFailed }

// ErrCheckFailed: the queue ejected a change because the check failed on
// it (CheckFailedError carries the outcome).
var ErrCheckFailed = errors.New("mergequeue: check failed")

// err is the error an ejected outcome reports: a *CheckFailedError, or a
// *core.MergeConflictError for a conflict. Nil for a landed one.
func (o *Outcome) err() error {
	switch {
	case o.Landed:
		return nil
	case o.Reason == "conflict":
		return fmt.Errorf("land %s onto %q: %w", short(o.Change), o.Target,
			&core.MergeConflictError{Paths: o.Paths, Hunks: o.Hunks})
	}
	return &CheckFailedError{Outcome: o}
}

// record commits one changeset holding the outcomes, N.json and N.out per
// entry, that no ref names yet, and returns it.
func record(s *core.Store, agent string, outs []*Outcome) (core.ID, error) {
	var cs []core.Change
	for _, o := range outs {
		b, err := json.Marshal(o)
		if err != nil {
			return core.ID{}, err
		}
		name := fmt.Sprintf("%020d", o.Entry)
		cs = append(cs, core.Change{Path: name + ".json", Data: b}, core.Change{Path: name + ".out", Data: []byte(o.Output)})
	}
	return s.Commit(core.CommitRequest{Changes: cs, Agent: agent,
		Message: fmt.Sprintf("merge queue outcome of %d entries of %s", len(outs), outs[0].Target)})
}

// readOutcome reads entry n's outcome from the changeset id.
func readOutcome(sn *core.Snapshot, id core.ID, n uint64) (*Outcome, error) {
	name := fmt.Sprintf("%020d", n)
	b, _, err := sn.ReadPath(id, name+".json")
	if err != nil {
		return nil, err
	}
	o := &Outcome{}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, fmt.Errorf("%w: outcome %s of queue entry %d: %w", core.ErrCorrupt, short(id), n, err)
	}
	out, _, err := sn.ReadPath(id, name+".out")
	if err != nil {
		return nil, err
	}
	o.Output = string(out)
	return o, nil
}

func short(id core.ID) string { return id.String()[:12] }
