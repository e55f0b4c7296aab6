package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
)

// splitTxn is a transaction whose inline blobs total more than SplitAbove:
// a tree, three 20,000-byte blobs (the second incompressible), a loose
// blob, then fourteen more compressible blobs of 20,000 bytes, enough for
// a second group.
func splitTxn() *Txn {
	tx := &Txn{Time: time.Unix(1_700_000_000, 0).UTC()}
	add := func(k objects.Kind, data []byte) {
		tx.Objs = append(tx.Objs, Obj{Kind: k, ID: objects.IDOf(k, data), Data: data, Size: int64(len(data))})
	}
	add(objects.KindTree, []byte("a tree's bytes"))
	for i := 0; i < 3; i++ {
		b := bytes.Repeat([]byte{byte('a' + i)}, 20_000)
		if i == 1 {
			b = noise(20_000, 1)
		}
		add(objects.KindBlob, b)
	}
	tx.Objs = append(tx.Objs, Obj{Kind: objects.KindBlob, Loose: true, ID: objects.ID{9}, Size: 1 << 20})
	for i := 0; i < 14; i++ {
		add(objects.KindBlob, bytes.Repeat([]byte{byte('d' + i)}, 20_000))
	}
	return tx
}

// noise is n incompressible bytes, the same for the same seed.
func noise(n int, seed uint64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// TestSplitPayloadsDecodeWholeOrByHead: a transaction with more than
// SplitAbove bytes of inline blobs is encoded split, its body blobs in
// compressed groups of at most GroupMax bytes; decoded whole it gives
// every object's stored bytes at its offset (a group's frame, which
// decodes to the group, holding the blob at its inner offset), decoded
// from its head alone the same ids, sizes, groups and offsets without the
// blobs' bytes. Incompressible blobs alone are stored as they are. A
// split payload is refused where a plain one is expected, and a cut head
// or a wrong length is malformed.
func TestSplitPayloadsDecodeWholeOrByHead(t *testing.T) {
	tx := splitTxn()
	p, head := EncodePayload(tx)
	if head == 0 || head > 2000 {
		t.Fatalf("head of %d bytes; want a split payload with a small head", head)
	}
	whole, heads := &Txn{}, &Txn{}
	if err := DecodeFrame(whole, &journal.Frame{Payload: p, Len: len(p), Head: head}); err != nil {
		t.Fatal(err)
	}
	if err := DecodeFrame(heads, &journal.Frame{Payload: p[:head], Len: len(p), Head: head, HeadOnly: true}); err != nil {
		t.Fatal(err)
	}
	groups := map[int]int{} // frame offset -> bytes it holds
	for i, o := range tx.Objs {
		w, h := whole.Objs[i], heads.Objs[i]
		if w.ID != o.ID || h.ID != o.ID || w.Size != o.Size || h.Size != o.Size || w.Off != o.Off || h.Off != o.Off || w.Loose != o.Loose ||
			w.Stored != o.Stored || h.Stored != o.Stored || w.Inner != o.Inner || h.Inner != o.Inner {
			t.Fatalf("object %d: whole %+v, head only %+v; want id, size, group and offset of %+v", i, w, h, o)
		}
		if inBody := o.Kind == objects.KindBlob && !o.Loose; inBody != (o.Stored > 0) {
			t.Fatalf("object %d in a group of %d stored bytes; want every body blob in a group", i, o.Stored)
		}
		if o.Stored > 0 {
			frame := p[o.Off : o.Off+o.Stored]
			group, err := zblob.Decode(frame)
			if err != nil || !bytes.Equal(w.Data, frame) {
				t.Fatalf("object %d: its group's frame at %d: %v", i, o.Off, err)
			}
			if m, err := zblob.Member(group, int64(o.Inner), o.Size); err != nil || !bytes.Equal(m, o.Data) {
				t.Fatalf("object %d: not at %d of its group: %v", i, o.Inner, err)
			}
			groups[o.Off] += int(o.Size)
		} else if !o.Loose && (!bytes.Equal(w.Data, o.Data) || !bytes.Equal(p[o.Off:o.Off+int(o.Size)], o.Data)) {
			t.Fatalf("object %d: its bytes are not at its offset", i)
		}
		if inBody := o.Kind == objects.KindBlob && !o.Loose; !o.Loose && inBody != (h.Data == nil) {
			t.Fatalf("object %d decoded from the head has data %v; want data only for the head's objects", i, h.Data != nil)
		}
	}
	if len(groups) != 2 {
		t.Fatalf("%d groups (%v); want 2 for 17 blobs of 20,000 bytes", len(groups), groups)
	}
	for off, n := range groups {
		if n > zblob.GroupMax {
			t.Fatalf("the group at %d holds %d bytes; want at most %d", off, n, zblob.GroupMax)
		}
	}
	if len(p) > 60_000 {
		t.Fatalf("payload of %d bytes for 320,000 bytes of blobs, 20,000 incompressible; want the groups compressed", len(p))
	}
	noisy := &Txn{Time: tx.Time}
	for i := range 3 {
		b := noise(15_000, uint64(10+i))
		noisy.Objs = append(noisy.Objs, Obj{Kind: objects.KindBlob, ID: objects.IDOf(objects.KindBlob, b), Data: b, Size: int64(len(b))})
	}
	np, nh := EncodePayload(noisy)
	if nh == 0 || len(np) < 45_000 {
		t.Fatalf("incompressible blobs: payload of %d bytes, head %d; want them split and stored as they are", len(np), nh)
	}
	for i, o := range noisy.Objs {
		if o.Stored != 0 || !bytes.Equal(np[o.Off:o.Off+int(o.Size)], o.Data) {
			t.Fatalf("incompressible blob %d: stored %d, or not at its offset", i, o.Stored)
		}
	}
	if err := DecodeInto(&Txn{}, p); err == nil {
		t.Fatal("a split payload decoded as a plain one")
	}
	for _, bad := range []*journal.Frame{
		{Payload: p[:head-1], Len: len(p), Head: head, HeadOnly: true},
		{Payload: p[:head], Len: len(p) - 1, Head: head, HeadOnly: true},
		{Payload: p[:len(p)-1], Len: len(p) - 1, Head: head},
		{Payload: p, Len: len(p), Head: head - 1},
	} {
		if err := DecodeFrame(&Txn{}, bad); err == nil {
			t.Fatalf("decoded a bad frame: %d of %d bytes, head %d", len(bad.Payload), bad.Len, bad.Head)
		}
	}
	small := &Txn{Time: tx.Time, Objs: tx.Objs[:2]}
	if _, head := EncodePayload(small); head != 0 {
		t.Fatalf("a transaction of %d blob bytes was split", len(small.Objs[1].Data))
	}
}

// TestMalformedGroupsAreRefused: a head whose groups cannot be (a member
// before any group, a group past the payload's end or bigger than
// GroupMax, a member after a blob stored as it is ended the group) does
// not decode.
func TestMalformedGroupsAreRefused(t *testing.T) {
	type ent struct {
		fl           byte
		size, stored uint64
	}
	build := func(ents []ent, body int) ([]byte, int) {
		b := []byte{Version, 0, 0, 0, 0, 0, 0, 0, 0}
		b = binary.AppendUvarint(b, uint64(len(ents)))
		for i, e := range ents {
			b = append(b, byte(objects.KindBlob), e.fl)
			id := objects.ID{byte(i + 1)}
			b = append(b, id[:]...)
			b = binary.AppendUvarint(b, e.size)
			if e.fl == flagBodyZ {
				b = binary.AppendUvarint(b, e.stored)
			}
		}
		b = binary.AppendUvarint(b, 0)
		head := len(b)
		return append(b, make([]byte, body)...), head
	}
	ok, okHead := build([]ent{{flagBodyZ, 5, 10}, {flagBodyZ, 7, 0}, {flagBody, 3, 0}, {flagBodyZ, 4, 6}}, 19)
	if err := DecodeFrame(&Txn{}, &journal.Frame{Payload: ok, Len: len(ok), Head: okHead}); err != nil {
		t.Fatalf("a well-formed head: %v", err)
	}
	for name, c := range map[string]struct {
		ents []ent
		body int
	}{
		"a member before any group":    {[]ent{{flagBodyZ, 5, 0}}, 0},
		"a group past the end":         {[]ent{{flagBodyZ, 5, 100}}, 10},
		"a frame bigger than a group":  {[]ent{{flagBodyZ, 5, zblob.GroupMax + 1}}, zblob.GroupMax + 1},
		"a group past GroupMax":        {[]ent{{flagBodyZ, zblob.GroupMax, 10}, {flagBodyZ, 1, 0}}, 10},
		"a member after a stored blob": {[]ent{{flagBodyZ, 5, 10}, {flagBody, 3, 0}, {flagBodyZ, 4, 0}}, 13},
	} {
		p, head := build(c.ents, c.body)
		for _, fr := range []*journal.Frame{{Payload: p, Len: len(p), Head: head}, {Payload: p[:head], Len: len(p), Head: head, HeadOnly: true}} {
			if err := DecodeFrame(&Txn{}, fr); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s (head only %v): %v; want ErrMalformed", name, fr.HeadOnly, err)
			}
		}
	}
}

// FuzzDecodeFrame: arbitrary payloads, heads and lengths never panic, and
// a blob of a compressed group that decodes lies inside the payload, in a
// group of at most GroupMax bytes.
func FuzzDecodeFrame(f *testing.F) {
	p, head := EncodePayload(splitTxn())
	f.Add(p, head, false)
	f.Add(p[:head], head, true)
	f.Add(Encode(splitTxn()), 0, false)
	f.Fuzz(func(t *testing.T, p []byte, head int, headOnly bool) {
		total := len(p)
		if headOnly && head >= 0 && head < len(p) {
			p = p[:head]
		}
		var tx Txn
		if DecodeFrame(&tx, &journal.Frame{Payload: p, Len: total, Head: head, HeadOnly: headOnly}) != nil {
			return
		}
		for i, o := range tx.Objs {
			if o.Stored > 0 && (o.Off < 0 || o.Off+o.Stored > total || o.Inner+int(o.Size) > zblob.GroupMax) {
				t.Fatalf("object %d: a group of %d bytes at %d of %d, member %d+%d", i, o.Stored, o.Off, total, o.Inner, o.Size)
			}
		}
	})
}
