package txn

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
)

// splitTxn is a transaction whose inline blobs total more than SplitAbove:
// a tree, three 20,000-byte blobs (the second incompressible, the others
// compressible) and a loose blob.
func splitTxn() *Txn {
	tx := &Txn{Time: time.Unix(1_700_000_000, 0).UTC()}
	add := func(k objects.Kind, data []byte) {
		tx.Objs = append(tx.Objs, Obj{Kind: k, ID: objects.IDOf(k, data), Data: data, Size: int64(len(data))})
	}
	add(objects.KindTree, []byte("a tree's bytes"))
	for i := 0; i < 3; i++ {
		b := bytes.Repeat([]byte{byte('a' + i)}, 20_000)
		if i == 1 {
			r := rand.New(rand.NewPCG(1, 2))
			for j := range b {
				b[j] = byte(r.Uint32())
			}
		}
		add(objects.KindBlob, b)
	}
	tx.Objs = append(tx.Objs, Obj{Kind: objects.KindBlob, Loose: true, ID: objects.ID{9}, Size: 1 << 20})
	return tx
}

// TestSplitPayloadsDecodeWholeOrByHead: a transaction with more than
// SplitAbove bytes of inline blobs is encoded split; decoded whole it gives
// every object's stored bytes at its offset (a compressible blob's zstd
// frame, which decodes to it; an incompressible one as it is), decoded
// from its head alone the same ids, sizes, stored lengths and offsets
// without the blobs' bytes. A split payload is refused where a plain one
// is expected, and a cut head or a wrong length is malformed.
func TestSplitPayloadsDecodeWholeOrByHead(t *testing.T) {
	tx := splitTxn()
	p, head := EncodePayload(tx)
	if head == 0 || head > 1000 {
		t.Fatalf("head of %d bytes; want a split payload with a small head", head)
	}
	whole, heads := &Txn{}, &Txn{}
	if err := DecodeFrame(whole, &journal.Frame{Payload: p, Len: len(p), Head: head}); err != nil {
		t.Fatal(err)
	}
	if err := DecodeFrame(heads, &journal.Frame{Payload: p[:head], Len: len(p), Head: head, HeadOnly: true}); err != nil {
		t.Fatal(err)
	}
	for i, o := range tx.Objs {
		w, h := whole.Objs[i], heads.Objs[i]
		if w.ID != o.ID || h.ID != o.ID || w.Size != o.Size || h.Size != o.Size || w.Off != o.Off || h.Off != o.Off || w.Loose != o.Loose ||
			w.Stored != o.Stored || h.Stored != o.Stored {
			t.Fatalf("object %d: whole %+v, head only %+v; want id, size, stored length and offset of %+v", i, w, h, o)
		}
		if wantZ := i == 1 || i == 3; (o.Stored > 0) != wantZ || o.Stored >= int(o.Size) {
			t.Fatalf("object %d stored in %d bytes of %d; want compressed: %v", i, o.Stored, o.Size, wantZ)
		}
		stored := o.Data
		if o.Stored > 0 {
			stored = p[o.Off : o.Off+o.Stored]
			if got, err := zblob.Decode(w.Data, o.Size); err != nil || !bytes.Equal(got, o.Data) || !bytes.Equal(w.Data, stored) {
				t.Fatalf("object %d: its frame at its offset decodes to %d bytes, %v; want its %d", i, len(got), err, o.Size)
			}
		} else if !o.Loose && !bytes.Equal(w.Data, o.Data) {
			t.Fatalf("object %d: decoded bytes differ", i)
		}
		if !o.Loose && !bytes.Equal(p[o.Off:o.Off+len(stored)], stored) {
			t.Fatalf("object %d: its bytes are not at its offset", i)
		}
		if inBody := o.Kind == objects.KindBlob && !o.Loose; !o.Loose && inBody != (h.Data == nil) {
			t.Fatalf("object %d decoded from the head has data %v; want data only for the head's objects", i, h.Data != nil)
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
