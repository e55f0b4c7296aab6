package sched

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
)

// unexpected reports the operations that failed other than as their kind
// may: a lost compare-and-swap (main, cas), a land that conflicts, and
// any error of an operation still running at the crash step crashAt (its
// store may report the crash as such or as a store poisoned by it).
func unexpected(ops []*Op, crashAt int) []Finding {
	var out []Finding
	for _, op := range ops {
		err := op.Err
		switch {
		case err == nil:
		case crashAt > 0 && op.End >= crashAt:
		case errors.Is(err, core.ErrConflict) && (op.Kind == KindMain || op.Kind == KindCAS || op.Kind == KindLand):
		default:
			out = append(out, Finding{Claim: "error", Detail: fmt.Sprintf("%s (%s) failed: %v", op.Name, op.Kind, err)})
		}
	}
	return out
}

// checkStore opens the store the run left (recovering it) and checks the
// operations against its operation log, the witness of a linearization:
//   - C1: every acknowledged move is in the log, and its changeset reads;
//   - a move whose operation reported a conflict is not in the log;
//   - each ref's moves chain (every move's old value is the previous new);
//   - a compare-and-swap's move has the old value it expected;
//   - real-time order: an operation acknowledged before another started
//     is earlier in the log;
//   - a lost compare-and-swap reports a value the ref held;
//   - every ref's value is its last move's, and Verify(deep) is clean.
func checkStore(fs vfs.FS, c *Config, ops []*Op, what string) []Finding {
	var out []Finding
	bad := func(claim, format string, a ...any) {
		out = append(out, Finding{Claim: claim, Detail: what + ": " + fmt.Sprintf(format, a...)})
	}
	o := c.options(fs, func() time.Time { return epoch.Add(time.Hour) })
	st, err := core.Open(storeDir, o)
	if err != nil {
		bad("C1", "the store does not open: %v", err)
		return out
	}
	defer st.Close()
	sn, err := st.Snapshot()
	var moves []core.RefMove
	if err == nil {
		moves, err = sn.Moves(core.MoveQuery{})
	}
	if err != nil {
		bad("C1", "reading the operation log: %v", err)
		return out
	}
	pos, held, last := walkLog(moves, ops, bad)
	for _, op := range ops {
		var ce *core.ConflictError
		if errors.As(op.Err, &ce) && !ce.Current.IsZero() && !held[ce.Ref][ce.Current] {
			bad("linearizable", "%s lost its compare-and-swap to %s, a value %s never held", op.Name, short(ce.Current), ce.Ref)
		}
		if !op.Acked || op.Kind == KindCheckpoint || op.New.IsZero() {
			continue
		}
		if _, ok := pos[op]; !ok {
			bad("C1", "acknowledged %s (%s of %s to %s) is not in the operation log", op.Name, op.Kind, op.Ref, short(op.New))
		} else if _, err := sn.Changeset(op.New); err != nil {
			bad("C1", "acknowledged %s made %s, which does not read: %v", op.Name, short(op.New), err)
		}
	}
	for _, a := range ops {
		pa, ok := pos[a]
		if !ok || !a.Acked {
			continue
		}
		for _, b := range ops {
			if pb, ok := pos[b]; ok && a.End < b.Start && pb < pa {
				bad("linearizable", "%s was acknowledged (step %d) before %s started (step %d), but is later in the log", a.Name, a.End, b.Name, b.Start)
			}
		}
	}
	for ref, want := range last {
		got, err := sn.Ref(ref)
		if errors.Is(err, core.ErrNotFound) {
			got, err = core.ID{}, nil
		}
		if err != nil || got != want {
			bad("linearizable", "ref %s is %s (%v), its last move set %s", ref, short(got), err, short(want))
		}
	}
	if rep, err := st.Verify(true, nil); err != nil {
		bad("C6", "Verify(deep): %v", err)
	} else if len(rep.Problems) > 0 {
		bad("C6", "Verify(deep): %v", rep.Problems)
	}
	return out
}

func short(id core.ID) string {
	if id.IsZero() {
		return "(absent)"
	}
	return id.String()[:12]
}

// walkLog checks the log's chains and each move against the operation
// that made it, and returns each operation's place in the log, the values
// each ref held, and each ref's last value.
func walkLog(moves []core.RefMove, ops []*Op, bad func(claim, format string, a ...any)) (map[*Op]int, map[string]map[core.ID]bool, map[string]core.ID) {
	byName := map[string]*Op{}
	for _, op := range ops {
		byName[op.Name] = op
	}
	pos := map[*Op]int{}
	held := map[string]map[core.ID]bool{}
	last := map[string]core.ID{}
	for i, m := range moves {
		if prev, ok := last[m.Ref]; (ok || m.Old != (core.ID{})) && m.Old != prev {
			bad("linearizable", "move %d of %s (by %s) starts from %s, but the ref was %s", i, m.Ref, m.Agent, short(m.Old), short(prev))
		}
		last[m.Ref] = m.New
		if held[m.Ref] == nil {
			held[m.Ref] = map[core.ID]bool{}
		}
		held[m.Ref][m.New] = true
		op := byName[m.Agent]
		if op == nil {
			continue
		}
		pos[op] = i
		switch {
		case errors.Is(op.Err, core.ErrConflict):
			bad("linearizable", "%s reported a conflict, but its move of %s is in the log", op.Name, m.Ref)
		case op.Expect && m.Old != op.Old:
			bad("linearizable", "%s expected %s at %s, its move starts from %s", op.Name, short(op.Old), m.Ref, short(m.Old))
		}
	}
	return pos, held, last
}
