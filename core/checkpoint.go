package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

// The checkpoint file is the durable root of a store: its identity and a
// projection of every frame before a journal position. It is replaced
// atomically (temp file, datasync, rename, directory sync), so after any
// crash it is either the old or the new one, whole.
//
//	 0 magic "SWCKPT01"  8 version u32  12 reserved u32  16 store id [16]
//	32 segment u64  40 offset u64  48 next seq u64  56 epoch u64
//	64 body (uvarints):
//	   objects: n, then per object id[32] kind u8 flags u8 seq seg off size
//	   deltas:  n, then per hash: hash[32] count ids[32]…
//	   reflogs: n, then per ref: name-len name count, per entry: seq old[32] new[32] time-ns
//	end: BLAKE3-256 of everything before it (32 bytes)
//
// The epoch is recorded so a process that finds the state file lost can
// still pick a fresh epoch. The body is a full projection rather than index
// runs; see docs/storage.md for the cost and the plan.
const (
	ckptHeaderSize = 64
	ckptVersion    = 1
	ckptName       = "checkpoint"
	ckptTemp       = "checkpoint.tmp"
)

var ckptMagic = [8]byte{'S', 'W', 'C', 'K', 'P', 'T', '0', '1'}

// checkpoint is a decoded checkpoint.
type checkpoint struct {
	Store   journal.StoreID
	Pos     journal.Pos
	NextSeq uint64
	Epoch   uint64
	proj    *proj
}

// encodeCheckpoint serializes the projection p as of (before) seq nextSeq,
// which must end at pos.
func encodeCheckpoint(id journal.StoreID, pos journal.Pos, nextSeq, epoch uint64, p *proj) []byte {
	b := make([]byte, ckptHeaderSize, 1<<16)
	copy(b[0:8], ckptMagic[:])
	binary.LittleEndian.PutUint32(b[8:], ckptVersion)
	copy(b[16:32], id[:])
	binary.LittleEndian.PutUint64(b[32:], pos.Seg)
	binary.LittleEndian.PutUint64(b[40:], uint64(pos.Off))
	binary.LittleEndian.PutUint64(b[48:], nextSeq)
	binary.LittleEndian.PutUint64(b[56:], epoch)
	var objs []ID
	var locs []objLoc
	p.idx.each(func(id ID, l objLoc) {
		if l.Seq < nextSeq {
			objs = append(objs, id)
			locs = append(locs, l)
		}
	})
	b = binary.AppendUvarint(b, uint64(len(objs)))
	for i, id := range objs {
		l := locs[i]
		var fl byte
		if l.Loose {
			fl = flagLoose
		}
		b = append(b, id[:]...)
		b = append(b, byte(l.Kind), fl)
		b = binary.AppendUvarint(b, l.Seq)
		b = binary.AppendUvarint(b, l.Seg)
		b = binary.AppendUvarint(b, uint64(l.Off))
		b = binary.AppendUvarint(b, uint64(l.Size))
	}
	type dl struct {
		h   objects.Hash
		ids []ID
	}
	var ds []dl
	p.idx.eachDelta(func(h objects.Hash, ids []ID) {
		var keep []ID
		for _, id := range ids {
			if l, ok := p.idx.get(id); ok && l.Seq < nextSeq {
				keep = append(keep, id)
			}
		}
		if len(keep) > 0 {
			ds = append(ds, dl{h, keep})
		}
	})
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, d := range ds {
		b = append(b, d.h[:]...)
		b = binary.AppendUvarint(b, uint64(len(d.ids)))
		for _, id := range d.ids {
			b = append(b, id[:]...)
		}
	}
	names := p.refs.Names()
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		log := p.refs.Log(n, nextSeq-1)
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, uint64(len(log)))
		for _, e := range log {
			b = binary.AppendUvarint(b, e.Seq)
			b = append(b, e.Old[:]...)
			b = append(b, e.New[:]...)
			b = binary.AppendUvarint(b, uint64(e.Time.UnixNano()))
		}
	}
	sum := blake3.Sum256(b)
	return append(b, sum[:]...)
}

var errCkpt = errors.New("malformed checkpoint")

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < ckptHeaderSize+32 {
		return nil, fmt.Errorf("%w: %d bytes is too short", errCkpt, len(b))
	}
	if !bytes.Equal(b[0:8], ckptMagic[:]) {
		return nil, fmt.Errorf("%w: bad magic", errCkpt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != ckptVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errCkpt, v)
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if s := blake3.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", errCkpt)
	}
	c := &checkpoint{}
	copy(c.Store[:], b[16:32])
	c.Pos = journal.Pos{Seg: binary.LittleEndian.Uint64(b[32:]), Off: int64(binary.LittleEndian.Uint64(b[40:]))}
	c.NextSeq = binary.LittleEndian.Uint64(b[48:])
	c.Epoch = binary.LittleEndian.Uint64(b[56:])
	if c.Pos.Seg == 0 || c.Pos.Off < journal.FirstFrame || c.NextSeq == 0 {
		return nil, fmt.Errorf("%w: bad position", errCkpt)
	}
	p := newProj(c.Pos, c.NextSeq)
	pos := ckptHeaderSize
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(body[pos:])
		if n <= 0 {
			bad = true
			return 0
		}
		pos += n
		return v
	}
	take := func(n uint64) []byte {
		if bad || uint64(len(body)-pos) < n {
			bad = true
			return make([]byte, n%4096)
		}
		s := body[pos : pos+int(n)]
		pos += int(n)
		return s
	}
	limit := uint64(len(body))
	n := uv()
	for i := uint64(0); i < n && !bad && i < limit; i++ {
		id := ID(take(32))
		kf := take(2)
		l := objLoc{Kind: objects.Kind(kf[0]), Loose: kf[1] == flagLoose, Seq: uv(), Seg: uv(), Off: int64(uv()), Size: int64(uv())}
		if !l.Kind.Valid() {
			bad = true
		}
		p.idx.put(id, l)
	}
	n = uv()
	for i := uint64(0); i < n && !bad && i < limit; i++ {
		h := objects.Hash(take(32))
		k := uv()
		for j := uint64(0); j < k && !bad && j < limit; j++ {
			p.idx.addDelta(h, ID(take(32)))
		}
	}
	n = uv()
	for i := uint64(0); i < n && !bad && i < limit; i++ {
		name := string(take(uv()))
		k := uv()
		var es []refs.Entry
		for j := uint64(0); j < k && !bad && j < limit; j++ {
			e := refs.Entry{Seq: uv(), Old: ID(take(32)), New: ID(take(32))}
			e.Time = time.Unix(0, int64(uv())).UTC()
			es = append(es, e)
		}
		p.refs.Restore(name, es)
	}
	if bad || pos != len(body) {
		return nil, fmt.Errorf("%w: body does not parse (at byte %d)", errCkpt, pos)
	}
	c.proj = p
	return c, nil
}

// readCheckpoint reads and decodes dir/checkpoint. A missing file is
// ErrNotStore; anything unreadable is a *CorruptError naming the file.
func readCheckpoint(fsys vfs.FS, dir string) (*checkpoint, error) {
	p := path.Join(dir, ckptName)
	st, err := fsys.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no checkpoint file %s", ErrNotStore, dir, p)
	}
	if err != nil {
		return nil, ioErr("stat checkpoint", err)
	}
	if !st.Mode().IsRegular() {
		return nil, corrupt(p, 0, "checkpoint is not a regular file")
	}
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, ioErr("open checkpoint", err)
	}
	defer f.Close()
	b := make([]byte, st.Size())
	if err := vfs.ReadFull(f, b, 0); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, ioErr("read checkpoint", err)
	}
	c, err := decodeCheckpoint(b)
	if err != nil {
		return nil, corrupt(p, 0, "%v", err)
	}
	return c, nil
}

// writeCheckpoint atomically replaces dir/checkpoint with b.
func writeCheckpoint(fsys vfs.FS, dir string, b []byte, skipDirSync bool) error {
	tmp := path.Join(dir, ckptTemp)
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return ioErr("create checkpoint temp", err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return ioErr("write checkpoint temp", err)
	}
	if err := vfs.Datasync(f); err != nil {
		f.Close()
		return ioErr("sync checkpoint temp", err)
	}
	if err := f.Close(); err != nil {
		return ioErr("close checkpoint temp", err)
	}
	if err := fsys.Rename(tmp, path.Join(dir, ckptName)); err != nil {
		return ioErr("rename checkpoint", err)
	}
	if !skipDirSync {
		if err := fsys.SyncDir(dir); err != nil {
			return ioErr("sync store directory", err)
		}
	}
	return nil
}
