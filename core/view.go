package core

import (
	"errors"
	"fmt"

	"github.com/swarmops/swarmops/core/internal/ckpt"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// catchUp replays frames into the projection until the frame carrying
// target. Frames before a published end or durable position were written
// whole, so a scan that stops short is corruption. Caller holds s.view.mu.
func (s *Store) catchUp(target uint64) error {
	if s.view.proj.NextSeq >= target {
		s.markLocked()
		return nil
	}
	s.view.proj.Idx.Mem.Reserve(target - s.view.proj.NextSeq)
	var aerr error
	// apply keeps nothing of a payload but what it decodes: the scan may
	// lend it.
	res, err := s.view.reader.ScanHeads(s.view.proj.Pos, s.view.proj.NextSeq, target, func(fr *journal.Frame) error {
		aerr = s.view.proj.Apply(fr, &s.jcfg)
		return aerr
	})
	if aerr != nil {
		return aerr
	}
	if err != nil {
		return errs.IO("replay journal", err)
	}
	if res.NextSeq < target {
		// Frames are missing where this projection left off. That is
		// damage unless another process's garbage collection reclaimed
		// the segments this projection had not read yet (or a recovery
		// started a new epoch): the end record then says so, and the
		// projection is rebuilt from the checkpoint those installed.
		if end, ok, err := s.state.ReadStable(state.End, s.boot); err == nil && ok &&
			(end.Epoch != s.view.epoch || end.GC != s.view.gc) {
			return s.reload(end.Epoch, end.GC, target)
		}
		return errs.Corrupt(s.jcfg.SegPath(res.End.Seg), res.End.Off,
			"frame %d is missing or damaged before the published position (frame %d)", res.NextSeq, target-1)
	}
	s.markLocked()
	return nil
}

// refreshLocked brings the projection to target of epoch epoch and garbage
// collection generation gc: rebuilt from the checkpoint when either
// differs from the projection's (a recovery or a collection by another
// process: the index this process holds may name reclaimed segments), else
// caught up. Caller holds s.view.mu.
func (s *Store) refreshLocked(epoch uint64, gc uint32, target uint64) error {
	if epoch != s.view.epoch || gc != s.view.gc {
		return s.reload(epoch, gc, target)
	}
	return s.catchUp(target)
}

// projMark is what Snapshot needs to know of the projection: the epoch and
// garbage collection generation it belongs to, and that it holds every
// frame below next.
type projMark struct {
	epoch, next uint64
	gc          uint32
}

// markLocked publishes the projection's epoch and end. A mark is never
// ahead of the projection: within an epoch the projection only grows (a
// recovery that keeps the epoch rebuilds it through the published end, and
// one that cuts frames starts a new epoch), so a snapshot of a durable
// prefix the mark covers finds all of it, as one taken under s.view.mu would.
// Caller holds s.view.mu.
func (s *Store) markLocked() {
	if m := s.view.mark.Load(); m == nil || m.epoch != s.view.epoch || m.gc != s.view.gc || m.next != s.view.proj.NextSeq {
		s.view.mark.Store(&projMark{epoch: s.view.epoch, gc: s.view.gc, next: s.view.proj.NextSeq})
	}
}

// reload replaces the projection with one rebuilt from the checkpoint, after
// another process's recovery changed the epoch or its garbage collection
// the generation. Caller holds s.view.mu.
func (s *Store) reload(epoch uint64, gc uint32, target uint64) error {
	c, err := ckpt.Read(s.fs, s.dir)
	if err != nil {
		return err
	}
	s.view.reader.Forget()
	s.appender.w.Close()
	if s.view.proj != nil {
		s.view.proj.Idx.Close()
	}
	s.view.proj = c.Proj
	s.view.proj.Idx.SetCache(s.blk)
	s.view.epoch, s.view.gc = epoch, gc
	s.csc.Clear()
	return s.catchUp(target)
}

// catchUpUnlocked replays, without the writer lock, the frames other
// writers have published since this process last looked: before a writer
// queues, and while it queues (lockq.Join's progress), so the critical
// section only replays the last few frames appended ahead of it. With many
// writers nearly every frame is someone else's, and replaying them all under
// the lock made every hand-off as long as a round of the others' frames.
//
// The published end is read without the lock, so what it finds may be
// stale or cut under it by a concurrent recovery: a torn read, another
// epoch, or a scan that stops short (ErrCorrupt) makes it stop and leave the
// authoritative catch-up to appendLocked, which rereads the end under the
// lock and reloads the projection if the epoch moved. An I/O error is the
// operation's (C9): it is returned, and the caller fails.
func (s *Store) catchUpUnlocked() error {
	end, ok, err := s.state.Read(state.End)
	if err != nil {
		return err
	}
	return s.catchUpTo(end, ok)
}

// catchUpTo is catchUpUnlocked from an end record already read (ok false:
// it was unreadable, and there is nothing to do).
func (s *Store) catchUpTo(end state.Rec, ok bool) error {
	if !ok {
		return nil
	}
	if !s.view.mu.TryLock() {
		// Another goroutine of this process is using the projection
		// (appending, or catching it up already).
		return nil
	}
	defer s.view.mu.Unlock()
	if end.Epoch != s.view.epoch || end.GC != s.view.gc || s.view.proj.NextSeq >= end.NextSeq {
		// A new epoch or generation rebuilds the projection, which waits
		// for the locked paths (refreshLocked, checkLocked).
		return nil
	}
	if err := s.catchUp(end.NextSeq); err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	return nil
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
// The view's lock is held while the object is found and its bytes read;
// a compressed group is decoded, and the object hashed, after it is
// released, so one reader's decode never holds up another's read or a
// commit's.
func (s *Store) readObjectSeq(id ID, k objects.Kind, maxSeq uint64, catchUp bool) ([]byte, uint64, error) {
	f, err := s.fetchObject(id, k, maxSeq, catchUp)
	if err != nil {
		return nil, 0, err
	}
	data := f.data
	if f.read != nil {
		if data, err = s.decodeInline(f.read); err != nil {
			return nil, 0, err
		}
	}
	if !f.checked && s.opts.weaken&testknobs.SkipChecksum == 0 && objects.IDOf(k, data) != id {
		file, off := f.file, int64(0)
		if f.read != nil {
			file, off = s.jcfg.SegPath(f.read.at.seg), f.read.at.off
		}
		return nil, 0, errs.Corrupt(file, off, "%s %s does not hash to its id", k, id)
	}
	return data, f.seq, nil
}

// fetched is an object found and read by fetchObject: its bytes, or the
// inline read still to decode; checked when readMoved already hashed it.
type fetched struct {
	data    []byte
	read    *inlineRead
	seq     uint64
	file    string // a loose object's file
	checked bool
}

// fetchObject finds object id of kind k visible at maxSeq and reads its
// bytes, under the view's lock.
func (s *Store) fetchObject(id ID, k objects.Kind, maxSeq uint64, catchUp bool) (fetched, error) {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	l, ok := s.view.proj.Idx.GetKind(id, k)
	if !ok && catchUp {
		end, eok, err := s.state.ReadStable(state.End, s.boot)
		if err != nil {
			return fetched{}, err
		}
		if eok && end.Epoch == s.view.epoch && end.GC == s.view.gc {
			if err := s.catchUp(end.NextSeq); err != nil {
				return fetched{}, err
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
			return fetched{}, err
		}
	}
	if !ok || l.Seq > maxSeq {
		return fetched{}, fmt.Errorf("%w: %s %s", ErrNotFound, k, id)
	}
	if l.Kind != k {
		return fetched{}, fmt.Errorf("%w: %s is a %s, not a %s", ErrNotFound, id, l.Kind, k)
	}
	if l.Loose {
		data := make([]byte, l.Size)
		_, file := loose.Path(s.dir, id)
		if err := loose.Read(s.fs, file, data); err != nil {
			return fetched{}, err
		}
		return fetched{data: data, seq: l.Seq, file: file}, nil
	}
	rd, err := s.readInlineBytes(s.view.reader, &s.groups, s.view.epoch, inlineAt{l.Seg, l.Off, l.Size, l.Stored, l.Inner})
	if err != nil {
		if moved, ok, merr := s.readMoved(id, k, err); ok || merr != nil {
			return fetched{data: moved, seq: l.Seq, checked: true}, merr
		}
		return fetched{}, errs.IO("read "+id.String(), err)
	}
	return fetched{read: rd, seq: l.Seq}, nil
}

// inlineAt is where an inline object is: its segment and offset, its
// size, and for a blob of a compressed group the group's stored length
// and the blob's place in what the group decodes to (proj.Loc and
// index.Loc both say it).
type inlineAt struct {
	seg           uint64
	off, size     int64
	stored, inner uint32
}

// inlineRead is an inline object's stored bytes, read: the object itself
// (plain), or its group's zstd frame, or the object already taken from its
// group in the cache, with where the group goes in the cache.
type inlineRead struct {
	at           inlineAt
	plain, frame []byte
	cache        *zblob.Cache
	key          zblob.Key
}

// readInline reads the inline object at a through r: its encoding, or,
// for a blob of a compressed group, its bytes in what the group's zstd
// frame decodes to (cache, when not nil, keeps the last groups decoded,
// under the epoch of the projection that located them). A read error is
// returned as it is, for the caller to wrap; a frame that does not
// decode, or does not hold the blob, is a *CorruptError naming the
// segment and the frame's offset, never a panic. The caller still checks
// the bytes against the id.
func (s *Store) readInline(r *journal.Reader, cache *zblob.Cache, epoch uint64, a inlineAt) ([]byte, error) {
	rd, err := s.readInlineBytes(r, cache, epoch, a)
	if err != nil {
		return nil, err
	}
	return s.decodeInline(rd)
}

// readInlineBytes is readInline's I/O: the object's or its group's stored
// bytes, or the object from its group in the cache. Only a read error is
// returned; a cached group that does not hold the object leaves the
// frame to be read and decoded, and decodeInline to say so.
func (s *Store) readInlineBytes(r *journal.Reader, cache *zblob.Cache, epoch uint64, a inlineAt) (*inlineRead, error) {
	rd := &inlineRead{at: a, cache: cache, key: zblob.Key{Epoch: epoch, Seg: a.seg, Off: a.off}}
	if a.stored == 0 {
		rd.plain = make([]byte, a.size)
		return rd, r.ReadAt(a.seg, a.off, rd.plain)
	}
	if m, ok := cache.Get(rd.key, int64(a.inner), a.size); ok {
		rd.plain = m
		return rd, nil
	}
	rd.frame = zblob.Frame(int(a.stored))
	return rd, r.ReadAt(a.seg, a.off, rd.frame)
}

// decodeInline is readInline's decode: it needs no lock, and it keeps a
// group it decodes whole in the read's cache.
func (s *Store) decodeInline(rd *inlineRead) ([]byte, error) {
	a := rd.at
	if rd.frame == nil {
		return rd.plain, nil
	}
	data, err := rd.cache.Load(rd.key, rd.frame, int64(a.inner), a.size)
	zblob.Release(rd.frame)
	if err != nil {
		return nil, errs.Corrupt(s.jcfg.SegPath(a.seg), a.off, "compressed group of %d bytes: %v", a.stored, err)
	}
	return data, nil
}

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
