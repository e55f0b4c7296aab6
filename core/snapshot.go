package core

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/treebuild"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/internal/testknobs"
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
	dur, ok, err := s.state.Read(state.Durable)
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
	// process that is appending (P7).
	if m := s.view.mark.Load(); m != nil && m.epoch == dur.Epoch && m.next >= dur.NextSeq {
		return &Snapshot{s: s, seq: dur.NextSeq - 1, pos: dur.Pos}, nil
	}
	if err := s.snapshotCatchUp(dur); err != nil {
		return nil, err
	}
	s.adoptForReader()
	return &Snapshot{s: s, seq: dur.NextSeq - 1, pos: dur.Pos}, nil
}

// snapshotCatchUp brings the projection to the durable record dur.
func (s *Store) snapshotCatchUp(dur state.Rec) error {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if dur.Epoch != s.view.epoch {
		if err := s.reload(dur.Epoch, dur.NextSeq); err != nil {
			return err
		}
	}
	return s.catchUp(dur.NextSeq)
}

// adoptForReader swaps the projection's tail for the runs of a newer
// checkpoint once the tail holds more than 2K frames. Writers do this when
// they are due for a checkpoint (checkpointLocked); a process that only
// reads never is, and its tail held every frame it had replayed, without
// end in a long-lived process beside busy writers. It is best effort: a
// busy CKPTLOCK (held while a checkpoint or a merge installs runs), an I/O
// error or no newer checkpoint leaves the projection as it is, complete,
// and it tries again K frames later.
func (s *Store) adoptForReader() {
	k := uint64(s.opts.CheckpointEvery)
	s.view.mu.Lock()
	next, base := s.view.proj.NextSeq, s.view.proj.CkptSeq
	s.view.mu.Unlock()
	if next < base+2*k || next < s.adopt.tried.Load()+k || !s.adopt.running.CompareAndSwap(false, true) {
		return
	}
	defer s.adopt.running.Store(false)
	s.adopt.tried.Store(next)
	l, err := s.fs.Lock(s.lockPath(ckpt.LockName), 0)
	if err != nil {
		return
	}
	defer l.Unlock()
	// The checkpoint file alone first: its runs are opened only if it is
	// newer than the projection's.
	cur, err := ckpt.ReadFile(s.fs, s.dir)
	if err != nil || cur.NextSeq <= base {
		return
	}
	x, err := ckpt.OpenRuns(s.fs, s.dir, cur.Runs)
	if err != nil {
		return
	}
	s.ckptNext.Store(max(s.ckptNext.Load(), cur.NextSeq))
	s.installIndex(x, cur.Runs, cur.NextSeq, cur.Epoch, cur.ReflogLen)
}

// readObject returns the encoding of object id of kind k visible at maxSeq,
// checking it against its id (unless the SkipChecksum canary is on).
// catchUp lets the writer's builder see frames other processes appended
// since it last looked.
func (s *Store) readObject(id ID, k objects.Kind, maxSeq uint64, catchUp bool) ([]byte, error) {
	data, _, err := s.readObjectSeq(id, k, maxSeq, catchUp)
	return data, err
}

// readObjectSeq is readObject that also returns the sequence number of the
// frame that brought the object (0 for a blob or tree from an index run).
func (s *Store) readObjectSeq(id ID, k objects.Kind, maxSeq uint64, catchUp bool) ([]byte, uint64, error) {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	l, ok := s.view.proj.Idx.GetKind(id, k)
	if !ok && catchUp {
		end, eok, err := s.state.ReadStable(state.End, s.boot)
		if err != nil {
			return nil, 0, err
		}
		if eok && end.Epoch == s.view.epoch {
			if err := s.catchUp(end.NextSeq); err != nil {
				return nil, 0, err
			}
			l, ok = s.view.proj.Idx.GetKind(id, k)
		}
	}
	if ok && l.Seq > maxSeq && k != objects.KindChangeset {
		// The tail's record may be a later copy of a blob or tree an index
		// run already holds (replay does not look in the runs for them);
		// the run's record is visible to every snapshot.
		if rl, rok := s.view.proj.Idx.RunKind(id, k); rok {
			l = rl
		}
	}
	if !ok || l.Seq > maxSeq {
		if err := s.view.proj.Idx.TakeErr(); err != nil {
			return nil, 0, err
		}
	}
	if !ok || l.Seq > maxSeq {
		return nil, 0, fmt.Errorf("%w: %s %s", ErrNotFound, k, id)
	}
	if l.Kind != k {
		return nil, 0, fmt.Errorf("%w: %s is a %s, not a %s", ErrNotFound, id, l.Kind, k)
	}
	data := make([]byte, l.Size)
	var file string
	var off int64
	if l.Loose {
		_, file = loose.Path(s.dir, id)
		if err := loose.Read(s.fs, file, data); err != nil {
			return nil, 0, err
		}
	} else {
		if err := s.view.reader.ReadAt(l.Seg, l.Off, data); err != nil {
			return nil, 0, errs.IO("read "+id.String(), err)
		}
	}
	if s.opts.weaken&testknobs.SkipChecksum == 0 && objects.IDOf(k, data) != id {
		if !l.Loose {
			file, off = s.jcfg.SegPath(l.Seg), l.Off
		}
		return nil, 0, errs.Corrupt(file, off, "%s %s does not hash to its id", k, id)
	}
	return data, l.Seq, nil
}

// Seq returns the last journal sequence number the snapshot sees.
func (sn *Snapshot) Seq() uint64 { return sn.seq }

// refsAt returns the ref table, exact at seq: a table restored from (or
// trimmed at) a checkpoint newer than seq first reads back the older moves
// from the reflog file. Only a snapshot older than a checkpoint this
// process loaded or wrote needs that. Caller holds s.view.mu.
func (s *Store) refsAt(seq uint64) (*refs.Table, error) {
	t := s.view.proj.Refs
	if t.Covers(seq) {
		return t, nil
	}
	older, err := reflog.Read(s.fs, s.dir, s.view.proj.ReflogLen)
	if err != nil {
		return nil, err
	}
	t.Fill(older)
	return t, nil
}

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
		out[i] = RefLogEntry{Seq: e.Seq, Old: e.Old, New: e.New, Time: e.Time}
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

// Diff lists the file changes from changeset a to changeset b, sorted by
// path. a may be the zero id (an empty tree).
//
// It walks the two trees side by side and skips every subtree whose id the
// two share, so its cost follows the size of the difference (times the size
// of the directories on the way to it), not the size of the trees.
func (sn *Snapshot) Diff(a, b ID) ([]PathChange, error) {
	var ra ID
	if !a.IsZero() {
		ca, err := sn.Changeset(a)
		if err != nil {
			return nil, err
		}
		ra = ca.Root
	}
	cb, err := sn.Changeset(b)
	if err != nil {
		return nil, err
	}
	var out []PathChange
	if err := sn.diffTrees("", ra, cb.Root, &out); err != nil {
		return nil, err
	}
	// Tree order puts "a/b" before "a.txt"; the contract is byte order.
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// entries returns a tree's entries; the zero id is the empty tree.
func (sn *Snapshot) entries(id ID) ([]objects.Entry, error) {
	if id.IsZero() {
		return nil, nil
	}
	t, err := sn.Tree(id)
	if err != nil {
		return nil, err
	}
	return t.Entries, nil
}

// diffTrees appends the file changes from tree a to tree b, both under
// prefix (either may be the zero id, an empty tree).
func (sn *Snapshot) diffTrees(prefix string, a, b ID, out *[]PathChange) error {
	if a == b {
		return nil
	}
	ea, err := sn.entries(a)
	if err != nil {
		return err
	}
	eb, err := sn.entries(b)
	if err != nil {
		return err
	}
	// side lists every file of one subtree as added or deleted.
	side := func(e objects.Entry, add bool) error {
		p := prefix + e.Name
		switch {
		case e.Mode.IsDir() && add:
			return sn.diffTrees(p+"/", ID{}, e.ID, out)
		case e.Mode.IsDir():
			return sn.diffTrees(p+"/", e.ID, ID{}, out)
		case add:
			*out = append(*out, PathChange{Path: p, Op: "add", New: e})
		default:
			*out = append(*out, PathChange{Path: p, Op: "delete", Old: e})
		}
		return nil
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j == len(eb) || (i < len(ea) && ea[i].Name < eb[j].Name):
			if err := side(ea[i], false); err != nil {
				return err
			}
			i++
		case i == len(ea) || eb[j].Name < ea[i].Name:
			if err := side(eb[j], true); err != nil {
				return err
			}
			j++
		default:
			x, y := ea[i], eb[j]
			i, j = i+1, j+1
			switch {
			case x.Mode == y.Mode && x.ID == y.ID:
			case x.Mode.IsDir() && y.Mode.IsDir():
				if err := sn.diffTrees(prefix+x.Name+"/", x.ID, y.ID, out); err != nil {
					return err
				}
			case x.Mode.IsDir() || y.Mode.IsDir():
				if err := side(x, false); err != nil {
					return err
				}
				if err := side(y, true); err != nil {
					return err
				}
			default:
				*out = append(*out, PathChange{Path: prefix + x.Name, Op: "modify", Old: x, New: y})
			}
		}
	}
	return nil
}
