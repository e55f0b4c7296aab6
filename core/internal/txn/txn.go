// Package txn is the payload of a journal frame: one write transaction of
// the store, with its new objects and its ref moves, and the frame kinds
// that carry one.
//
// A transaction payload (the body of one journal frame):
//
//	version u8 (3, or 4) | time i64 (unix ns) | nobj uvarint | objects… | nref uvarint | moves… | origin (nref > 0 only)
//	        | nprot uvarint | protections… (version 4 only)
//	object: kind u8 | flags u8 (1 = loose, 2 = in the body) | id [32] (loose only) | len uvarint | bytes (absent if loose)
//	move:   name len uvarint | name | flags u8 | old [32] | new: [32], or (flag 1) uvarint j
//	origin: op u8 | agent len uvarint | agent | undoes uvarint (op undo only)
//	protection: pattern len uvarint | pattern | on u8 (1 protect, 0 clear)
//
// An inline object carries no id: its id is the hash of its kind and bytes
// (objects.IDOf), which replay computes, and the frame's checksum already
// covers the bytes. Carrying the ids cost 34 bytes per object, enough to push
// a one-file commit's frame from one 512-byte sector into two (issue #8, P6).
// A loose object carries only its id and size: its bytes are in objects/,
// made durable before the frame was written. A move whose new value is the
// id of the frame's object j (a commit advancing a ref to its changeset)
// names j instead of the id.
//
// The origin says who made the frame's ref moves and by which operation
// (refs.Origin): every move of a frame shares it, and a frame without moves
// has none. Version 2 payloads, written before origins were recorded, carry
// none and decode with refs.OpUnknown and no agent. Version 1 payloads (ids
// inline) are refused.
//
// A split payload (the payload of a split journal frame, EncodePayload) is
// a head, laid out as above, followed by a body: the bytes of the blobs
// whose flags are 2 (in the body), one after another in the order of the
// objects. Such a blob carries its id and size in the head, as a loose one
// does:
//
//	object in the body: kind u8 (blob) | flags u8 (2) | id [32] | len uvarint
//	in a group:         kind u8 (blob) | flags u8 (3) | id [32] | len uvarint | stored uvarint
//
// Consecutive body blobs of at most zblob.GroupMax bytes together form a
// group, stored as one zstd frame of their bytes when that is smaller
// (flags 3). The group's first member gives the frame's length (stored >
// 0) and the frame takes its place in the body; each later member gives
// stored 0 and takes no body bytes: its bytes follow the previous
// member's in what the frame decodes to. A body blob stored as it is
// (flags 2) ends a group. A reader that predates flags 3 refuses the
// frame as malformed (corruption), never misreads it.
//
// Replay reads only the head: what it keeps of a blob is its id, size and
// place (with its stored length), and the id it would otherwise hash the
// bytes for is in the head, so replay never decompresses.
// A transaction whose inline blobs total more than SplitAbove bytes is
// split; smaller ones keep the compact layout, so a one-file commit stays
// one sector.
//
// Protections (refs.Protection) set or clear the patterns of refs that only
// a land may move. A frame that carries any is written as version 4; every
// other frame stays version 3, so a commit's frame, and the golden bytes,
// are what they were before protections existed.
package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// FrameTxn is the journal frame kind of a write transaction.
const FrameTxn = 1

// FrameFresh is a write transaction whose writer found, under the writer
// lock with its projection at the published end, that no changeset it
// carries was in the store: replay then need not look them up in the
// index runs (at 1M changesets after a SIGKILL, those lookups were about a
// quarter of the open). A frame cut by recovery takes every later frame
// with it, so the claim, which names only earlier frames, stays true. The
// header that carries the kind is covered by the frame's checksum.
const FrameFresh = 2

// Version is the first byte of a transaction payload this build writes
// for a frame without protections; it reads VersionNoOrigin payloads too.
const Version = 3

// VersionProtect is the first byte of a payload that carries protections.
const VersionProtect = 4

// VersionNoOrigin is the payload version whose moves carry no origin.
const VersionNoOrigin = 2

// Obj is one object a transaction adds.
type Obj struct {
	Kind  objects.Kind
	Loose bool
	ID    objects.ID
	Data  []byte // encoding; nil if loose; the stored bytes if Stored > 0
	Size  int64  // the encoding's length, or the loose file's size
	// Stored is the length of the zstd frame of a body blob's compressed
	// group (flags 3), set by encode and decode: Off is the frame's
	// offset, Data, when decoded, the frame, and Inner where the blob's
	// bytes start in what it decodes to. 0: not compressed.
	Stored, Inner int
	// Off is the offset of Data inside the payload, set by Encode and by
	// Decode: the projection locates an inline object in its segment by
	// it.
	Off int
}

// Txn is one write transaction: the objects it adds and the ref moves it
// makes, all in one frame.
type Txn struct {
	Time  time.Time
	Objs  []Obj
	Moves []refs.Move
	// Origin is who made Moves and by which operation (encoded only with
	// moves).
	Origin refs.Origin
	// Protect sets or clears protection patterns (version 4 only).
	Protect []refs.Protection
	// Seq is the sequence number of the frame once appended (not encoded).
	Seq uint64
	// BuiltEpoch is the epoch of the projection the objects were deduplicated
	// against (not encoded).
	BuiltEpoch uint64
	// BuiltGC is the garbage collection generation of that projection
	// (not encoded): see core's gc.
	BuiltGC uint32
	// Roll starts a new journal segment for the frame (not encoded):
	// garbage collection's first frame.
	Roll bool
}

const flagLoose = 1

// flagBody marks a blob whose bytes are in a split frame's body.
const flagBody = 2

// flagBodyZ marks a body blob stored as a zstd frame (zblob).
const flagBodyZ = 3

// moveNewInFrame marks a move whose new value is an object of the frame.
const moveNewInFrame = 1

// SplitAbove is the inline blob bytes above which a transaction's payload
// is split (EncodePayload): its blobs go into the frame's body, which
// replay does not read. A frame under it costs replay at most 64 sectors;
// a one-file commit stays one sector.
const SplitAbove = 32 << 10

// Encode returns t's payload, not split, and sets each object's Off.
func Encode(t *Txn) []byte {
	p, _ := encode(t, false)
	return p
}

// EncodePayload returns t's payload and the length of its head when it is
// to be a split frame's (0: not split), and sets each object's Off. A
// transaction whose inline blobs total more than SplitAbove bytes is split:
// each such blob carries its id and size in the head, and its bytes follow
// the head, in the order of the objects, as the body.
func EncodePayload(t *Txn) ([]byte, int) {
	var blobs int
	for _, o := range t.Objs {
		if !o.Loose && o.Kind == objects.KindBlob {
			blobs += len(o.Data)
		}
	}
	return encode(t, blobs > SplitAbove)
}

// encodeMoves appends t's moves and origin.
func encodeMoves(b []byte, t *Txn) []byte {
	b = binary.AppendUvarint(b, uint64(len(t.Moves)))
	for _, m := range t.Moves {
		b = binary.AppendUvarint(b, uint64(len(m.Name)))
		b = append(b, m.Name...)
		j := -1
		for i, o := range t.Objs {
			if o.Kind == objects.KindChangeset && o.ID == m.New && !m.New.IsZero() {
				j = i
				break
			}
		}
		if j >= 0 {
			b = append(b, moveNewInFrame)
			b = append(b, m.Old[:]...)
			b = binary.AppendUvarint(b, uint64(j))
		} else {
			b = append(b, 0)
			b = append(b, m.Old[:]...)
			b = append(b, m.New[:]...)
		}
	}
	if len(t.Moves) > 0 {
		b = append(b, byte(t.Origin.Op))
		b = binary.AppendUvarint(b, uint64(len(t.Origin.Agent)))
		b = append(b, t.Origin.Agent...)
		if t.Origin.Op == refs.OpUndo {
			b = binary.AppendUvarint(b, t.Origin.Undoes)
		}
	}
	if len(t.Protect) > 0 {
		b = binary.AppendUvarint(b, uint64(len(t.Protect)))
		for _, p := range t.Protect {
			b = binary.AppendUvarint(b, uint64(len(p.Pattern)))
			b = append(b, p.Pattern...)
			if p.On {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	}
	return b
}

// ErrMalformed is a payload that does not parse.
var ErrMalformed = errors.New("malformed transaction payload")

// Decode parses a payload. Object data aliases p. A frame whose checksum
// verified but whose payload does not parse is corruption (or a bug), never a
// torn tail, so the caller reports it as such.
func Decode(p []byte) (*Txn, error) {
	t := &Txn{}
	if err := DecodeInto(t, p); err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeInto is Decode into t, whose slices it reuses: replay decodes
// thousands of frames into one txn instead of allocating each.
func DecodeInto(t *Txn, p []byte) error { return decode(t, p, 0, len(p), false) }

// DecodeFrame is DecodeInto of a frame's payload, which may be split
// (fr.Head) and of which only the head may have been read (fr.HeadOnly):
// the objects in the body then have no Data, only their ids, sizes and
// offsets.
func DecodeFrame(t *Txn, fr *journal.Frame) error {
	return decode(t, fr.Payload, fr.Head, fr.Len, fr.HeadOnly)
}

// decode is DecodeInto of p, whose first head bytes are a split frame's
// head (head 0: not split). total is the payload's length; headOnly says
// p holds the head only. It is one piece, the payload's layout from top
// to bottom, with one position and one way to fail, in the hot path of
// every replay.
func decode(t *Txn, p []byte, head, total int, headOnly bool) error {
	pos := 0
	whole := p
	body := 0 // the next body object's offset in the payload
	// gOff and gStored locate the current compressed group's frame (0:
	// none), gInner is where its next member starts in what it decodes to.
	var gOff, gStored, gInner int
	if head > 0 {
		if head > len(p) || (!headOnly && len(p) != total) || (headOnly && len(p) != head) {
			return fmt.Errorf("%w: head of %d bytes in a payload of %d (%d read)", ErrMalformed, head, total, len(p))
		}
		body, p = head, p[:head]
	}
	fail := func(what string) error {
		return fmt.Errorf("%w: %s at payload byte %d", ErrMalformed, what, pos)
	}
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p[pos:])
		if n <= 0 {
			return 0, false
		}
		pos += n
		return v, true
	}
	if len(p) < 9 || (p[0] != Version && p[0] != VersionNoOrigin && p[0] != VersionProtect) {
		return fail("bad version or short payload")
	}
	version := p[0]
	*t = Txn{Time: time.Unix(0, int64(binary.LittleEndian.Uint64(p[1:]))).UTC(), Objs: t.Objs[:0], Moves: t.Moves[:0], Protect: t.Protect[:0]}
	pos = 9
	nobj, ok := uv()
	if !ok || nobj > uint64(len(p)) {
		return fail("bad object count")
	}
	if uint64(cap(t.Objs)) < nobj {
		t.Objs = make([]Obj, 0, nobj)
	}
	for i := uint64(0); i < nobj; i++ {
		if len(p)-pos < 2 {
			return fail("short object header")
		}
		o := Obj{Kind: objects.Kind(p[pos]), Loose: p[pos+1] == flagLoose}
		compressed := p[pos+1] == flagBodyZ
		inBody := p[pos+1] == flagBody || compressed
		if !o.Kind.Valid() || (p[pos+1] != 0 && o.Kind != objects.KindBlob) || (p[pos+1] > flagLoose && !(inBody && head > 0)) {
			return fail("bad object kind or flags")
		}
		pos += 2
		if o.Loose || inBody {
			if len(p)-pos < 32 {
				return fail("short loose object id")
			}
			copy(o.ID[:], p[pos:pos+32])
			pos += 32
		}
		sz, ok := uv()
		if !ok || sz > 1<<40 {
			return fail("bad object size")
		}
		o.Size = int64(sz)
		if compressed {
			st, ok := uv()
			switch {
			case !ok || st > zblob.GroupMax:
				return fail("bad stored length of a compressed group")
			case st > 0: // a group's first member: the group's frame is next in the body
				if uint64(total-body) < st {
					return fail("compressed group past the end of the payload")
				}
				gOff, gStored, gInner = body, int(st), 0
				body += int(st)
			case gStored == 0:
				return fail("compressed object outside a group")
			}
			if uint64(gInner)+sz > zblob.GroupMax {
				return fail("compressed group of more than zblob.GroupMax bytes")
			}
			o.Off, o.Stored, o.Inner = gOff, gStored, gInner
			gInner += int(sz)
			if !headOnly {
				o.Data = whole[gOff : gOff+gStored]
			}
		} else if inBody {
			gStored = 0 // a body blob stored as it is ends the group
		}
		if inBody && !compressed {
			if uint64(total-body) < sz {
				return fail("body object past the end of the payload")
			}
			o.Off = body
			if !headOnly {
				o.Data = whole[body : body+int(sz)]
			}
			body += int(sz)
		}
		if !o.Loose && !inBody {
			if uint64(len(p)-pos) < sz {
				return fail("object data past end")
			}
			o.Off = pos
			o.Data = p[pos : pos+int(sz)]
			o.ID = objects.IDOf(o.Kind, o.Data)
			pos += int(sz)
		}
		t.Objs = append(t.Objs, o)
	}
	nm, ok := uv()
	if !ok || nm > uint64(len(p)) {
		return fail("bad move count")
	}
	for i := uint64(0); i < nm; i++ {
		l, ok := uv()
		if !ok || l > refs.MaxNameLen || uint64(len(p)-pos) < l+1+32 {
			return fail("bad move")
		}
		m := refs.Move{Name: string(p[pos : pos+int(l)])}
		pos += int(l)
		fl := p[pos]
		copy(m.Old[:], p[pos+1:])
		pos += 33
		switch fl {
		case 0:
			if len(p)-pos < 32 {
				return fail("short move")
			}
			copy(m.New[:], p[pos:])
			pos += 32
		case moveNewInFrame:
			j, ok := uv()
			if !ok || j >= uint64(len(t.Objs)) || t.Objs[j].Kind != objects.KindChangeset {
				return fail("move names no changeset of the frame")
			}
			m.New = t.Objs[j].ID
		default:
			return fail("bad move flags")
		}
		t.Moves = append(t.Moves, m)
	}
	if version != VersionNoOrigin && nm > 0 {
		if pos >= len(p) {
			return fail("short origin")
		}
		t.Origin.Op = refs.Op(p[pos])
		pos++
		l, ok := uv()
		if !ok || l > refs.MaxAgentLen || uint64(len(p)-pos) < l {
			return fail("bad origin agent")
		}
		t.Origin.Agent = string(p[pos : pos+int(l)])
		pos += int(l)
		if t.Origin.Op == refs.OpUndo {
			if t.Origin.Undoes, ok = uv(); !ok {
				return fail("bad undone frame")
			}
		}
		if t.Origin.Validate() != nil {
			return fail("bad origin")
		}
	}
	if version == VersionProtect {
		np, ok := uv()
		if !ok || np == 0 || np > uint64(len(p)) {
			return fail("bad protection count")
		}
		for i := uint64(0); i < np; i++ {
			l, ok := uv()
			if !ok || l > refs.MaxNameLen+1 || uint64(len(p)-pos) < l+1 || p[pos+int(l)] > 1 {
				return fail("bad protection")
			}
			pr := refs.Protection{Pattern: string(p[pos : pos+int(l)]), On: p[pos+int(l)] == 1}
			pos += int(l) + 1
			if refs.ValidatePattern(pr.Pattern) != nil {
				return fail("bad protection pattern")
			}
			t.Protect = append(t.Protect, pr)
		}
	}
	if pos != len(p) || (head > 0 && body != total) {
		return fail("trailing bytes")
	}
	return nil
}
