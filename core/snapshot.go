package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// Snapshot is a lock-free, read-only view of the durable prefix: it sees
// every frame up to the durable position published when it was taken and
// nothing later, so nothing it returns can be taken away by a crash (C4).
type Snapshot struct {
	s   *Store
	seq uint64 // last durable sequence number visible
	pos journal.Pos
}

// Snapshot returns a view of the durable prefix. It takes no file lock; it
// reads the published durable position and replays frames up to it.
func (s *Store) Snapshot() (*Snapshot, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("%w: store is closed", ErrClosed)
	}
	// One read gives both records: the durable one says what a snapshot
	// sees, the end one whether a garbage collection ran (its generation).
	end, eok, dur, ok, err := s.state.ReadBoth()
	if err != nil {
		return nil, err
	}
	if !ok || dur.Boot != s.boot {
		if err := s.writer.With(func() error { _, err := s.recoverLocked(false); return err }); err != nil {
			return nil, err
		}
		if dur, ok, err = s.state.ReadStable(state.Durable, s.boot); err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.Corrupt(s.state.Path(), state.DurableOff, "durable record unreadable after recovery")
		}
	}
	// The common case takes no mutex: the projection already holds the
	// durable prefix, so a reader does not wait for a writer of this
	// process that is appending (P7). An end record that cannot be read
	// (torn by a writer) leaves the generation as the projection has it:
	// a catch-up that then finds reclaimed segments rebuilds it (catchUp).
	gcKnown := eok && end.Epoch == dur.Epoch
	if m := s.view.mark.Load(); m != nil && m.epoch == dur.Epoch && (!gcKnown || m.gc == end.GC) && m.next >= dur.NextSeq {
		return &Snapshot{s: s, seq: dur.NextSeq - 1, pos: dur.Pos}, nil
	}
	if err := s.snapshotCatchUp(dur, end.GC, gcKnown); err != nil {
		return nil, err
	}
	s.adoptForReader()
	return &Snapshot{s: s, seq: dur.NextSeq - 1, pos: dur.Pos}, nil
}

// snapshotCatchUp brings the projection to the durable record dur, in
// garbage collection generation gc when known (else the projection's).
func (s *Store) snapshotCatchUp(dur state.Rec, gc uint32, known bool) error {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if !known {
		gc = s.view.gc
	}
	return s.refreshLocked(dur.Epoch, gc, dur.NextSeq)
}

// Seq returns the last journal sequence number the snapshot sees.
func (sn *Snapshot) Seq() uint64 { return sn.seq }

// Ref returns a ref's value, or ErrNotFound.
func (sn *Snapshot) Ref(name string) (ID, error) {
	sn.s.view.mu.Lock()
	rt, err := sn.s.refsAt(sn.seq)
	var id ID
	if err == nil {
		id = rt.Get(name, sn.seq)
	}
	sn.s.view.mu.Unlock()
	if err != nil {
		return ID{}, err
	}
	if id.IsZero() {
		return ID{}, fmt.Errorf("%w: ref %q", ErrNotFound, name)
	}
	return id, nil
}

// Refs lists every ref, sorted by name.
func (sn *Snapshot) Refs() ([]RefEntry, error) {
	sn.s.view.mu.Lock()
	defer sn.s.view.mu.Unlock()
	rt, err := sn.s.refsAt(sn.seq)
	if err != nil {
		return nil, err
	}
	var out []RefEntry
	for _, m := range rt.List(sn.seq) {
		out = append(out, RefEntry{Name: m.Name, ID: m.New})
	}
	return out, nil
}

// RefLog returns the moves of a ref, oldest first; ErrNotFound if it never
// existed. The moves before the newest checkpoint the process knows come
// from the reflog file (one read of its chunks), the rest from memory.
func (sn *Snapshot) RefLog(name string) ([]RefLogEntry, error) {
	sn.s.view.mu.Lock()
	base, rlen := sn.s.view.proj.Refs.Base(), sn.s.view.proj.ReflogLen
	var log []refs.Entry
	for _, e := range sn.s.view.proj.Refs.Log(name, sn.seq) {
		if e.Seq >= base {
			log = append(log, e)
		}
	}
	sn.s.view.mu.Unlock()
	if base > 0 {
		// The file's first rlen bytes never change, so reading them
		// outside s.view.mu is safe against a concurrent checkpoint.
		older, err := reflog.Read(sn.s.fs, sn.s.dir, rlen)
		if err != nil {
			return nil, err
		}
		var old []refs.Entry
		for _, e := range older[name] {
			if e.Seq <= sn.seq {
				old = append(old, e)
			}
		}
		log = append(old, log...)
	}
	if len(log) == 0 {
		return nil, fmt.Errorf("%w: ref %q has no log", ErrNotFound, name)
	}
	out := make([]RefLogEntry, len(log))
	for i, e := range log {
		out[i] = RefLogEntry{Seq: e.Seq, Old: e.Old, New: e.New, Time: e.Time, Origin: e.Origin}
	}
	return out, nil
}

// Resolve turns a revision into a changeset id: a full id, a unique prefix
// of at least 4 hex digits, a ref name, each optionally followed by ~N
// (N first parents back). An ambiguous prefix is an *AmbiguousError.
func (sn *Snapshot) Resolve(rev string) (ID, error) {
	base, n := rev, 0
	if i := strings.LastIndexByte(rev, '~'); i >= 0 {
		k := 1
		if i+1 < len(rev) {
			v, err := strconv.Atoi(rev[i+1:])
			if err != nil || v < 0 {
				return ID{}, fmt.Errorf("%w: revision %q: bad ~N", ErrInvalid, rev)
			}
			k = v
		}
		base, n = rev[:i], k
	}
	id, err := sn.resolveBase(base)
	if err != nil {
		return ID{}, err
	}
	for ; n > 0; n-- {
		cs, err := sn.Changeset(id)
		if err != nil {
			return ID{}, err
		}
		if len(cs.Parents) == 0 {
			return ID{}, fmt.Errorf("%w: %q goes past the first changeset", ErrNotFound, rev)
		}
		id = cs.Parents[0]
	}
	return id, nil
}

func (sn *Snapshot) resolveBase(rev string) (ID, error) {
	if rev == "" {
		return ID{}, fmt.Errorf("%w: empty revision", ErrInvalid)
	}
	if id, err := sn.Ref(rev); err == nil {
		return id, nil
	}
	if len(rev) == 64 {
		if id, err := objects.ParseID(rev); err == nil {
			if _, err := sn.Changeset(id); err != nil {
				return ID{}, err
			}
			return id, nil
		}
	}
	p, err := objects.ParsePrefix(rev)
	if err != nil {
		return ID{}, fmt.Errorf("%w: revision %q is not a ref, id or prefix of 4+ hex digits", ErrNotFound, rev)
	}
	c, err := sn.visible(func(x *proj.RunIdx) []ID { return x.Prefix(p) })
	if err != nil {
		return ID{}, err
	}
	switch len(c) {
	case 0:
		return ID{}, fmt.Errorf("%w: no changeset matches %q", ErrNotFound, rev)
	case 1:
		return c[0], nil
	}
	return ID{}, &AmbiguousError{Prefix: rev, Candidates: c}
}

// Changeset returns a changeset. The caller owns the result. A long-lived
// Store answers a changeset its snapshots read before from memory (see
// Options.CacheBytes), under the same visibility rule as the index.
func (sn *Snapshot) Changeset(id ID) (*objects.Changeset, error) {
	if cs, seq, ok := sn.s.csc.Get(id); ok && seq <= sn.seq {
		return cs, nil
	}
	data, seq, err := sn.s.readObjectSeq(id, objects.KindChangeset, sn.seq, false)
	if err != nil {
		return nil, err
	}
	cs, err := treebuild.DecodeChangeset(id, data)
	if err != nil {
		return nil, err
	}
	sn.s.csc.Put(id, seq, cs)
	return cs, nil
}

// Tree returns a tree.
func (sn *Snapshot) Tree(id ID) (*objects.Tree, error) {
	data, err := sn.s.readObject(id, objects.KindTree, sn.seq, false)
	if err != nil {
		return nil, err
	}
	return treebuild.DecodeTree(id, data)
}

// Blob returns a blob's content.
func (sn *Snapshot) Blob(id ID) ([]byte, error) {
	return sn.s.readObject(id, objects.KindBlob, sn.seq, false)
}

// entryAt walks from changeset cs's root to p ("" is the root directory).
func (sn *Snapshot) entryAt(cs ID, p string) (objects.Entry, error) {
	c, err := sn.Changeset(cs)
	if err != nil {
		return objects.Entry{}, err
	}
	e := objects.Entry{Mode: objects.ModeDir, ID: c.Root}
	if p == "" {
		return e, nil
	}
	if _, err := objects.CleanPath(p); err != nil {
		return e, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for _, comp := range strings.Split(p, "/") {
		if e.Mode != objects.ModeDir {
			return e, fmt.Errorf("%w: path %q", ErrNotFound, p)
		}
		t, err := sn.Tree(e.ID)
		if err != nil {
			return e, err
		}
		var ok bool
		if e, ok = t.Lookup(comp); !ok {
			return e, fmt.Errorf("%w: path %q", ErrNotFound, p)
		}
	}
	return e, nil
}

// ReadPath returns the content and entry of a file in changeset cs.
func (sn *Snapshot) ReadPath(cs ID, p string) ([]byte, objects.Entry, error) {
	e, err := sn.entryAt(cs, p)
	if err != nil {
		return nil, e, err
	}
	if e.Mode == objects.ModeDir {
		return nil, e, fmt.Errorf("%w: path %q is a directory", ErrInvalid, p)
	}
	data, err := sn.Blob(e.ID)
	return data, e, err
}

// ListPath lists a directory of changeset cs ("" is the root).
func (sn *Snapshot) ListPath(cs ID, dir string) ([]objects.Entry, error) {
	e, err := sn.entryAt(cs, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	if e.Mode != objects.ModeDir {
		return nil, fmt.Errorf("%w: path %q is a file", ErrInvalid, dir)
	}
	t, err := sn.Tree(e.ID)
	if err != nil {
		return nil, err
	}
	return t.Entries, nil
}

// Flatten lists every file path of a changeset's tree with its entry.
func (sn *Snapshot) Flatten(cs ID) (map[string]objects.Entry, error) {
	c, err := sn.Changeset(cs)
	if err != nil {
		return nil, err
	}
	out := map[string]objects.Entry{}
	var walk func(prefix string, id ID) error
	walk = func(prefix string, id ID) error {
		t, err := sn.Tree(id)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			p := prefix + e.Name
			if e.Mode == objects.ModeDir {
				if err := walk(p+"/", e.ID); err != nil {
					return err
				}
			} else {
				out[p] = e
			}
		}
		return nil
	}
	return out, walk("", c.Root)
}

// Log returns up to n changesets following first parents from from,
// starting with from itself (n <= 0: no limit).
func (sn *Snapshot) Log(from ID, n int) ([]ID, error) {
	var out []ID
	id := from
	for n <= 0 || len(out) < n {
		cs, err := sn.Changeset(id)
		if err != nil {
			return out, err
		}
		out = append(out, id)
		if len(cs.Parents) == 0 {
			break
		}
		id = cs.Parents[0]
	}
	return out, nil
}

// visible runs a lookup on the index and keeps the ids this snapshot may
// see (brought by a frame at or below its durable sequence), returning any
// error the index met while reading its runs.
func (sn *Snapshot) visible(lookup func(*proj.RunIdx) []ID) ([]ID, error) {
	sn.s.view.mu.Lock()
	defer sn.s.view.mu.Unlock()
	var out []ID
	for _, id := range lookup(sn.s.view.proj.Idx) {
		if sn.s.view.proj.Idx.VisibleAt(id, sn.seq) {
			out = append(out, id)
		}
	}
	if err := sn.s.view.proj.Idx.TakeErr(); err != nil {
		return nil, err
	}
	return out, nil
}

// ByDelta returns every changeset with delta hash h, or ErrNotFound.
func (sn *Snapshot) ByDelta(h objects.Hash) ([]ID, error) {
	out, err := sn.visible(func(x *proj.RunIdx) []ID { return x.ByDelta(h) })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no changeset with delta %s", ErrNotFound, h)
	}
	return out, nil
}
