package reflog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/internal/wire"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
)

// decodeChunk decodes the chunk at the start of b, which must cover frames
// at or after next, and returns it with its size (padding included).
func decodeChunk(b []byte, next uint64) (*Chunk, int, error) {
	if len(b) < hdrSize+sumSize || !bytes.Equal(b[0:4], magic[:]) || (b[4] != 1 && b[4] != Version) {
		return nil, 0, errors.New("no chunk header")
	}
	version := b[4]
	bl := uint64(binary.LittleEndian.Uint32(b[8:]))
	if bl > uint64(len(b)-hdrSize-sumSize) {
		return nil, 0, fmt.Errorf("chunk body of %d bytes runs past the end", bl)
	}
	end := hdrSize + int(bl)
	if s := b3.Sum256(b[:end]); !bytes.Equal(s[:], b[end:end+sumSize]) {
		return nil, 0, errors.New("chunk checksum mismatch")
	}
	c := &Chunk{From: binary.LittleEndian.Uint64(b[16:]), To: binary.LittleEndian.Uint64(b[24:])}
	if c.From < next || c.To < c.From {
		return nil, 0, fmt.Errorf("chunk covers frames %d..%d after frame %d", c.From, c.To, next)
	}
	size := (end + sumSize + Align - 1) / Align * Align
	if version != 1 {
		size = (end + sumSize + trailerSize + Align - 1) / Align * Align
		if size > len(b) {
			return nil, 0, fmt.Errorf("chunk of %d bytes runs past the end", size)
		}
		if bytes.IndexFunc(b[end+sumSize:size-trailerSize], func(r rune) bool { return r != 0 }) >= 0 {
			return nil, 0, errors.New("chunk padding is not zeros")
		}
		if tr, ok := readTrailer(b[size-trailerSize : size]); !ok || tr.size != int64(size) || tr.from != c.From || tr.to != c.To {
			return nil, 0, errors.New("chunk trailer does not match its header")
		}
	}
	if pos, err := c.decodeBody(b[hdrSize:end], version); err != nil {
		return nil, 0, fmt.Errorf("chunk body does not parse (at byte %d)", pos)
	}
	return c, size, nil
}

// decodeBody decodes a chunk's body into c, whose From and To are set. It
// is one piece, the body's layout from top to bottom, with one position and
// one way to fail; on failure it returns the position.
func (c *Chunk) decodeBody(body []byte, version byte) (int, error) {
	r := wire.NewReader(body, 0)
	uv, vi, take, limit := r.Uvarint, r.Varint, r.Take, r.Len()
	var agents []string
	if version != 1 {
		n := uv()
		for i := uint64(0); i < n && !r.Bad && i < limit; i++ {
			l := uv()
			if l > refs.MaxAgentLen {
				r.Bad = true
			}
			agents = append(agents, string(take(l)))
		}
	}
	n := uv()
	for i := uint64(0); i < n && !r.Bad && i < limit; i++ {
		name := string(take(uv()))
		if i > 0 && name <= c.Names[i-1] {
			r.Bad = true
		}
		k := uv()
		seq, t := c.From, int64(0)
		var log []refs.Entry
		for j := uint64(0); j < k && !r.Bad && j < limit; j++ {
			var e refs.Entry
			e.Seq = seq + uv()
			switch fl := take(1)[0]; {
			case fl == oldIsPrev && j > 0:
				e.Old = log[j-1].New
			case fl == 0:
				e.Old = objects.ID(take(32))
			default:
				r.Bad = true
			}
			e.New = objects.ID(take(32))
			t += vi()
			e.Time = time.Unix(0, t).UTC()
			if version != 1 {
				e.Op = refs.Op(take(1)[0])
				if a := uv(); a < uint64(len(agents)) {
					e.Agent = agents[a]
				} else {
					r.Bad = true
				}
				if e.Op == refs.OpUndo {
					e.Undoes = uv()
				}
				r.Bad = r.Bad || e.Origin.ValidateStored() != nil
			}
			if e.Seq < c.From || e.Seq >= c.To || (j > 0 && e.Seq <= seq) {
				r.Bad = true
			}
			log = append(log, e)
			seq = e.Seq
		}
		c.Names = append(c.Names, name)
		c.Logs = append(c.Logs, log)
	}
	if !r.Done() {
		return r.Pos, errors.New("bad body")
	}
	return r.Pos, nil
}
