package core

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/refs"
)

// Op is the operation that made a ref move. Every move records one, with
// the agent that made it (Origin), in the same journal frame as the move.
type Op = refs.Op

// The operations a ref move records. OpUnknown is what a move written by a
// store version that did not record operations reads as.
const (
	OpUnknown   = refs.OpUnknown
	OpCommit    = refs.OpCommit
	OpRefSet    = refs.OpRefSet
	OpRefCreate = refs.OpRefCreate
	OpRefDelete = refs.OpRefDelete
	OpLand      = refs.OpLand
	OpUndo      = refs.OpUndo
	OpImport    = refs.OpImport
)

// Origin says who made a write's ref moves (Agent, opaque like a
// changeset's) and by which operation; for OpUndo, Undoes is the sequence
// number of the frame whose move it reverses.
type Origin = refs.Origin

// ParseOp returns the operation named s, as Op.String names it.
func ParseOp(s string) (Op, error) {
	o, err := refs.ParseOp(s)
	if err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return o, nil
}

// OpID names one ref move: the journal frame that made it, and the ref.
// Ref may be left out where the frame moved one ref only.
type OpID struct {
	Seq uint64
	Ref string
}

// String returns "SEQ:REF", or "SEQ" without a ref. A ref name cannot hold
// ':', so the form is unambiguous.
func (id OpID) String() string {
	if id.Ref == "" {
		return strconv.FormatUint(id.Seq, 10)
	}
	return strconv.FormatUint(id.Seq, 10) + ":" + id.Ref
}

// ParseOpID parses "SEQ" or "SEQ:REF"; anything else is ErrInvalid.
func ParseOpID(s string) (OpID, error) {
	seq, ref, _ := strings.Cut(s, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 || seq[0] == '+' {
		return OpID{}, fmt.Errorf("%w: operation %q: want SEQ or SEQ:REF, SEQ a frame's sequence number", ErrInvalid, s)
	}
	if strings.Contains(s, ":") {
		if err := refs.ValidateName(ref); err != nil {
			return OpID{}, fmt.Errorf("%w: operation %q: %w", ErrInvalid, s, err)
		}
	}
	return OpID{Seq: n, Ref: ref}, nil
}

// RefMove is one ref move with the operation that made it: what the
// operation log lists and watch streams.
type RefMove struct {
	Seq      uint64 // the journal frame that made it
	Ref      string
	Old, New ID // zero: absent (a created or a deleted ref)
	Time     time.Time
	Origin
	// FrameMoves is how many refs the frame moved.
	FrameMoves int
}

// ID returns the move's name: its frame alone when the frame moved no other
// ref, else its frame and ref.
func (m RefMove) ID() OpID {
	if m.FrameMoves == 1 {
		return OpID{Seq: m.Seq}
	}
	return OpID{Seq: m.Seq, Ref: m.Ref}
}

// MoveQuery selects ref moves for Snapshot.Moves.
type MoveQuery struct {
	After  uint64   // only moves of frames after this sequence number
	Until  uint64   // only moves of frames up to this one (0: the snapshot's)
	Refs   []string // only moves of these refs (none: of every ref)
	Agents []string // only moves made by these agents (none: by anyone)
	Limit  int      // only the newest Limit of the moves selected (0: all)
}

func (q *MoveQuery) match(m *RefMove) bool {
	return (len(q.Refs) == 0 || slices.Contains(q.Refs, m.Ref)) &&
		(len(q.Agents) == 0 || slices.Contains(q.Agents, m.Agent))
}

// Moves returns the ref moves q selects among those the snapshot sees, in
// sequence order (a frame's moves by ref name). The moves since the newest
// checkpoint the process knows come from memory; older ones from the
// reflog file, read from its end: only the chunks holding frames after
// q.After are read, and with a Limit only until enough moves are found, so
// the last few moves cost a few reads whatever the history's length.
func (sn *Snapshot) Moves(q MoveQuery) ([]RefMove, error) {
	until := sn.seq
	if q.Until != 0 && q.Until < until {
		until = q.Until
	}
	if q.After >= until {
		return nil, nil
	}
	sn.s.view.mu.Lock()
	rt, err := sn.s.refsAt(sn.seq)
	if err != nil {
		sn.s.view.mu.Unlock()
		return nil, err
	}
	base, rlen := rt.Base(), sn.s.view.proj.ReflogLen
	var out []RefMove
	if lo := max(q.After+1, base); lo <= until {
		out = q.selectMoves(rt.Since(lo, until+1))
	}
	sn.s.view.mu.Unlock()
	if base == 0 || q.After+1 >= base || (q.Limit > 0 && len(out) >= q.Limit) {
		return limitMoves(out, q.Limit), nil
	}
	// The file's first rlen bytes never change, so reading them outside
	// s.view.mu is safe against a concurrent checkpoint.
	// Every move from the first frame on is every chunk: one read of the
	// file costs less than two a chunk from its end.
	read := reflog.ReadBack
	if q.After == 0 && q.Limit <= 0 {
		read = reflog.ReadAll
	}
	var older [][]RefMove
	n := len(out)
	err = read(sn.s.fs, sn.s.dir, rlen, q.After, min(until, base-1), func(c *reflog.Chunk) bool {
		ms := q.selectMoves(c.Names, c.Logs)
		for len(ms) > 0 && ms[0].Seq <= q.After {
			ms = ms[1:]
		}
		for len(ms) > 0 && ms[len(ms)-1].Seq > until {
			ms = ms[:len(ms)-1]
		}
		older = append(older, ms)
		n += len(ms)
		return q.Limit <= 0 || n < q.Limit
	})
	if err != nil {
		return nil, err
	}
	var all []RefMove
	for i := len(older) - 1; i >= 0; i-- {
		all = append(all, older[i]...)
	}
	return limitMoves(append(all, out...), q.Limit), nil
}

// selectMoves turns moves by ref into RefMoves in sequence order, counting
// each frame's moves before q's filter keeps those it selects.
func (q *MoveQuery) selectMoves(names []string, logs [][]refs.Entry) []RefMove {
	var all []RefMove
	for i, n := range names {
		for _, e := range logs[i] {
			all = append(all, RefMove{Seq: e.Seq, Ref: n, Old: e.Old, New: e.New, Time: e.Time, Origin: e.Origin})
		}
	}
	slices.SortFunc(all, func(a, b RefMove) int {
		if a.Seq != b.Seq {
			return cmpU64(a.Seq, b.Seq)
		}
		return strings.Compare(a.Ref, b.Ref)
	})
	out := all[:0]
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].Seq == all[i].Seq {
			j++
		}
		for k := i; k < j; k++ {
			all[k].FrameMoves = j - i
			if q.match(&all[k]) {
				out = append(out, all[k])
			}
		}
		i = j
	}
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// limitMoves keeps the newest limit moves (all when limit <= 0).
func limitMoves(ms []RefMove, limit int) []RefMove {
	if limit > 0 && len(ms) > limit {
		return ms[len(ms)-limit:]
	}
	return ms
}

// Undo reverses the ref move id by compare-and-swap: the ref goes from the
// move's new value back to its old one (a ref the move created is deleted,
// one it deleted is created again), in one frame recorded as OpUndo by
// agent, naming id's frame. It returns the undo's own move.
//
// The move must be the ref's last: if the ref has moved since (even back
// to the same value), Undo writes nothing and returns a *ConflictError
// with the ref's current value. An id whose frame moved several refs must
// name the ref (ErrInvalid otherwise); an id naming no move the store
// holds is ErrNotFound.
func (s *Store) Undo(id OpID, agent string) (RefMove, error) {
	if err := s.usable(); err != nil {
		return RefMove{}, err
	}
	o := Origin{Agent: agent, Op: OpUndo, Undoes: id.Seq}
	if err := o.Validate(); err != nil {
		return RefMove{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	sn, err := s.Snapshot()
	if err != nil {
		return RefMove{}, err
	}
	m, err := sn.moveOf(id)
	if err != nil {
		return RefMove{}, err
	}
	var need []ID
	if !m.Old.IsZero() {
		need = append(need, m.Old)
	}
	t := &txn.Txn{Time: s.opts.Now().UTC(), Origin: o,
		Moves: []refs.Move{{Name: m.Ref, Old: m.New, New: m.Old, Since: m.Seq}}}
	if err := s.pipe.Commit(t, need); err != nil {
		if uerr := s.undoneBy(m, err); uerr != nil {
			err = uerr
		}
		if errors.Is(err, ErrNotFound) {
			return RefMove{}, fmt.Errorf("undo %s: the value it would restore, %s, is gone: gc removes what only reflog moves older than its retention name: %w",
				m.ID(), errs.Short(m.Old), err)
		}
		return RefMove{}, fmt.Errorf("undo %s: %w", m.ID(), err)
	}
	return RefMove{Seq: t.Seq, Ref: m.Ref, Old: m.New, New: m.Old, Time: t.Time, Origin: o, FrameMoves: 1}, nil
}

// undoneBy marks err, a lost compare-and-swap of an undo of m, with the
// frame of an undo of m made since, if there is one: an undo retried after
// its answer was lost then says so, rather than that the ref moved. An
// error reading the moves is returned, to take err's place (C9: a fault
// is reported, never swallowed).
func (s *Store) undoneBy(m RefMove, err error) error {
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return nil
	}
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	later, err := sn.Moves(MoveQuery{After: m.Seq, Refs: []string{m.Ref}})
	if err != nil {
		return err
	}
	for _, u := range later {
		if u.Origin.Op == OpUndo && u.Origin.Undoes == m.Seq {
			ce.UndoneBy = u.Seq
			return nil
		}
	}
	return nil
}

// moveOf finds the move id names.
func (sn *Snapshot) moveOf(id OpID) (RefMove, error) {
	if id.Seq == 0 {
		return RefMove{}, fmt.Errorf("%w: operation %s", ErrInvalid, id)
	}
	ms, err := sn.Moves(MoveQuery{After: id.Seq - 1, Until: id.Seq})
	if err != nil {
		return RefMove{}, err
	}
	var names []string
	for _, m := range ms {
		if m.Ref == id.Ref {
			return m, nil
		}
		names = append(names, m.Ref)
	}
	switch {
	case len(ms) == 0:
		return RefMove{}, fmt.Errorf("%w: no ref move at frame %d", ErrNotFound, id.Seq)
	case id.Ref != "":
		return RefMove{}, fmt.Errorf("%w: frame %d moved no ref %q (it moved %s)", ErrNotFound, id.Seq, id.Ref, strings.Join(names, ", "))
	case len(ms) == 1:
		return ms[0], nil
	}
	return RefMove{}, fmt.Errorf("%w: frame %d moved %d refs (%s): name one as %d:REF", ErrInvalid, id.Seq, len(ms), strings.Join(names, ", "), id.Seq)
}
