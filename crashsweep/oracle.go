package crashsweep

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// state is what the oracle compares: whether a store exists, its refs,
// which of the changesets the scenario creates are present, the operation
// log (every ref move with its origin, oldest first), and the protected ref
// patterns. An acknowledged protect is thus held to C1 like a ref move: the
// recovered state must be a prefix state at or after it.
type state struct {
	exists    bool
	refs      map[string]core.ID
	cs        map[core.ID]bool
	moves     []string
	protected map[string]bool
}

func (s *state) clone() *state {
	return &state{exists: s.exists, refs: maps.Clone(s.refs), cs: maps.Clone(s.cs), moves: slices.Clone(s.moves),
		protected: maps.Clone(s.protected)}
}

func (s *state) equal(o *state) bool {
	return s.exists == o.exists && maps.Equal(s.refs, o.refs) && maps.Equal(s.cs, o.cs) && slices.Equal(s.moves, o.moves) &&
		maps.Equal(s.protected, o.protected)
}

// moveLine is one move of the operation log as the oracle compares it: the
// ref, its old and new value, and the move's origin. Sequence numbers are
// left out but for an undo's: a state derived from the operations does not
// know them.
func moveLine(ref string, old, new core.ID, o core.Origin) string {
	l := fmt.Sprintf("%s %s>%s %q %s", ref, old.String()[:12], new.String()[:12], o.Agent, o.Op)
	if o.Undoes != 0 {
		l += fmt.Sprintf(" undoes %d", o.Undoes)
	}
	return l
}

func (s *state) apply(e effect) *state {
	n := s.clone()
	if n.refs == nil {
		n.refs = map[string]core.ID{}
	}
	if n.cs == nil {
		n.cs = map[core.ID]bool{}
	}
	if n.protected == nil {
		n.protected = map[string]bool{}
	}
	for p, on := range e.protect {
		if on {
			n.protected[p] = true
		} else {
			delete(n.protected, p)
		}
	}
	if e.createsStore {
		n.exists = true
	}
	for _, id := range e.changesets {
		n.cs[id] = true
	}
	for _, id := range e.drop {
		delete(n.cs, id)
	}
	// The moves of one frame, by ref name, as the operation log lists them.
	for _, k := range slices.Sorted(maps.Keys(e.set)) {
		n.moves = append(n.moves, moveLine(k, n.refs[k], e.set[k], e.origin))
		n.refs[k] = e.set[k]
	}
	for _, k := range e.del {
		n.moves = append(n.moves, moveLine(k, n.refs[k], core.ID{}, e.origin))
		delete(n.refs, k)
	}
	return n
}

// String prints a state compactly for violation reports.
func (s *state) String() string {
	if !s.exists {
		return "no store"
	}
	var b strings.Builder
	names := slices.Sorted(maps.Keys(s.refs))
	b.WriteString("refs{")
	for i, n := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", n, s.refs[n].String()[:8])
	}
	fmt.Fprintf(&b, "} changesets=%d moves=%d", len(s.cs), len(s.moves))
	if len(s.protected) > 0 {
		fmt.Fprintf(&b, " protected=%v", slices.Sorted(maps.Keys(s.protected)))
	}
	return b.String()
}

// diff lists how s differs from want, naming full ids.
func (s *state) diff(want *state) string {
	var d []string
	if s.exists != want.exists {
		d = append(d, fmt.Sprintf("store exists %v, want %v", s.exists, want.exists))
	}
	for _, n := range slices.Sorted(maps.Keys(want.refs)) {
		if g, ok := s.refs[n]; !ok {
			d = append(d, fmt.Sprintf("ref %s missing, want %s", n, want.refs[n]))
		} else if g != want.refs[n] {
			d = append(d, fmt.Sprintf("ref %s = %s, want %s", n, g, want.refs[n]))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.refs)) {
		if _, ok := want.refs[n]; !ok {
			d = append(d, fmt.Sprintf("unexpected ref %s = %s", n, s.refs[n]))
		}
	}
	for id := range want.cs {
		if !s.cs[id] {
			d = append(d, fmt.Sprintf("changeset %s missing", id))
		}
	}
	for id := range s.cs {
		if !want.cs[id] {
			d = append(d, fmt.Sprintf("unexpected changeset %s", id))
		}
	}
	if !maps.Equal(s.protected, want.protected) {
		d = append(d, fmt.Sprintf("protected %v, want %v", slices.Sorted(maps.Keys(s.protected)), slices.Sorted(maps.Keys(want.protected))))
	}
	sort.Strings(d)
	for i := range max(len(s.moves), len(want.moves)) {
		var g, w string
		if i < len(s.moves) {
			g = s.moves[i]
		}
		if i < len(want.moves) {
			w = want.moves[i]
		}
		if g != w {
			d = append(d, fmt.Sprintf("operation log move %d is %q, want %q", i+1, g, w))
			break
		}
	}
	return strings.Join(d, "; ")
}

// observeStore reads a store's state through a fresh snapshot, probing the
// changesets in known (nil: none).
func observeStore(s *core.Store, known []core.ID) (*state, error) {
	sn, err := s.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return observeSnapshot(sn, known)
}

func observeSnapshot(sn *core.Snapshot, known []core.ID) (*state, error) {
	st := &state{exists: true, refs: map[string]core.ID{}, cs: map[core.ID]bool{}, protected: map[string]bool{}}
	ps, err := sn.Protected()
	if err != nil {
		return nil, fmt.Errorf("protected: %w", err)
	}
	for _, p := range ps {
		st.protected[p.Pattern] = true
	}
	refs, err := sn.Refs()
	if err != nil {
		return nil, fmt.Errorf("refs: %w", err)
	}
	for _, r := range refs {
		st.refs[r.Name] = r.ID
	}
	moves, err := sn.Moves(core.MoveQuery{})
	if err != nil {
		return nil, fmt.Errorf("moves: %w", err)
	}
	for _, m := range moves {
		if m.Ref != postRef {
			st.moves = append(st.moves, moveLine(m.Ref, m.Old, m.New, m.Origin))
		}
	}
	for _, id := range known {
		_, err := sn.Changeset(id)
		switch {
		case err == nil:
			st.cs[id] = true
		case errors.Is(err, core.ErrNotFound):
		default:
			return nil, fmt.Errorf("changeset %s: %w", id.String()[:12], err)
		}
	}
	return st, nil
}

// reference is everything the uncrashed, fault-free run of a scenario
// established: the operations in frame order, the state after each prefix of
// them, the content of every changeset, and the call trace that numbers the
// crash points.
type reference struct {
	sc      *scenarios.Scenario
	ops     []*opRecord
	order   []int
	pos     []int    // op index → position in order
	states  []*state // states[k]: after the first k operations in frame order
	known   []core.ID
	content map[core.ID]map[string][32]byte
	trace   []faultfs.Call
	calls   int64
	counts  map[faultfs.Op]int64
}

// bounds are what a crashed (or faulted) run allows: every state from
// position kmin to kmax, and at least kread (what a reader saw).
type bounds struct {
	kmin, kmax, kread int
	readBy            string // the reader that set kread
}

func (ref *reference) boundsOf(r *run) bounds {
	var b bounds
	for i, op := range r.ops {
		p := ref.pos[i] + 1
		if op.acked && p > b.kmin {
			b.kmin = p
		}
		if op.started && p > b.kmax {
			b.kmax = p
		}
		if op.read != nil {
			if lo, _, ok := ref.match(op.read); ok && lo > b.kread {
				b.kread, b.readBy = lo, fmt.Sprintf("read at %s", op.step.Pos)
			}
		}
	}
	return b
}

// match returns the range of prefix positions whose state equals st.
func (ref *reference) match(st *state) (lo, hi int, ok bool) {
	lo, hi = -1, -1
	for k, s := range ref.states {
		if s.equal(st) {
			if lo < 0 {
				lo = k
			}
			hi = k
		}
	}
	return lo, hi, lo >= 0
}

// describe names the operation at frame-order position k (1-based).
func (ref *reference) describe(k int) string {
	if k <= 0 || k > len(ref.order) {
		return "(none)"
	}
	op := ref.ops[ref.order[k-1]]
	return fmt.Sprintf("op %d (%s at %s)", k, op.step.Kind, op.step.Pos)
}

// problem is one claim violation found on one state.
type problem struct {
	claim  scenarios.Claim
	detail string
}

// classify explains why a recovered state is not an allowed one.
func (ref *reference) classify(got *state, b bounds) []problem {
	lo, hi, ok := ref.match(got)
	if ok {
		var out []problem
		if hi < b.kmin {
			out = append(out, problem{scenarios.C1, fmt.Sprintf("acknowledged %s lost: recovered state %s is the state after %d of %d acknowledged operations",
				ref.describe(b.kmin), got, hi, b.kmin)})
		}
		if hi < b.kread {
			out = append(out, problem{scenarios.C4, fmt.Sprintf("a reader (%s) saw the state after %s, the recovered state %s is older",
				b.readBy, ref.describe(b.kread), got)})
		}
		if lo > b.kmax {
			out = append(out, problem{scenarios.C3, fmt.Sprintf("recovered state %s includes %s, which never started", got, ref.describe(lo))})
		}
		return out
	}
	if !got.exists {
		return []problem{{scenarios.C1, fmt.Sprintf("the store is gone, but %s was acknowledged", ref.describe(b.kmin))}}
	}
	// No prefix matches. Find the first acknowledged changeset or ref value
	// missing (C1), a later operation present while an earlier one is absent
	// (C3), or a partial operation (C2).
	want := ref.states[min(b.kmin, len(ref.states)-1)]
	for id := range want.cs {
		if !got.cs[id] {
			return []problem{{scenarios.C1, fmt.Sprintf("changeset %s of an acknowledged operation is missing (recovered %s)", id.String()[:12], got)}}
		}
	}
	for k := 1; k < len(ref.states); k++ {
		prev, cur := ref.states[k-1], ref.states[k]
		for id := range cur.cs {
			if !prev.cs[id] && !got.cs[id] {
				for j := k + 1; j < len(ref.states); j++ {
					for id2 := range ref.states[j].cs {
						if !ref.states[j-1].cs[id2] && got.cs[id2] {
							return []problem{{scenarios.C3, fmt.Sprintf("%s is present but the earlier %s is not", ref.describe(j), ref.describe(k))}}
						}
					}
				}
			}
		}
	}
	return []problem{{scenarios.C2, fmt.Sprintf("recovered state %s is no prefix of the operations: an operation is partly present (nearest allowed: %s)", got, ref.states[min(b.kmax, len(ref.states)-1)])}}
}

// contentProblems reads every present changeset's files and compares them
// with the reference: a ref or changeset naming an absent object is C2, a
// blob whose bytes differ is C6 (corruption that was not detected).
//
// With corruptOK, a read that fails with ErrCorrupt is a detection, not a
// problem (the bit-flip check).
func (ref *reference) contentProblems(sn *core.Snapshot, got *state, corruptOK bool) []problem {
	var out []problem
	for name, id := range got.refs {
		if !got.cs[id] {
			if _, err := sn.Changeset(id); err != nil {
				out = append(out, problem{scenarios.C2, fmt.Sprintf("ref %s names changeset %s, which is absent: %v", name, id.String()[:12], err)})
			}
		}
	}
	// Byte order is the order of the hex strings, without making them.
	ids := slices.SortedFunc(maps.Keys(got.cs), func(a, b core.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		want := ref.content[id]
		files, err := sn.Flatten(id)
		if err != nil && corruptOK && errors.Is(err, core.ErrCorrupt) {
			continue
		}
		if err != nil {
			out = append(out, problem{scenarios.C2, fmt.Sprintf("changeset %s is present but its tree is not readable: %v", id.String()[:12], err)})
			continue
		}
		if len(files) != len(want) {
			out = append(out, problem{scenarios.C2, fmt.Sprintf("changeset %s has %d files, want %d", id.String()[:12], len(files), len(want))})
			continue
		}
		paths := slices.Sorted(maps.Keys(files))
		for _, p := range paths {
			h, ok := want[p]
			if !ok {
				out = append(out, problem{scenarios.C2, fmt.Sprintf("changeset %s has unexpected file %q", id.String()[:12], p)})
				break
			}
			data, err := sn.Blob(files[p].ID)
			if err != nil && corruptOK && errors.Is(err, core.ErrCorrupt) {
				break
			}
			if err != nil {
				out = append(out, problem{scenarios.C2, fmt.Sprintf("changeset %s file %q names blob %s, not readable: %v", id.String()[:12], p, files[p].ID.String()[:12], err)})
				break
			}
			if blake3.Sum256(data) != h {
				out = append(out, problem{scenarios.C6, fmt.Sprintf("changeset %s file %q reads back different bytes than were committed (undetected corruption)", id.String()[:12], p)})
				break
			}
		}
	}
	return out
}

// isAbsent reports whether an Open error means "no store here", which is an
// allowed result of a crash during init.
func isAbsent(err error) bool {
	return errors.Is(err, core.ErrNotStore) || errors.Is(err, fs.ErrNotExist)
}

// openState opens the store on fsys and observes it. A nil store with a nil
// error means no store exists.
func (ref *reference) openState(fsys vfs.FS, weaken testknobs.Weakening) (*core.Store, *state, error) {
	s, err := core.Open(storeDir, storeOptions(ref.sc, fsys, weaken, fixedNow))
	if err != nil {
		if isAbsent(err) {
			return nil, &state{}, nil
		}
		return nil, nil, err
	}
	st, err := observeStore(s, ref.known)
	if err != nil {
		return s, nil, err
	}
	return s, st, nil
}

func fixedNow() time.Time { return epoch.Add(1000 * time.Hour) }

func sortProblems(ps []problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].claim < ps[j].claim })
}
