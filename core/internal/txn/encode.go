package txn

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/swarmops/swarmops/core/internal/zblob"
	"github.com/swarmops/swarmops/core/objects"
)

// encode is Encode, with inline blobs in the body when split, in
// compressed groups when that pays (planBody). It is one piece: the
// payload's layout from top to bottom, in the order decode reads it.
func encode(t *Txn, split bool) ([]byte, int) {
	n := 1 + 8 + 10 + 10
	inBody := func(o Obj) bool { return split && !o.Loose && o.Kind == objects.KindBlob }
	var pl bodyPlan
	if split {
		pl = planBody(t.Objs)
	}
	for i, o := range t.Objs {
		t.Objs[i].Stored, t.Objs[i].Inner = 0, 0
		if split && pl.first[i] >= 0 {
			n += 2 + 32 + 20
			continue
		}
		n += 2 + 32 + 10 + len(o.Data)
	}
	n += len(pl.z)
	for _, m := range t.Moves {
		n += 10 + len(m.Name) + 64
	}
	n += 1 + 10 + len(t.Origin.Agent) + 10
	for _, p := range t.Protect {
		n += 10 + len(p.Pattern) + 1
	}
	b := make([]byte, 0, n)
	if len(t.Protect) > 0 {
		b = append(b, VersionProtect)
	} else {
		b = append(b, Version)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(t.Time.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(t.Objs)))
	for i, o := range t.Objs {
		var fl byte
		switch {
		case o.Loose:
			fl = flagLoose
		case inBody(o) && pl.first[i] >= 0:
			fl = flagBodyZ
			f := pl.first[i]
			t.Objs[i].Stored, t.Objs[i].Inner = pl.end[f]-pl.start[f], pl.inner[i]
		case inBody(o):
			fl = flagBody
		}
		b = append(b, byte(o.Kind), fl)
		if fl != 0 {
			b = append(b, o.ID[:]...)
		}
		b = binary.AppendUvarint(b, uint64(o.Size))
		if fl == flagBodyZ {
			// The group's first member carries its frame's length;
			// the others 0.
			stored := 0
			if pl.first[i] == i {
				stored = t.Objs[i].Stored
			}
			b = binary.AppendUvarint(b, uint64(stored))
		}
		if fl == 0 {
			t.Objs[i].Off = len(b)
			b = append(b, o.Data...)
		}
	}
	b = encodeMoves(b, t)
	if !split {
		return b, 0
	}
	head := len(b)
	for i, o := range t.Objs {
		switch f := pl.first[i]; {
		case !inBody(o):
		case f == i:
			t.Objs[i].Off = len(b)
			b = append(b, pl.z[pl.start[i]:pl.end[i]]...)
		case f >= 0:
			t.Objs[i].Off = t.Objs[f].Off
		default:
			t.Objs[i].Off = len(b)
			b = append(b, o.Data...)
		}
	}
	return b, head
}

// bodyPlan is how a split payload's body holds its blobs: first[i] is the
// index of the first member of object i's compressed group, or -1 when
// object i is not in one (not a body blob, or stored as it is); for a
// group's first member f, z[start[f]:end[f]] is the group's zstd frame;
// inner[i] is where member i's bytes start in what the frame decodes to.
type bodyPlan struct {
	first, start, end, inner []int
	z                        []byte
}

// planBody groups the body blobs of objs, in their order, into runs of
// at most zblob.GroupMax bytes, and compresses each run as one frame when
// that pays. A blob bigger than a group is stored as it is, and so is
// every blob of a group whose frame would not be smaller, so a stored
// blob, like a non-body object, never sits inside a group. The groups are
// compressed on up to GOMAXPROCS goroutines: an import's frame spends
// most of its encoding there.
func planBody(objs []Obj) bodyPlan {
	pl := bodyPlan{first: make([]int, len(objs)), start: make([]int, len(objs)), end: make([]int, len(objs)), inner: make([]int, len(objs))}
	var groups [][]int
	var cur []int
	size := 0
	for i, o := range objs {
		pl.first[i] = -1
		if o.Loose || o.Kind != objects.KindBlob {
			continue
		}
		if len(o.Data) > zblob.GroupMax || size+len(o.Data) > zblob.GroupMax {
			if len(cur) > 0 {
				groups = append(groups, cur)
			}
			cur, size = nil, 0
		}
		if len(o.Data) <= zblob.GroupMax {
			pl.inner[i] = size
			cur, size = append(cur, i), size+len(o.Data)
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	frames := make([][]byte, len(groups))
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range min(runtime.GOMAXPROCS(0), len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for g := int(next.Add(1) - 1); g < len(groups); g = int(next.Add(1) - 1) {
				buf = buf[:0]
				for _, i := range groups[g] {
					buf = append(buf, objs[i].Data...)
				}
				if z, ok := zblob.Append(nil, buf); ok {
					frames[g] = z
				}
			}
		}()
	}
	wg.Wait()
	for g, z := range frames {
		if z == nil {
			continue
		}
		f := groups[g][0]
		pl.start[f] = len(pl.z)
		pl.z = append(pl.z, z...)
		pl.end[f] = len(pl.z)
		for _, i := range groups[g] {
			pl.first[i] = f
		}
	}
	return pl
}
