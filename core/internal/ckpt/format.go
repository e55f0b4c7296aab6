// Package ckpt is the checkpoint: its file format, and when a process
// writes one (Scheduler).
//
// The checkpoint file is the durable root of a store: its identity, the
// journal position it covers, the list of index runs holding every object,
// changeset and delta of the frames before that position, and the ref table
// with its reflogs. It is replaced atomically (temp file, datasync, rename,
// directory sync), so after any crash it is either the old or the new one,
// whole. Its size depends on the number of runs and refs, not on the number of
// objects or ref moves: an open reads it, the run headers, and the frames
// after it. Each ref's older moves live in the reflog file (core/internal/reflog), read
// only by a reflog listing or a snapshot older than the checkpoint.
//
//	 0 magic "SWCKPT01"  8 version u32 (= 5)  12 reserved u32  16 store id [16]
//	32 segment u64  40 offset u64  48 next seq u64  56 epoch u64
//	64 body (uvarints):
//	   runs:   n, then per run (newest first): name-len name (a file in index/)
//	   reflog: length of the reflog file's chunks (a multiple of 512)
//	   refs:   n, then per ref: name-len name, its last move: seq old[32] new[32] time-ns
//	           op u8 agent-len agent undoes (op undo only)
//	   protected: n, then per pattern: len pattern, seq of the frame that protected it
//	end: BLAKE3-256 of everything before it (32 bytes)
//
// Every record in the runs and every move in the reflog's first length bytes
// comes from a frame before next seq, so it is durable. Version 3, whose
// moves carry no origin (op, agent), is read with each origin unknown;
// versions 3 and 4, written before protections existed, are read with none.
// Versions 1 (the whole projection inline) and 2 (every reflog inline) are
// refused.
package ckpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/index"
	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/internal/wire"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

const (
	headerSize = 64
	// Version is the format version this build writes; it reads
	// VersionNoProtect and VersionNoOrigin too.
	Version = 5
	// VersionNoProtect is the version without the protected patterns.
	VersionNoProtect = 4
	// VersionNoOrigin is the version whose last moves carry no origin.
	VersionNoOrigin = 3
	// Name is the checkpoint file's name in the store directory, and Temp
	// the name a new one is written under before it is renamed in.
	Name = "checkpoint"
	Temp = "checkpoint.tmp"
	// IndexDir is the directory of the index runs.
	IndexDir = "index"
)

var magic = [8]byte{'S', 'W', 'C', 'K', 'P', 'T', '0', '1'}

// Checkpoint is a decoded checkpoint.
type Checkpoint struct {
	Store   journal.StoreID
	Pos     journal.Pos
	NextSeq uint64
	Epoch   uint64
	Runs    []string // run file names in index/, newest first
	// ReflogLen is how many bytes of the reflog file hold the moves of
	// the frames before NextSeq.
	ReflogLen int64
	// Proj is the projection the checkpoint restores: its ref table (each
	// ref's last move), and its index, with the runs open once Read
	// returns it.
	Proj *proj.Proj
}

// Encode serializes the run list, the reflog length and each ref's
// last move in rt as of (before) seq nextSeq, which must end at pos.
func Encode(id journal.StoreID, pos journal.Pos, nextSeq, epoch uint64, runs []string, reflogLen int64, rt *refs.Table) []byte {
	b := make([]byte, headerSize, 1<<12)
	copy(b[0:8], magic[:])
	binary.LittleEndian.PutUint32(b[8:], Version)
	copy(b[16:32], id[:])
	binary.LittleEndian.PutUint64(b[32:], pos.Seg)
	binary.LittleEndian.PutUint64(b[40:], uint64(pos.Off))
	binary.LittleEndian.PutUint64(b[48:], nextSeq)
	binary.LittleEndian.PutUint64(b[56:], epoch)
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for _, n := range runs {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	b = binary.AppendUvarint(b, uint64(reflogLen))
	var names []string
	var last []refs.Entry
	for _, n := range rt.Names() {
		if e, ok := rt.Last(n, nextSeq-1); ok {
			names, last = append(names, n), append(last, e)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for i, n := range names {
		e := last[i]
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, e.Seq)
		b = append(b, e.Old[:]...)
		b = append(b, e.New[:]...)
		b = binary.AppendUvarint(b, uint64(e.Time.UnixNano()))
		b = append(b, byte(e.Op))
		b = binary.AppendUvarint(b, uint64(len(e.Agent)))
		b = append(b, e.Agent...)
		if e.Op == refs.OpUndo {
			b = binary.AppendUvarint(b, e.Undoes)
		}
	}
	pats, seqs := rt.Protected(nextSeq - 1)
	b = binary.AppendUvarint(b, uint64(len(pats)))
	for i, p := range pats {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, seqs[i])
	}
	sum := b3.Sum256(b)
	return append(b, sum[:]...)
}

var errMalformed = errors.New("malformed checkpoint")

// Decode decodes b; c.Proj holds the ref table and an index with no
// runs opened yet (Read opens them). It is one piece: it reads the
// checkpoint's layout top to bottom with one cursor, and splitting it would
// pass that cursor and the version between the parts.
func Decode(b []byte) (*Checkpoint, error) {
	if len(b) < headerSize+32 {
		return nil, fmt.Errorf("%w: %d bytes is too short", errMalformed, len(b))
	}
	if !bytes.Equal(b[0:8], magic[:]) {
		return nil, fmt.Errorf("%w: bad magic", errMalformed)
	}
	version := binary.LittleEndian.Uint32(b[8:])
	if version < VersionNoOrigin || version > Version {
		return nil, fmt.Errorf("%w: version %d is not supported (this build reads versions %d to %d; stores written by versions 1 and 2 must be re-created)", errMalformed, version, VersionNoOrigin, Version)
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if s := b3.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", errMalformed)
	}
	c := &Checkpoint{}
	copy(c.Store[:], b[16:32])
	c.Pos = journal.Pos{Seg: binary.LittleEndian.Uint64(b[32:]), Off: int64(binary.LittleEndian.Uint64(b[40:]))}
	c.NextSeq = binary.LittleEndian.Uint64(b[48:])
	c.Epoch = binary.LittleEndian.Uint64(b[56:])
	if c.Pos.Seg == 0 || c.Pos.Off < journal.FirstFrame || c.NextSeq == 0 {
		return nil, fmt.Errorf("%w: bad position", errMalformed)
	}
	p := proj.New(c.Pos, c.NextSeq)
	r := wire.NewReader(body, headerSize)
	uv, take, limit := r.Uvarint, r.Take, r.Len()
	n := uv()
	for i := uint64(0); i < n && !r.Bad && i < limit; i++ {
		name := string(take(uv()))
		if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			r.Bad = true
		}
		c.Runs = append(c.Runs, name)
	}
	c.ReflogLen = int64(uv())
	if c.ReflogLen < 0 || c.ReflogLen%reflog.Align != 0 {
		r.Bad = true
	}
	n = uv()
	for i := uint64(0); i < n && !r.Bad && i < limit; i++ {
		name := string(take(uv()))
		e := refs.Entry{Seq: uv(), Old: objects.ID(take(32)), New: objects.ID(take(32))}
		e.Time = time.Unix(0, int64(uv())).UTC()
		if version != VersionNoOrigin {
			e.Op = refs.Op(take(1)[0])
			l := uv()
			if l > refs.MaxAgentLen {
				r.Bad = true
			}
			e.Agent = string(take(l))
			if e.Op == refs.OpUndo {
				e.Undoes = uv()
			}
			r.Bad = r.Bad || e.Origin.ValidateStored() != nil
		}
		if e.Seq >= c.NextSeq {
			r.Bad = true
		}
		p.Refs.Restore(name, []refs.Entry{e})
	}
	if version >= Version {
		n = uv()
		for i := uint64(0); i < n && !r.Bad && i < limit; i++ {
			pat := string(take(uv()))
			seq := uv()
			r.Bad = r.Bad || refs.ValidatePattern(pat) != nil || seq >= c.NextSeq
			p.Refs.RestoreProtection(pat, seq)
		}
	}
	p.Refs.SetBase(c.NextSeq)
	p.ReflogLen = c.ReflogLen
	if !r.Done() {
		return nil, fmt.Errorf("%w: body does not parse (at byte %d)", errMalformed, r.Pos)
	}
	c.Proj = p
	return c, nil
}

// OpenRuns opens the index runs named (newest first) in dir/index.
func OpenRuns(fsys vfs.FS, dir string, names []string) (*index.Index, error) {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = path.Join(dir, IndexDir, n)
	}
	x, err := index.Open(fsys, paths)
	if err != nil {
		var ce *index.CorruptError
		if errors.As(err, &ce) {
			return nil, errs.Corrupt(ce.File, ce.Offset, "index run named by the checkpoint: %s", ce.Reason)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &missingRunError{errs.Corrupt(dir+"/"+Name, 0, "%v: %v", errRunMissing, err)}
		}
		return nil, errs.IO("open index runs", err)
	}
	return x, nil
}

// Read reads and decodes dir/checkpoint. A missing file is
// errs.ErrNotStore; anything unreadable is a *CorruptError naming the file.
//
// It also opens the index runs the checkpoint names. Another process's
// checkpoint may replace it and delete runs it retired between the read and
// the open; a missing run therefore re-reads the checkpoint (a few times)
// before it is reported as damage.
func Read(fsys vfs.FS, dir string) (*Checkpoint, error) {
	for attempt := 0; ; attempt++ {
		c, err := ReadFile(fsys, dir)
		if err != nil {
			return nil, err
		}
		x, err := OpenRuns(fsys, dir, c.Runs)
		if errors.Is(err, errRunMissing) && attempt < 4 {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.Proj.Idx = proj.NewRunIdx(x, c.Runs)
		return c, nil
	}
}

// errRunMissing marks a run named by the checkpoint that does not exist.
var errRunMissing = errors.New("index run named by the checkpoint is missing")

// ReadFile reads and decodes dir/checkpoint without opening its runs
// (Proj.Idx has none).
func ReadFile(fsys vfs.FS, dir string) (*Checkpoint, error) {
	p := path.Join(dir, Name)
	st, err := fsys.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no checkpoint file %s", errs.ErrNotStore, dir, p)
	}
	if err != nil {
		return nil, errs.IO("stat checkpoint", err)
	}
	if !st.Mode().IsRegular() {
		return nil, errs.Corrupt(p, 0, "checkpoint is not a regular file")
	}
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, errs.IO("open checkpoint", err)
	}
	defer f.Close()
	// The size comes from the open file, not from the Stat above: another
	// process may rename a new checkpoint in between, and reading the new
	// file with the old one's size made a sound store look corrupt
	// (props' TestRefCASIsLinearizablePerRefOnRealFiles, about 1 run in 60).
	if st, err = f.Stat(); err != nil {
		return nil, errs.IO("stat checkpoint", err)
	}
	b := make([]byte, st.Size())
	if err := vfs.ReadFull(f, b, 0); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errs.IO("read checkpoint", err)
	}
	c, err := Decode(b)
	if err != nil {
		return nil, errs.Corrupt(p, 0, "%v", err)
	}
	return c, nil
}

// Write atomically replaces dir/checkpoint with b.
func Write(fsys vfs.FS, dir string, b []byte, skipDirSync bool) error {
	tmp := path.Join(dir, Temp)
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return errs.IO("create checkpoint temp", err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return errs.IO("write checkpoint temp", err)
	}
	if err := vfs.Datasync(f); err != nil {
		f.Close()
		return errs.IO("sync checkpoint temp", err)
	}
	if err := f.Close(); err != nil {
		return errs.IO("close checkpoint temp", err)
	}
	if err := fsys.Rename(tmp, path.Join(dir, Name)); err != nil {
		return errs.IO("rename checkpoint", err)
	}
	if !skipDirSync {
		if err := fsys.SyncDir(dir); err != nil {
			return errs.IO("sync store directory", err)
		}
	}
	return nil
}

// missingRunError is the *CorruptError of a missing run that also matches
// errRunMissing, so Read can retry it.
type missingRunError struct{ err error }

func (e *missingRunError) Error() string   { return e.err.Error() }
func (e *missingRunError) Unwrap() []error { return []error{e.err, errRunMissing} }

// RunName names the index run written by the checkpoint at nextSeq (kind
// "" for a checkpoint's run; compaction appends "m" to name a merge).
func RunName(nextSeq, epoch uint64, kind string) string {
	return fmt.Sprintf("run-%016x-%016x%s", nextSeq, epoch, kind)
}
