// Package reflog is the reflog file: every ref move of the frames before the
// checkpoint's position, so that the checkpoint itself holds only each ref's
// last move and its size does not grow with history. Each checkpoint appends one chunk with
// the moves of the frames since the previous checkpoint; the checkpoint
// records the file's length, and only bytes below a durable checkpoint's
// length are ever read.
//
//	chunk (starts on a 512-byte boundary):
//	 0 magic "SWRL"  4 version u8 (= 2)  5 zero [3]  8 body length u32  12 zero u32
//	16 from seq u64  24 to seq u64 (moves of frames from <= seq < to)
//	32 body (uvarints): n agents, per agent: len agent;
//	   n refs, per ref: name-len name count, per entry:
//	   seq - prev uvarint | flags u8 | old [32] (absent if flag 1) | new [32] |
//	   time-ns - prev varint | op u8 | agent index uvarint | undoes uvarint (op undo only)
//	   BLAKE3-256 of header and body (32 bytes), zeros, and in the last 24
//	   bytes of the chunk's last sector the trailer:
//	   magic "SWRT" | chunk length u32 (bytes, a multiple of 512) | from u64 | to u64
//
// In an entry, prev is the ref's previous entry in the chunk (for the first:
// seq from, time 0), and flag 1 means old is the previous entry's new value,
// which a ref moved by compare-and-swap nearly always has: 40 bytes a move
// instead of 76. The agent is an index into the chunk's table of agents, so a
// swarm's agent names take their bytes once a chunk, not once a move.
//
// The trailer lets a reader walk the file from its end: reading the moves
// after a sequence number reads the trailers of the chunks after it and
// those chunks, not the whole file (ReadBack). The padding before it is
// zeros, and a reader checks both, so every byte of a chunk is covered.
//
// Version 1 chunks, written before moves recorded their origin, have no
// agents, ops or trailer; they are still read (origin unknown) and only
// ever precede version 2 chunks in a file.
//
// A chunk is written at the length the current checkpoint records, which is
// a multiple of 512, then the file is datasynced, and only then is the
// checkpoint naming the new length written. A write therefore never touches
// a sector holding a chunk a durable checkpoint names (a torn write cannot
// damage one), and bytes left past the length by a crashed checkpoint are
// overwritten by the next.
package reflog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

const (
	// Name is the file's name in the store directory.
	Name    = "reflog"
	hdrSize = 32
	sumSize = 32
	// trailerSize is the trailer at the end of a version 2 chunk.
	trailerSize = 24
	// Align is the chunk alignment: a checkpoint's reflog length is a
	// multiple of it.
	Align = 512
	// Version is the chunk version this build writes; it reads version 1
	// too.
	Version = 2
)

var (
	magic        = [4]byte{'S', 'W', 'R', 'L'}
	trailerMagic = [4]byte{'S', 'W', 'R', 'T'}
)

// oldIsPrev marks an entry whose old value is the previous entry's new.
const oldIsPrev = 1

// Chunk is the moves of one chunk: those of frames From <= seq < To, by
// ref (Names sorted), each ref's oldest first.
type Chunk struct {
	From, To uint64
	Names    []string
	Logs     [][]refs.Entry
}

// EncodeChunk encodes the moves of frames from <= seq < to as a version 2
// chunk, padded to Align and ending with its trailer.
func EncodeChunk(from, to uint64, names []string, logs [][]refs.Entry) []byte {
	b := make([]byte, hdrSize, 1<<12)
	copy(b[0:4], magic[:])
	b[4] = Version
	binary.LittleEndian.PutUint64(b[16:], from)
	binary.LittleEndian.PutUint64(b[24:], to)
	agents := map[string]uint64{}
	var order []string
	for _, es := range logs {
		for _, e := range es {
			if _, ok := agents[e.Agent]; !ok {
				agents[e.Agent] = uint64(len(order))
				order = append(order, e.Agent)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(len(order)))
	for _, a := range order {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for i, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, uint64(len(logs[i])))
		seq, t := from, int64(0)
		for j, e := range logs[i] {
			b = binary.AppendUvarint(b, e.Seq-seq)
			if j > 0 && e.Old == logs[i][j-1].New {
				b = append(b, oldIsPrev)
			} else {
				b = append(b, 0)
				b = append(b, e.Old[:]...)
			}
			b = append(b, e.New[:]...)
			b = binary.AppendVarint(b, e.Time.UnixNano()-t)
			b = append(b, byte(e.Op))
			b = binary.AppendUvarint(b, agents[e.Agent])
			if e.Op == refs.OpUndo {
				b = binary.AppendUvarint(b, e.Undoes)
			}
			seq, t = e.Seq, e.Time.UnixNano()
		}
	}
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-hdrSize))
	sum := b3.Sum256(b)
	b = append(b, sum[:]...)
	size := (len(b) + trailerSize + Align - 1) / Align * Align
	b = append(b, make([]byte, size-len(b))...)
	putTrailer(b[size-trailerSize:], uint32(size), from, to)
	return b
}

func putTrailer(t []byte, size uint32, from, to uint64) {
	copy(t[0:4], trailerMagic[:])
	binary.LittleEndian.PutUint32(t[4:], size)
	binary.LittleEndian.PutUint64(t[8:], from)
	binary.LittleEndian.PutUint64(t[16:], to)
}

// trailer is a version 2 chunk's trailer, read from the last bytes of a
// sector; ok is false when they are not one.
type trailer struct {
	size     int64
	from, to uint64
}

func readTrailer(t []byte) (tr trailer, ok bool) {
	if !bytes.Equal(t[0:4], trailerMagic[:]) {
		return tr, false
	}
	tr = trailer{size: int64(binary.LittleEndian.Uint32(t[4:])), from: binary.LittleEndian.Uint64(t[8:]), to: binary.LittleEndian.Uint64(t[16:])}
	return tr, tr.size >= Align && tr.size%Align == 0 && tr.from <= tr.to
}

// Decode decodes the chunks of b (the file's first length bytes) into
// the moves of every ref, oldest first. Chunks must follow each other in
// sequence order, each within [from, to) of its header.
func Decode(b []byte) (map[string][]refs.Entry, error) {
	out := map[string][]refs.Entry{}
	err := decodeAll(b, func(c *Chunk) {
		for i, n := range c.Names {
			out[n] = append(out[n], c.Logs[i]...)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeAll decodes the chunks of b in file order.
func decodeAll(b []byte, fn func(*Chunk)) error {
	var next uint64
	for off := 0; off < len(b); {
		c, size, err := decodeChunk(b[off:], next)
		if err != nil {
			return &offsetError{off, err.Error()}
		}
		fn(c)
		next = c.To
		off += size
	}
	return nil
}

type offsetError struct {
	off    int
	reason string
}

func (e *offsetError) Error() string { return e.reason }

// Read reads every move in the first length bytes of dir/reflog.
// Damage is a *CorruptError naming the file and the chunk's offset.
func Read(fsys vfs.FS, dir string, length int64) (map[string][]refs.Entry, error) {
	m := map[string][]refs.Entry{}
	err := withFile(fsys, dir, length, func(f afero.File, p string) error {
		b, err := readAt(f, p, 0, length)
		if err != nil {
			return err
		}
		if m, err = Decode(b); err != nil {
			return corrupt(p, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ReadBack calls fn with the chunks in the first length bytes of
// dir/reflog that hold a frame after after and none only after until,
// newest first, until fn returns false. It reads the trailer of each chunk
// from the end of the file down to the first that holds nothing after
// after, and the chunks it passes to fn, so reading the moves of the last
// few frames costs a few reads whatever the file's size. Chunks it only
// skips are not checked. Damage in a chunk it reads is a *CorruptError
// naming the file and the chunk's offset.
//
// Version 1 chunks have no trailer: where the walk meets one, it reads
// the file from its start to there at once. It does the same when a
// trailer or a chunk does not check, so that damage is reported by the
// whole-file decoder, at the chunk where it is.
func ReadBack(fsys vfs.FS, dir string, length int64, after, until uint64, fn func(*Chunk) bool) error {
	return withFile(fsys, dir, length, func(f afero.File, p string) error {
		return readBack(f, p, length, after, until, fn)
	})
}

// readBack is ReadBack on the open file f, named p, of length bytes.
func readBack(f afero.File, p string, length int64, after, until uint64, fn func(*Chunk) bool) error {
	newer := ^uint64(0) // the from of the chunk read before, which is newer
	for pos := length; pos > 0; {
		last, err := readAt(f, p, pos-Align, Align)
		if err != nil {
			return err
		}
		tr, ok := readTrailer(last[Align-trailerSize:])
		if !ok || tr.size > pos || tr.to > newer {
			return readForward(f, p, pos, after, until, fn)
		}
		if tr.to == 0 || tr.to-1 <= after {
			return nil
		}
		if tr.from <= until {
			b := last
			if tr.size > Align {
				if b, err = readAt(f, p, pos-tr.size, tr.size); err != nil {
					return err
				}
			}
			c, size, err := decodeChunk(b, 0)
			if err != nil || int64(size) != tr.size || c.From != tr.from || c.To != tr.to {
				return readForward(f, p, pos, after, until, fn)
			}
			if !fn(c) {
				return nil
			}
		}
		pos -= tr.size
		newer = tr.from
	}
	return nil
}

// ReadAll is ReadBack for a caller that wants every chunk: it reads the
// file at once instead of chunk by chunk from its end.
func ReadAll(fsys vfs.FS, dir string, length int64, after, until uint64, fn func(*Chunk) bool) error {
	return withFile(fsys, dir, length, func(f afero.File, p string) error {
		return readForward(f, p, length, after, until, fn)
	})
}

// withFile opens the reflog file in dir, which the checkpoint says holds
// length bytes, and passes it and its path to read, closing it after. An
// empty reflog is not opened: it need not exist.
func withFile(fsys vfs.FS, dir string, length int64, read func(f afero.File, p string) error) error {
	if length == 0 {
		return nil
	}
	f, p, err := open(fsys, dir, length)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f, p)
}

// readForward decodes the file's first end bytes at once and passes their
// chunks to fn as ReadBack does.
func readForward(f afero.File, p string, end int64, after, until uint64, fn func(*Chunk) bool) error {
	b, err := readAt(f, p, 0, end)
	if err != nil {
		return err
	}
	var cs []*Chunk
	if err := decodeAll(b, func(c *Chunk) { cs = append(cs, c) }); err != nil {
		return corrupt(p, err)
	}
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.To == 0 || c.To-1 <= after {
			return nil
		}
		if c.From <= until && !fn(c) {
			return nil
		}
	}
	return nil
}

func open(fsys vfs.FS, dir string, length int64) (afero.File, string, error) {
	p := path.Join(dir, Name)
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, p, errs.Corrupt(p, 0, "reflog file named by the checkpoint (%d bytes) is missing", length)
	}
	if err != nil {
		return nil, p, errs.IO("open reflog", err)
	}
	return f, p, nil
}

// readAt reads n bytes at off; a file shorter than the checkpoint says is
// corruption.
func readAt(f afero.File, p string, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if err := vfs.ReadFull(f, b, off); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, errs.Corrupt(p, off, "reflog is shorter than the %d bytes the checkpoint names", off+n)
		}
		return nil, errs.IO("read reflog", err)
	}
	return b, nil
}

func corrupt(p string, err error) error {
	var oe *offsetError
	if errors.As(err, &oe) {
		return errs.Corrupt(p, int64(oe.off), "%s", oe.reason)
	}
	return errs.Corrupt(p, 0, "%v", err)
}

// Append writes chunk at offset at (the current checkpoint's reflog
// length) and makes it durable; it returns the new length. The file exists
// from Create on; if it does not (a store whose reflog is still empty), it is
// created and the store directory synced, so the checkpoint never names a
// file whose directory entry could be lost. skipSync is the test-only
// canary that leaves the chunk unsynced (testknobs.SkipReflogSync).
func Append(fsys vfs.FS, dir string, at int64, chunk []byte, skipSync bool) (int64, error) {
	p := path.Join(dir, Name)
	f, err := fsys.OpenFile(p, os.O_RDWR, 0)
	created := false
	if errors.Is(err, fs.ErrNotExist) && at == 0 {
		f, err = fsys.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		created = true
	}
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errs.Corrupt(p, 0, "reflog file named by the checkpoint (%d bytes) is missing", at)
	}
	if err != nil {
		return 0, errs.IO("open reflog", err)
	}
	if _, err := f.WriteAt(chunk, at); err != nil {
		f.Close()
		return 0, errs.IO("write reflog", err)
	}
	if !skipSync {
		if err := vfs.Datasync(f); err != nil {
			f.Close()
			return 0, errs.IO("sync reflog", err)
		}
	}
	if err := f.Close(); err != nil {
		return 0, errs.IO("close reflog", err)
	}
	if created {
		if err := fsys.SyncDir(dir); err != nil {
			return 0, errs.IO("sync store directory", err)
		}
	}
	return at + int64(len(chunk)), nil
}
