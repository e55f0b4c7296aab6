package core

import (
	"encoding/binary"
	"errors"
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

// The state file holds two fixed records that every process sharing a store
// reads and writes in the page cache. It is never synced: after a power loss
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
//	32 next seq  40 boot (16 bytes, BLAKE3 of the boot id)  56 flags (u32)
//	60 checksum (4 bytes, keyed BLAKE3 of [0,60))
//
// Two records, each with a single writer lock, so the writer publishing the
// end and the syncer publishing the durable position never overwrite each
// other's update. The epoch counts recoveries that cut frames; a process
// whose projection was built under another epoch reloads it, and a syncer
// whose frame was appended under another epoch fails instead of
// acknowledging a frame recovery may have cut.
const (
	stateRecSize    = 64
	stateDurableOff = 512
	stateMagic      = 0x54535753 // "SWST"
	recEnd          = 1
	recDurable      = 2
	// flagPoisoned in the durable record: a sync failed; the frames past the
	// durable position must be cut by recovery, never synced and published.
	flagPoisoned = 1
)

// stateRec is one decoded record.
type stateRec struct {
	Epoch   uint64
	Pos     journal.Pos
	NextSeq uint64
	Boot    [16]byte
	Flags   uint32
}

func bootHash(boot string) (b [16]byte) {
	h := blake3.Sum256([]byte(boot))
	copy(b[:], h[:16])
	return b
}

// stateHashers reuses keyed 4-byte BLAKE3 hashers for the record
// checksums: each commit checks or writes six records, and a new hasher is a
// ~2 KiB allocation.
var stateHashers sync.Pool

type keyedHasher struct {
	key journal.Key
	h   *blake3.Hasher
}

func stateHasher(key journal.Key) *keyedHasher {
	if h, ok := stateHashers.Get().(*keyedHasher); ok && h.key == key {
		h.h.Reset()
		return h
	}
	return &keyedHasher{key: key, h: blake3.New(4, key[:])}
}

func encodeStateRec(key journal.Key, kind uint32, r stateRec) []byte {
	b := make([]byte, stateRecSize)
	binary.LittleEndian.PutUint32(b[0:], stateMagic)
	binary.LittleEndian.PutUint32(b[4:], kind)
	binary.LittleEndian.PutUint64(b[8:], r.Epoch)
	binary.LittleEndian.PutUint64(b[16:], r.Pos.Seg)
	binary.LittleEndian.PutUint64(b[24:], uint64(r.Pos.Off))
	binary.LittleEndian.PutUint64(b[32:], r.NextSeq)
	copy(b[40:56], r.Boot[:])
	binary.LittleEndian.PutUint32(b[56:], r.Flags)
	h := stateHasher(key)
	h.h.Write(b[:60])
	h.h.Sum(b[60:60])
	stateHashers.Put(h)
	return b
}

func decodeStateRec(key journal.Key, kind uint32, b []byte) (stateRec, bool) {
	var r stateRec
	if len(b) < stateRecSize || binary.LittleEndian.Uint32(b[0:]) != stateMagic || binary.LittleEndian.Uint32(b[4:]) != kind {
		return r, false
	}
	h := stateHasher(key)
	h.h.Write(b[:60])
	var sum [4]byte
	h.h.Sum(sum[:0])
	stateHashers.Put(h)
	if [4]byte(b[60:64]) != sum {
		return r, false
	}
	r.Epoch = binary.LittleEndian.Uint64(b[8:])
	r.Pos = journal.Pos{Seg: binary.LittleEndian.Uint64(b[16:]), Off: int64(binary.LittleEndian.Uint64(b[24:]))}
	r.NextSeq = binary.LittleEndian.Uint64(b[32:])
	copy(r.Boot[:], b[40:56])
	r.Flags = binary.LittleEndian.Uint32(b[56:])
	if r.Pos.Seg == 0 || r.Pos.Off < journal.FirstFrame || r.NextSeq == 0 {
		return r, false
	}
	return r, true
}

// stateFile reads and writes the state records through one open handle.
type stateFile struct {
	fs   vfs.FS
	path string
	key  journal.Key
	f    afero.File
}

func (sf *stateFile) open() error {
	if sf.f != nil {
		return nil
	}
	st, err := sf.fs.Stat(sf.path)
	if err == nil && !st.Mode().IsRegular() {
		return errs.Corrupt(sf.path, 0, "state is not a regular file")
	}
	f, err := sf.fs.OpenFile(sf.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return errs.IO("open state", err)
	}
	sf.f = f
	return nil
}

func (sf *stateFile) close() {
	if sf.f != nil {
		sf.f.Close()
		sf.f = nil
	}
}

// read reads one record. ok is false for a missing, short or invalid record.
func (sf *stateFile) read(kind uint32) (stateRec, bool, error) {
	r, ok, _, err := sf.readRaw(kind, [16]byte{})
	return r, ok, err
}

// stateBufs holds read buffers of the state file: a commit reads it three
// times and a fresh snapshot once. For a reader of cached changesets these
// buffers were a fifth of its garbage, and the collections it causes cut
// into its tail beside a writer (P7).
var stateBufs = sync.Pool{New: func() any { return new([stateDurableOff + stateRecSize]byte) }}

// readBoth reads the end and the durable record with one read: they lie in
// the first stateDurableOff+stateRecSize bytes. Each is checked as read
// checks it (ok false for a missing, short or invalid record); one read
// instead of two is a system call less on every commit's path.
func (sf *stateFile) readBoth() (end stateRec, eok bool, dur stateRec, dok bool, err error) {
	if err := sf.open(); err != nil {
		return end, false, dur, false, err
	}
	buf := stateBufs.Get().(*[stateDurableOff + stateRecSize]byte)
	defer stateBufs.Put(buf)
	b := buf[:]
	n, err := vfs.QuickReadAt(sf.f, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return end, false, dur, false, errs.IO("read state", err)
	}
	if n >= stateRecSize {
		end, eok = decodeStateRec(sf.key, recEnd, b[:stateRecSize])
	}
	if n >= stateDurableOff+stateRecSize {
		dur, dok = decodeStateRec(sf.key, recDurable, b[stateDurableOff:])
	}
	return end, eok, dur, dok, nil
}

// readRaw is read that also reports whether an invalid record may be a
// read torn by a concurrent write in boot (mayBeTorn).
func (sf *stateFile) readRaw(kind uint32, boot [16]byte) (r stateRec, ok, torn bool, err error) {
	if err := sf.open(); err != nil {
		return stateRec{}, false, false, err
	}
	off := int64(0)
	if kind == recDurable {
		off = stateDurableOff
	}
	buf := stateBufs.Get().(*[stateDurableOff + stateRecSize]byte)
	defer stateBufs.Put(buf)
	b := buf[:stateRecSize]
	n, err := vfs.QuickReadAt(sf.f, b, off)
	if n < len(b) && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)) {
		return stateRec{}, false, false, nil
	}
	if err != nil {
		return stateRec{}, false, false, errs.IO("read state", err)
	}
	r, ok = decodeStateRec(sf.key, kind, b)
	return r, ok, !ok && mayBeTorn(b, kind, boot), nil
}

// mayBeTorn reports whether an invalid record b could be a read torn by a
// concurrent write in this boot, the only case worth reading again. Such a
// read mixes two records this boot wrote, so it is whole, carries the magic
// and kind, and names this boot. A missing, short or zero record, or one
// from another boot, is what a power loss leaves (the state file is never
// synced): retrying it would only delay every Open after a power loss.
func mayBeTorn(b []byte, kind uint32, boot [16]byte) bool {
	if len(b) < stateRecSize || binary.LittleEndian.Uint32(b[0:]) != stateMagic ||
		binary.LittleEndian.Uint32(b[4:]) != kind {
		return false
	}
	return [16]byte(b[40:56]) == boot
}

// readStable reads a record written by a holder of a lock the caller does
// not hold: an invalid read that may be torn by a concurrent write of the
// record (mayBeTorn) is retried a few times; any other invalid read returns
// at once.
func (sf *stateFile) readStable(kind uint32, boot [16]byte) (stateRec, bool, error) {
	for i := 0; ; i++ {
		r, ok, torn, err := sf.readRaw(kind, boot)
		if ok || err != nil || i == 4 || !torn {
			return r, ok, err
		}
		time.Sleep(time.Duration(i+1) * 100 * time.Microsecond)
	}
}

func (sf *stateFile) write(kind uint32, r stateRec) error {
	if err := sf.open(); err != nil {
		return err
	}
	off := int64(0)
	if kind == recDurable {
		off = stateDurableOff
	}
	if _, err := sf.f.WriteAt(encodeStateRec(sf.key, kind, r), off); err != nil {
		return errs.IO("write state", err)
	}
	return nil
}
