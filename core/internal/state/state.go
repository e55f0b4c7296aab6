// Package state is the state file: two fixed records that every process
// sharing a store reads and writes in the page cache. It is never synced: after a power loss
// it may hold anything, which is why it carries the boot id it was written
// under and a keyed checksum, and why recovery trusts it only as a lower
// bound of the durable prefix.
//
//	offset 0    end record      written only under LOCK
//	offset 512  durable record  written only under SYNCLOCK (or LOCK+SYNCLOCK)
//
// Each record (64 bytes):
//
//	 0 magic "SWST"  4 kind (1 end, 2 durable)  8 epoch  16 segment  24 offset
//	32 next seq  40 boot (16 bytes, BLAKE3 of the boot id)
//	56 flags (low 8 bits) | gc generation (high 24 bits, end record only)
//	60 checksum (4 bytes, keyed BLAKE3 of [0,60))
//
// Two records, each with a single writer lock, so the writer publishing the
// end and the syncer publishing the durable position never overwrite each
// other's update. The epoch counts recoveries that cut frames; a process
// whose projection was built under another epoch reloads it, and a syncer
// whose frame was appended under another epoch fails instead of
// acknowledging a frame recovery may have cut.
package state

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/spf13/afero"
	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
)

const (
	// RecSize is the size of one record.
	RecSize = 64
	// DurableOff is the offset of the durable record.
	DurableOff = 512
	magic      = 0x54535753 // "SWST"
	// End and Durable are the record kinds: the published end of the
	// journal, and its published durable position.
	End     = 1
	Durable = 2
	// FlagPoisoned in the durable record: a sync failed; the frames past the
	// durable position must be cut by recovery, never synced and published.
	FlagPoisoned = 1
)

// Rec is one decoded record.
type Rec struct {
	Epoch   uint64
	Pos     journal.Pos
	NextSeq uint64
	Boot    [16]byte
	Flags   uint32 // 8 bits
	// GC is the garbage collection generation (end record): a
	// collection advances it, under LOCK, once its rewritten index is
	// installed; a commit built before that is built again (core's gc).
	// It counts modulo 2^24 and is only ever compared for equality.
	GC uint32
}

// GCMask is the range of Rec.GC.
const GCMask = 1<<24 - 1

// BootHash is what a record keeps of a boot id.
func BootHash(boot string) (b [16]byte) {
	h := blake3.Sum256([]byte(boot))
	copy(b[:], h[:16])
	return b
}

// hashers reuses keyed 4-byte BLAKE3 hashers for the record
// checksums: each commit checks or writes six records, and a new hasher is a
// ~2 KiB allocation.
var hashers sync.Pool

type keyedHasher struct {
	key journal.Key
	h   *blake3.Hasher
}

func hasher(key journal.Key) *keyedHasher {
	if h, ok := hashers.Get().(*keyedHasher); ok && h.key == key {
		h.h.Reset()
		return h
	}
	return &keyedHasher{key: key, h: blake3.New(4, key[:])}
}

// Encode encodes record r of kind with its keyed checksum.
func Encode(key journal.Key, kind uint32, r Rec) []byte {
	b := make([]byte, RecSize)
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint32(b[4:], kind)
	binary.LittleEndian.PutUint64(b[8:], r.Epoch)
	binary.LittleEndian.PutUint64(b[16:], r.Pos.Seg)
	binary.LittleEndian.PutUint64(b[24:], uint64(r.Pos.Off))
	binary.LittleEndian.PutUint64(b[32:], r.NextSeq)
	copy(b[40:56], r.Boot[:])
	binary.LittleEndian.PutUint32(b[56:], r.Flags&0xff|(r.GC&GCMask)<<8)
	h := hasher(key)
	h.h.Write(b[:60])
	h.h.Sum(b[60:60])
	hashers.Put(h)
	return b
}

func decode(key journal.Key, kind uint32, b []byte) (Rec, bool) {
	var r Rec
	if len(b) < RecSize || binary.LittleEndian.Uint32(b[0:]) != magic || binary.LittleEndian.Uint32(b[4:]) != kind {
		return r, false
	}
	h := hasher(key)
	h.h.Write(b[:60])
	var sum [4]byte
	h.h.Sum(sum[:0])
	hashers.Put(h)
	if [4]byte(b[60:64]) != sum {
		return r, false
	}
	r.Epoch = binary.LittleEndian.Uint64(b[8:])
	r.Pos = journal.Pos{Seg: binary.LittleEndian.Uint64(b[16:]), Off: int64(binary.LittleEndian.Uint64(b[24:]))}
	r.NextSeq = binary.LittleEndian.Uint64(b[32:])
	copy(r.Boot[:], b[40:56])
	w := binary.LittleEndian.Uint32(b[56:])
	r.Flags, r.GC = w&0xff, w>>8
	if r.Pos.Seg == 0 || r.Pos.Off < journal.FirstFrame || r.NextSeq == 0 {
		return r, false
	}
	return r, true
}

// File reads and writes the state records through one open handle. It
// takes no lock of its own: each record is written whole at its offset by
// the holder of the file lock that guards it, and every read checks what it
// read.
type File struct {
	fs   vfs.FS
	path string
	key  journal.Key
	f    afero.File
	// ro: the file could only be opened for reading (f may be nil when
	// it does not exist either); Write fails with ErrReadOnly.
	ro bool
}

// New returns the state file at path of the store whose key is key. It is
// opened at first use.
func New(fsys vfs.FS, path string, key journal.Key) *File {
	return &File{fs: fsys, path: path, key: key}
}

// Path returns the file's name.
func (sf *File) Path() string { return sf.path }

func (sf *File) open() error {
	if sf.f != nil {
		return nil
	}
	st, err := sf.fs.Stat(sf.path)
	if err == nil && !st.Mode().IsRegular() {
		return errs.Corrupt(sf.path, 0, "state is not a regular file")
	}
	f, err := sf.fs.OpenFile(sf.path, os.O_RDWR|os.O_CREATE, 0o644)
	if errs.NotWritable(err) {
		// A read-only mount, or another user's store: readers need only
		// read access, and Write reports ErrReadOnly. A missing file
		// reads as missing records (Healthy says no), which only a
		// process that can write recovers.
		f, err = sf.fs.OpenFile(sf.path, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			sf.ro = true
			return nil
		}
		sf.ro = err == nil
	}
	if err != nil {
		return errs.IO("open state", err)
	}
	sf.f = f
	return nil
}

// ReadOnly reports whether the file could be opened for reading only
// (known after the first read or write).
func (sf *File) ReadOnly() bool { return sf.ro }

// Close closes the handle; a later call reopens it.
func (sf *File) Close() {
	if sf.f != nil {
		sf.f.Close()
		sf.f = nil
	}
	sf.ro = false
}

// read reads one record. ok is false for a missing, short or invalid record.
func (sf *File) Read(kind uint32) (Rec, bool, error) {
	r, ok, _, err := sf.readRaw(kind, [16]byte{})
	return r, ok, err
}

// bufs holds read buffers of the state file: a commit reads it three
// times and a fresh snapshot once. For a reader of cached changesets these
// buffers were a fifth of its garbage, and the collections it causes cut
// into its tail beside a writer (P7).
var bufs = sync.Pool{New: func() any { return new([DurableOff + RecSize]byte) }}

// ReadBoth reads the end and the durable record with one read: they lie in
// the first DurableOff+RecSize bytes. Each is checked as read
// checks it (ok false for a missing, short or invalid record); one read
// instead of two is a system call less on every commit's path.
func (sf *File) ReadBoth() (end Rec, eok bool, dur Rec, dok bool, err error) {
	if err := sf.open(); err != nil {
		return end, false, dur, false, err
	}
	if sf.f == nil {
		return end, false, dur, false, nil
	}
	buf := bufs.Get().(*[DurableOff + RecSize]byte)
	defer bufs.Put(buf)
	b := buf[:]
	n, err := vfs.QuickReadAt(sf.f, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return end, false, dur, false, errs.IO("read state", err)
	}
	if n >= RecSize {
		end, eok = decode(sf.key, End, b[:RecSize])
	}
	if n >= DurableOff+RecSize {
		dur, dok = decode(sf.key, Durable, b[DurableOff:])
	}
	return end, eok, dur, dok, nil
}

// readRaw is read that also reports whether an invalid record may be a
// read torn by a concurrent write in boot (mayBeTorn).
func (sf *File) readRaw(kind uint32, boot [16]byte) (r Rec, ok, torn bool, err error) {
	if err := sf.open(); err != nil {
		return Rec{}, false, false, err
	}
	if sf.f == nil {
		return Rec{}, false, false, nil
	}
	off := int64(0)
	if kind == Durable {
		off = DurableOff
	}
	buf := bufs.Get().(*[DurableOff + RecSize]byte)
	defer bufs.Put(buf)
	b := buf[:RecSize]
	n, err := vfs.QuickReadAt(sf.f, b, off)
	if n < len(b) && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)) {
		return Rec{}, false, false, nil
	}
	if err != nil {
		return Rec{}, false, false, errs.IO("read state", err)
	}
	r, ok = decode(sf.key, kind, b)
	return r, ok, !ok && mayBeTorn(b, kind, boot), nil
}

// mayBeTorn reports whether an invalid record b could be a read torn by a
// concurrent write in this boot, the only case worth reading again. Such a
// read mixes two records this boot wrote, so it is whole, carries the magic
// and kind, and names this boot. A missing, short or zero record, or one
// from another boot, is what a power loss leaves (the state file is never
// synced): retrying it would only delay every Open after a power loss.
func mayBeTorn(b []byte, kind uint32, boot [16]byte) bool {
	if len(b) < RecSize || binary.LittleEndian.Uint32(b[0:]) != magic ||
		binary.LittleEndian.Uint32(b[4:]) != kind {
		return false
	}
	return [16]byte(b[40:56]) == boot
}

// ReadStable reads a record written by a holder of a lock the caller does
// not hold: an invalid read that may be torn by a concurrent write of the
// record (mayBeTorn) is retried a few times; any other invalid read returns
// at once.
func (sf *File) ReadStable(kind uint32, boot [16]byte) (Rec, bool, error) {
	for i := 0; ; i++ {
		r, ok, torn, err := sf.readRaw(kind, boot)
		if ok || err != nil || i == 4 || !torn {
			return r, ok, err
		}
		time.Sleep(time.Duration(i+1) * 100 * time.Microsecond)
	}
}

// Write writes record r of kind.
func (sf *File) Write(kind uint32, r Rec) error {
	if err := sf.open(); err != nil {
		return err
	}
	if sf.ro {
		return fmt.Errorf("%w: write state %s: it opened for reading only", errs.ErrReadOnly, sf.path)
	}
	off := int64(0)
	if kind == Durable {
		off = DurableOff
	}
	if _, err := sf.f.WriteAt(Encode(sf.key, kind, r), off); err != nil {
		return errs.IO("write state", err)
	}
	return nil
}

// Unhealthy says why Healthy is false, for a message: the records are
// missing or invalid, from another boot (a power loss), of two epochs,
// poisoned by a failed sync, or durable past the end.
func Unhealthy(end Rec, eok bool, dur Rec, dok bool, boot [16]byte) string {
	switch {
	case !eok || !dok:
		return "its state records are missing or invalid"
	case end.Boot != boot || dur.Boot != boot:
		return "its state was written before a restart or power loss"
	case dur.Flags&FlagPoisoned != 0:
		return "a journal sync failed"
	}
	return "its state records disagree"
}

// Healthy reports whether the records read (eok, dok: each was valid) can be
// trusted as they are: both written in this boot (boot, BootHash of the
// current boot id), in one epoch, the durable one not poisoned and not past
// the end. Otherwise the store recovers before it writes.
func Healthy(end Rec, eok bool, dur Rec, dok bool, boot [16]byte) bool {
	return eok && dok && end.Boot == boot && dur.Boot == boot && end.Epoch == dur.Epoch &&
		dur.Flags&FlagPoisoned == 0 && dur.NextSeq <= end.NextSeq
}

// Both is one read of both records (see ReadBoth).
type Both struct {
	End, Dur Rec
	EOK, DOK bool
}

// ReadPair is ReadBoth as a Both.
func (sf *File) ReadPair() (*Both, error) {
	var b Both
	var err error
	b.End, b.EOK, b.Dur, b.DOK, err = sf.ReadBoth()
	return &b, err
}

// RandEpoch returns a random epoch, for a store created or recovered with
// no readable record to count on from: epochs of the same store never
// repeat in practice, and the 56 random bits keep it clear of zero.
func RandEpoch() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return (uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 |
		uint64(b[5])<<40 | uint64(b[6])<<48) + 1
}
