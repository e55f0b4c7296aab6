package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/swarmops/swarmops/core/objects"
)

// Loc is where an object's encoding lives: a byte range of a journal
// segment, or a loose object file (Loose set; Segment and Offset are then
// zero and Length is the object's size). A blob of a compressed group
// (Stored > 0, object records only) is Length bytes at Inner of what the
// zstd frame of Stored bytes at Offset decodes to.
type Loc struct {
	Segment uint32
	Offset  int64
	Length  uint32
	Loose   bool
	Stored  uint32
	Inner   uint32
}

// MaxGroup bounds what a compressed group decodes to, so its frame's
// stored length, and a member's Inner+Length, are at most MaxGroup.
const MaxGroup = 256 << 10

// CSRecord is the index record of a changeset.
type CSRecord struct {
	ID         objects.ID
	Generation uint64
	Parents    []objects.ID
	Delta      objects.Hash
	Loc        Loc
}

// ObjRecord is the index record of a blob or tree (changesets have
// CSRecords; View.Object answers for them too).
type ObjRecord struct {
	ID   objects.ID
	Kind objects.Kind
	Loc  Loc
}

// Match is one candidate of a prefix lookup.
type Match struct {
	ID   objects.ID
	Kind objects.Kind
}

// Batch is the set of records one journal frame adds.
type Batch struct {
	Changesets []CSRecord
	Objects    []ObjRecord
}

// ErrCorrupt is returned when a run file fails a checksum or a structural
// check. It is wrapped in a *CorruptError naming the file and offset.
var ErrCorrupt = errors.New("index: corrupt run")

// ErrInvalid is returned for records that cannot be indexed (a zero id, an
// unknown kind, too many parents, a negative offset).
var ErrInvalid = errors.New("index: invalid record")

// CorruptError names where a run is corrupt. It unwraps to ErrCorrupt.
type CorruptError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s in file %q at offset %d", ErrCorrupt, e.Reason, e.File, e.Offset)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Table numbers, part of each record's and fanout entry's checksum so that
// a record copied into another table or position fails its check.
const (
	tabCS    = 0
	tabObj   = 1
	tabDelta = 2
	nTables  = 3
)

// Record sizes in bytes (see the package doc for the layouts).
const (
	csRecSize    = 136
	objRecSize   = 64 // runs of version 2; version 1 runs have 56-byte object records
	objRecSizeV1 = 56
	deltaRecSize = 68
)

var recSizes = [nTables]int{csRecSize, objRecSize, deltaRecSize}

const flagLoose = 1

// flagZ marks an object record of a blob in a compressed group: stored
// (u32 at 52) and inner (u32 at 56) say where (version 2 records only).
const flagZ = 2

// recCRC is the checksum of a record at position i of table tab.
func recCRC(tab byte, i uint64, rec []byte) uint32 {
	var pre [9]byte
	pre[0] = tab
	binary.BigEndian.PutUint64(pre[1:], i)
	return crc32.Update(crcSmall(0, pre[:]), castagnoli, rec[:len(rec)-4])
}

// crcSmall is crc32.Update(crc, castagnoli, p), computed a byte at a time
// with the same table, for the few prefix bytes of record and fanout
// checksums. crc32.Update hands p to a routine chosen at run time, so p
// escapes: a heap allocation for every record checked or written, which was
// a quarter of the allocations of an open. Equality with crc32.Update is
// tested (TestCRCSmallMatchesCRC32).
func crcSmall(crc uint32, p []byte) uint32 {
	crc = ^crc
	for _, v := range p {
		crc = castagnoli[byte(crc)^v] ^ (crc >> 8)
	}
	return ^crc
}

func sealRec(tab byte, i uint64, rec []byte) {
	binary.BigEndian.PutUint32(rec[len(rec)-4:], recCRC(tab, i, rec))
}

func checkRec(tab byte, i uint64, rec []byte) bool {
	return binary.BigEndian.Uint32(rec[len(rec)-4:]) == recCRC(tab, i, rec)
}

func validLoc(l Loc) error {
	if l.Offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrInvalid, l.Offset)
	}
	return nil
}

func validCS(r *CSRecord) error {
	if r.ID.IsZero() {
		return fmt.Errorf("%w: changeset with zero id", ErrInvalid)
	}
	if r.Loc.Stored != 0 || r.Loc.Inner != 0 {
		return fmt.Errorf("%w: changeset %s stored compressed", ErrInvalid, r.ID)
	}
	if len(r.Parents) > objects.MaxParents {
		return fmt.Errorf("%w: changeset %s has %d parents", ErrInvalid, r.ID, len(r.Parents))
	}
	return validLoc(r.Loc)
}

func validObj(r *ObjRecord) error {
	if r.ID.IsZero() {
		return fmt.Errorf("%w: object with zero id", ErrInvalid)
	}
	if l := r.Loc; l.Stored > 0 && (l.Loose || l.Stored > MaxGroup || uint64(l.Inner)+uint64(l.Length) > MaxGroup) ||
		l.Stored == 0 && l.Inner != 0 {
		return fmt.Errorf("%w: object %s in a group of %d stored bytes at %d+%d (loose %v)", ErrInvalid, r.ID, l.Stored, l.Inner, l.Length, l.Loose)
	}
	if r.Kind != objects.KindBlob && r.Kind != objects.KindTree {
		return fmt.Errorf("%w: object %s has kind %v (changesets go in CSRecords)", ErrInvalid, r.ID, r.Kind)
	}
	return validLoc(r.Loc)
}

func putLoc(b []byte, l Loc) {
	binary.BigEndian.PutUint32(b[0:], l.Segment)
	binary.BigEndian.PutUint64(b[4:], uint64(l.Offset))
	binary.BigEndian.PutUint32(b[12:], l.Length)
}

func getLoc(b []byte, flags byte) Loc {
	return Loc{
		Segment: binary.BigEndian.Uint32(b[0:]),
		Offset:  int64(binary.BigEndian.Uint64(b[4:])),
		Length:  binary.BigEndian.Uint32(b[12:]),
		Loose:   flags&flagLoose != 0,
	}
}

func looseFlag(l Loc) byte {
	if l.Loose {
		return flagLoose
	}
	return 0
}

// encodeCS fills rec (csRecSize bytes, without the checksum) from r; heapRef
// is the offset of the extra parents in the heap when len(r.Parents) > 1.
func encodeCS(rec []byte, r *CSRecord, heapRef uint64) {
	clear(rec)
	copy(rec[0:32], r.ID[:])
	copy(rec[32:64], r.Delta[:])
	if len(r.Parents) > 0 {
		copy(rec[64:96], r.Parents[0][:])
	}
	binary.BigEndian.PutUint64(rec[96:], r.Generation)
	putLoc(rec[104:120], r.Loc)
	binary.BigEndian.PutUint16(rec[120:], uint16(len(r.Parents)))
	rec[122] = looseFlag(r.Loc)
	binary.BigEndian.PutUint64(rec[124:], heapRef)
}

// decodeCS fills r from rec except the extra parents, and returns their
// count and heap offset.
func decodeCS(rec []byte, r *CSRecord) (extra int, heapRef uint64) {
	copy(r.ID[:], rec[0:32])
	copy(r.Delta[:], rec[32:64])
	r.Generation = binary.BigEndian.Uint64(rec[96:])
	r.Loc = getLoc(rec[104:120], rec[122])
	n := int(binary.BigEndian.Uint16(rec[120:]))
	r.Parents = nil
	if n > 0 {
		r.Parents = make([]objects.ID, n)
		copy(r.Parents[0][:], rec[64:96])
	}
	return max(n-1, 0), binary.BigEndian.Uint64(rec[124:])
}

// csRecOK checks the fields a checksum cannot: structure that a buggy
// writer could produce.
func csRecOK(rec []byte) string {
	n := binary.BigEndian.Uint16(rec[120:])
	switch {
	case n > objects.MaxParents:
		return fmt.Sprintf("changeset record with %d parents", n)
	case rec[122]&^flagLoose != 0 || rec[123] != 0:
		return "changeset record with unknown flags"
	case int64(binary.BigEndian.Uint64(rec[108:])) < 0:
		return "changeset record with negative offset"
	}
	return ""
}

func encodeObj(rec []byte, r *ObjRecord) {
	clear(rec)
	copy(rec[0:32], r.ID[:])
	rec[32] = byte(r.Kind)
	rec[33] = looseFlag(r.Loc)
	if r.Loc.Stored > 0 {
		rec[33] |= flagZ
	}
	putLoc(rec[36:52], r.Loc)
	binary.BigEndian.PutUint32(rec[52:], r.Loc.Stored)
	binary.BigEndian.PutUint32(rec[56:], r.Loc.Inner)
}

// decodeObj decodes an object record of either version (by its length).
func decodeObj(rec []byte) ObjRecord {
	var r ObjRecord
	copy(r.ID[:], rec[0:32])
	r.Kind = objects.Kind(rec[32])
	r.Loc = getLoc(rec[36:52], rec[33])
	if len(rec) == objRecSize && rec[33]&flagZ != 0 {
		r.Loc.Stored = binary.BigEndian.Uint32(rec[52:])
		r.Loc.Inner = binary.BigEndian.Uint32(rec[56:])
	}
	return r
}

func objRecOK(rec []byte) string {
	k := objects.Kind(rec[32])
	switch {
	case k != objects.KindBlob && k != objects.KindTree:
		return fmt.Sprintf("object record of kind %d", rec[32])
	case rec[33]&^(flagLoose|flagZ) != 0 || rec[33] == flagLoose|flagZ || rec[34] != 0 || rec[35] != 0 ||
		len(rec) != objRecSize && rec[33]&flagZ != 0:
		return "object record with unknown flags"
	case len(rec) == objRecSize && groupOK(rec) != "":
		return groupOK(rec)
	case int64(binary.BigEndian.Uint64(rec[40:])) < 0:
		return "object record with negative offset"
	}
	return ""
}

// groupOK checks a version 2 object record's stored length and inner
// offset: both zero without flagZ; with it, a group of at most MaxGroup
// bytes holding the object.
func groupOK(rec []byte) string {
	stored, inner, n := binary.BigEndian.Uint32(rec[52:]), binary.BigEndian.Uint32(rec[56:]), binary.BigEndian.Uint32(rec[48:])
	switch {
	case rec[33]&flagZ == 0 && (stored != 0 || inner != 0):
		return "object record with a group but no compressed flag"
	case rec[33]&flagZ != 0 && (stored == 0 || stored > MaxGroup || uint64(inner)+uint64(n) > MaxGroup):
		return fmt.Sprintf("compressed object record with a group of %d stored bytes holding %d+%d", stored, inner, n)
	}
	return ""
}

// deltaRec is one row of the delta table: a delta hash and a changeset
// that has it. Rows sort by (Delta, ID).
type deltaRec struct {
	Delta objects.Hash
	ID    objects.ID
}

func cmpDelta(a, b deltaRec) int {
	if c := bytes.Compare(a.Delta[:], b.Delta[:]); c != 0 {
		return c
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

func cmpID(a, b objects.ID) int { return bytes.Compare(a[:], b[:]) }
