package index

import (
	"bytes"
	"encoding/binary"

	"lukechampine.com/blake3"
)

// iterTable calls visit for every checked record of a table in order,
// reading scanChunk records per ReadAt and checking that keys ascend.
func (r *Run) iterTable(tab byte, visit func(rec []byte) error) error {
	t := &r.h.tables[tab]
	rs := uint64(t.recSize)
	bp := getBuf(int(scanChunk * rs))
	defer bufPool.Put(bp)
	buf := *bp
	var prev []byte
	keyLen := 32
	if tab == tabDelta {
		keyLen = 64
	}
	prevBuf := make([]byte, keyLen)
	for i := uint64(0); i < t.count; {
		n := min(t.count-i, scanChunk)
		if err := r.readRecs(tab, i, i+n, buf); err != nil {
			return err
		}
		for j := uint64(0); j < n; j++ {
			rec := buf[j*rs : (j+1)*rs]
			if prev != nil && bytes.Compare(prev, rec[:keyLen]) >= 0 {
				return r.corrupt(t.off+int64((i+j)*rs), "record %d of table %d out of order", i+j, tab)
			}
			if err := visit(rec); err != nil {
				return err
			}
			copy(prevBuf, rec[:keyLen])
			prev = prevBuf
		}
		i += n
	}
	return nil
}

// Verify reads the whole run and checks the body hash, every record's
// checksum and structure, key order, the fanout tables and the parent heap.
// It returns the first problem as a *CorruptError.
func (r *Run) Verify() error {
	h := blake3.New(32, nil)
	buf := make([]byte, min(1<<20, r.h.fileSize))
	for off := int64(headerSize); off < r.h.fileSize; {
		n := min(int64(len(buf)), r.h.fileSize-off)
		if err := r.readAt(buf[:n], off); err != nil {
			return err
		}
		h.Write(buf[:n])
		off += n
	}
	if !bytes.Equal(h.Sum(nil), r.h.bodyHash[:]) {
		return r.corrupt(headerSize, "body hash mismatch (the file changed after it was written)")
	}
	for tab := byte(0); tab < nTables; tab++ {
		t := &r.h.tables[tab]
		nb := uint32(1) << t.bits
		counts := make([]uint32, nb)
		// A filter must pass every key of its table: one that excludes a
		// key the run holds would hide it from lookups.
		var filt []byte
		if tab < nFiltered {
			f, err := r.filter(tab)
			if err != nil {
				return err
			}
			filt = f
		}
		err := r.iterTable(tab, func(rec []byte) error {
			if tab == tabCS {
				if _, err := r.csFromRec(rec); err != nil {
					return err
				}
			}
			if filt != nil && !filterHas(filt, rec[:32]) {
				return r.corrupt(r.h.filt[tab].off, "filter of table %d excludes a key of the table", tab)
			}
			counts[topBits(rec[:32], t.bits)]++
			return nil
		})
		if err != nil {
			return err
		}
		// Fanout entry b must be the number of records in buckets below b.
		fan := make([]byte, 8*(int64(nb)+1))
		if err := r.readAt(fan, t.fanoutOff); err != nil {
			return err
		}
		var want uint32
		for b := uint32(0); b <= nb; b++ {
			e := fan[8*b:]
			start := binary.BigEndian.Uint32(e)
			off := t.fanoutOff + 8*int64(b)
			if binary.BigEndian.Uint32(e[4:]) != fanoutCRC(tab, b, start) {
				return r.corrupt(off, "fanout entry %d of table %d: checksum mismatch", b, tab)
			}
			if start != want {
				return r.corrupt(off, "fanout entry %d of table %d is %d, want %d", b, tab, start, want)
			}
			if b < nb {
				want += counts[b]
			}
		}
	}
	return nil
}
