// Package reflog is the reflog file: every ref move of the frames before the
// checkpoint's position, so that the checkpoint itself holds only each ref's
// last move and its size does not grow with history. Each checkpoint appends one chunk with
// the moves of the frames since the previous checkpoint; the checkpoint
// records the file's length, and only bytes below a durable checkpoint's
// length are ever read.
//
//	chunk (starts on a 512-byte boundary):
//	 0 magic "SWRL"  4 version u8 (= 1)  5 zero [3]  8 body length u32  12 zero u32
//	16 from seq u64  24 to seq u64 (moves of frames from <= seq < to)
//	32 body (uvarints): n refs, per ref: name-len name count, per entry:
//	   seq - prev uvarint | flags u8 | old [32] (absent if flag 1) | new [32] |
//	   time-ns - prev varint
//	   BLAKE3-256 of header and body (32 bytes), zeros to the next 512 boundary
//
// In an entry, prev is the ref's previous entry in the chunk (for the first:
// seq from, time 0), and flag 1 means old is the previous entry's new value,
// which a ref moved by compare-and-swap nearly always has: 40 bytes a move
// instead of 76.
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
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

const (
	// Name is the file's name in the store directory.
	Name    = "reflog"
	hdrSize = 32
	// Align is the chunk alignment: a checkpoint's reflog length is a
	// multiple of it.
	Align = 512
)

var magic = [4]byte{'S', 'W', 'R', 'L'}

// oldIsPrev marks an entry whose old value is the previous entry's new.
const oldIsPrev = 1

// EncodeChunk encodes the moves of frames from <= seq < to, padded to
// Align.
func EncodeChunk(from, to uint64, names []string, logs [][]refs.Entry) []byte {
	b := make([]byte, hdrSize, 1<<12)
	copy(b[0:4], magic[:])
	b[4] = 1
	binary.LittleEndian.PutUint64(b[16:], from)
	binary.LittleEndian.PutUint64(b[24:], to)
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
			seq, t = e.Seq, e.Time.UnixNano()
		}
	}
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-hdrSize))
	sum := b3.Sum256(b)
	b = append(b, sum[:]...)
	if r := len(b) % Align; r != 0 {
		b = append(b, make([]byte, Align-r)...)
	}
	return b
}

// Decode decodes the chunks of b (the file's first length bytes) into
// the moves of every ref, oldest first. Chunks must follow each other in
// sequence order, each within [from, to) of its header. It is one piece,
// a chunk's layout from top to bottom, with one position and one way to
// fail.
func Decode(b []byte) (map[string][]refs.Entry, error) {
	out := map[string][]refs.Entry{}
	var next uint64
	for off := 0; off < len(b); {
		h := b[off:]
		if len(h) < hdrSize+32 || !bytes.Equal(h[0:4], magic[:]) || h[4] != 1 {
			return nil, &offsetError{off, "no chunk header"}
		}
		bl := uint64(binary.LittleEndian.Uint32(h[8:]))
		if bl > uint64(len(h)-hdrSize-32) {
			return nil, &offsetError{off, fmt.Sprintf("chunk body of %d bytes runs past the end", bl)}
		}
		end := hdrSize + int(bl)
		if s := b3.Sum256(h[:end]); !bytes.Equal(s[:], h[end:end+32]) {
			return nil, &offsetError{off, "chunk checksum mismatch"}
		}
		from, to := binary.LittleEndian.Uint64(h[16:]), binary.LittleEndian.Uint64(h[24:])
		if from < next || to < from {
			return nil, &offsetError{off, fmt.Sprintf("chunk covers frames %d..%d after frame %d", from, to, next)}
		}
		next = to
		body, pos, bad := h[hdrSize:end], 0, false
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
				return make([]byte, n%64)
			}
			s := body[pos : pos+int(n)]
			pos += int(n)
			return s
		}
		limit := uint64(len(body))
		vi := func() int64 {
			v, n := binary.Varint(body[pos:])
			if n <= 0 {
				bad = true
				return 0
			}
			pos += n
			return v
		}
		n := uv()
		for i := uint64(0); i < n && !bad && i < limit; i++ {
			name := string(take(uv()))
			k := uv()
			seq, t := from, int64(0)
			var prev refs.Entry
			for j := uint64(0); j < k && !bad && j < limit; j++ {
				var e refs.Entry
				e.Seq = seq + uv()
				switch fl := take(1)[0]; {
				case fl == oldIsPrev && j > 0:
					e.Old = prev.New
				case fl == 0:
					e.Old = objects.ID(take(32))
				default:
					bad = true
				}
				e.New = objects.ID(take(32))
				t += vi()
				e.Time = time.Unix(0, t).UTC()
				if e.Seq < from || e.Seq >= to || (j > 0 && e.Seq <= seq) {
					bad = true
				}
				out[name] = append(out[name], e)
				seq, prev = e.Seq, e
			}
		}
		if bad || pos != len(body) {
			return nil, &offsetError{off, fmt.Sprintf("chunk body does not parse (at byte %d)", pos)}
		}
		off += (end + 32 + Align - 1) / Align * Align
	}
	return out, nil
}

type offsetError struct {
	off    int
	reason string
}

func (e *offsetError) Error() string { return e.reason }

// Read reads every move in the first length bytes of dir/reflog.
// Damage is a *CorruptError naming the file and the chunk's offset.
func Read(fsys vfs.FS, dir string, length int64) (map[string][]refs.Entry, error) {
	if length == 0 {
		return map[string][]refs.Entry{}, nil
	}
	p := path.Join(dir, Name)
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Corrupt(p, 0, "reflog file named by the checkpoint (%d bytes) is missing", length)
	}
	if err != nil {
		return nil, errs.IO("open reflog", err)
	}
	defer f.Close()
	b := make([]byte, length)
	if err := vfs.ReadFull(f, b, 0); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, errs.Corrupt(p, 0, "reflog is shorter than the %d bytes the checkpoint names", length)
		}
		return nil, errs.IO("read reflog", err)
	}
	m, err := Decode(b)
	if err != nil {
		var oe *offsetError
		if errors.As(err, &oe) {
			return nil, errs.Corrupt(p, int64(oe.off), "%s", oe.reason)
		}
		return nil, errs.Corrupt(p, 0, "%v", err)
	}
	return m, nil
}

// Append writes chunk at offset at (the current checkpoint's reflog
// length) and makes it durable; it returns the new length. The file exists
// from Create on; if it does not (a store whose reflog is still empty), it is
// created and the store directory synced, so the checkpoint never names a
// file whose directory entry could be lost.
func Append(fsys vfs.FS, dir string, at int64, chunk []byte) (int64, error) {
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
	if err := vfs.Datasync(f); err != nil {
		f.Close()
		return 0, errs.IO("sync reflog", err)
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
