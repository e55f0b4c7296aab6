package index

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/swarmops/swarmops/core/objects"
)

func fanoutCRC(tab byte, bucket uint32, start uint32) uint32 {
	var b [9]byte
	b[0] = tab
	binary.BigEndian.PutUint32(b[1:], bucket)
	binary.BigEndian.PutUint32(b[5:], start)
	return crcSmall(0, b[:])
}

// bucketRange returns the record range [lo, hi) holding keys whose top
// bits fall in buckets [b0, b1], from two checked fanout entries (one read
// when they are adjacent, as for an exact lookup).
func (r *Run) bucketRange(tab byte, b0, b1 uint32, count bool) (uint64, uint64, error) {
	t := &r.h.tables[tab]
	if f := r.fan[tab].Load(); f != nil {
		return uint64((*f)[b0]), uint64((*f)[b1+1]), nil
	}
	if count && r.lookups.Add(1) == preloadAfter {
		if err := r.LoadFanout(); err != nil {
			return 0, 0, err
		}
		f := r.fan[tab].Load()
		return uint64((*f)[b0]), uint64((*f)[b1+1]), nil
	}
	var e [16]byte
	check := func(b uint32, p []byte) (uint64, error) {
		start := binary.BigEndian.Uint32(p[:4])
		off := t.fanoutOff + 8*int64(b)
		if binary.BigEndian.Uint32(p[4:]) != fanoutCRC(tab, b, start) {
			return 0, r.corrupt(off, "fanout entry %d of table %d: checksum mismatch", b, tab)
		}
		if uint64(start) > t.count {
			return 0, r.corrupt(off, "fanout entry %d of table %d points past %d records", b, tab, t.count)
		}
		return uint64(start), nil
	}
	if b1 == b0 {
		if err := r.readAt(e[:16], t.fanoutOff+8*int64(b0)); err != nil {
			return 0, 0, err
		}
	} else {
		if err := r.readAt(e[:8], t.fanoutOff+8*int64(b0)); err != nil {
			return 0, 0, err
		}
		if err := r.readAt(e[8:], t.fanoutOff+8*int64(b1+1)); err != nil {
			return 0, 0, err
		}
	}
	lo, err := check(b0, e[:8])
	if err != nil {
		return 0, 0, err
	}
	hi, err := check(b1+1, e[8:])
	if err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, r.corrupt(t.fanoutOff+8*int64(b1+1), "fanout of table %d decreases", tab)
	}
	return lo, hi, nil
}

// LoadFanout reads and checks every fanout table and filter (one read
// each) and keeps them in memory, so later lookups read only their records,
// and none for a key a filter excludes. A run calls it by itself after
// preloadAfter lookups that read its fanout; a caller that knows a run will
// serve many lookups may call it at once. It is safe to call concurrently.
func (r *Run) LoadFanout() error {
	for tab := byte(0); tab < nTables; tab++ {
		if err := r.loadTable(tab); err != nil {
			return err
		}
	}
	return nil
}

// loadTable loads table tab's fanout and, if it has one, its filter.
func (r *Run) loadTable(tab byte) error {
	if r.fan[tab].Load() == nil {
		t := &r.h.tables[tab]
		nb := uint32(1) << t.bits
		raw := make([]byte, 8*(int64(nb)+1))
		if err := r.readAt(raw, t.fanoutOff); err != nil {
			return err
		}
		f := make([]uint32, nb+1)
		for b := uint32(0); b <= nb; b++ {
			start := binary.BigEndian.Uint32(raw[8*b:])
			off := t.fanoutOff + 8*int64(b)
			if binary.BigEndian.Uint32(raw[8*b+4:]) != fanoutCRC(tab, b, start) {
				return r.corrupt(off, "fanout entry %d of table %d: checksum mismatch", b, tab)
			}
			if uint64(start) > t.count || (b > 0 && start < f[b-1]) || (b == nb && uint64(start) != t.count) {
				return r.corrupt(off, "fanout entry %d of table %d out of range", b, tab)
			}
			f[b] = start
		}
		r.fan[tab].Store(&f)
	}
	if tab < nFiltered {
		if _, err := r.filter(tab); err != nil {
			return err
		}
	}
	return nil
}

// filter returns the checked filter of table tab, reading it on first use;
// nil if the run has none.
func (r *Run) filter(tab byte) ([]byte, error) {
	if f := r.filt[tab].Load(); f != nil {
		return *f, nil
	}
	fl := r.h.filt[tab]
	if fl.blocks == 0 {
		return nil, nil
	}
	f := make([]byte, int64(fl.blocks)*filterBlockSize)
	if err := r.readAt(f, fl.off); err != nil {
		return nil, err
	}
	if filterCRC(tab, f) != fl.crc {
		return nil, r.corrupt(fl.off, "filter of table %d: checksum mismatch", tab)
	}
	r.filt[tab].Store(&f)
	return f, nil
}

// countLookup counts a lookup its filter answered towards the preload of
// the fanouts and filters, as bucketRange counts those that read: a
// long-lived reader whose lookups the filters answer still gets its
// fanouts for the lookups they do not (delta hashes, hits).
func (r *Run) countLookup() error {
	if r.fan[tabCS].Load() == nil && r.lookups.Add(1) == preloadAfter {
		return r.LoadFanout()
	}
	return nil
}

// excludesPrefix reports whether table tab's filter, if loaded, says no key
// of the run starts with p, whose lowest id is low: the filter hashes a
// key's first filterKeyLen bytes, so it can answer for a prefix at least
// that long.
func (r *Run) excludesPrefix(tab byte, p objects.Prefix, low objects.ID) bool {
	return p.Nibbles >= 2*filterKeyLen && r.excludes(tab, low[:])
}

// excludes reports whether table tab's filter, if loaded, says key is not
// in the run.
func (r *Run) excludes(tab byte, key []byte) bool {
	f := r.filt[tab].Load()
	return f != nil && !filterHas(*f, key)
}

// topBits returns the bucket of a key.
func topBits(key []byte, bits uint32) uint32 {
	if bits == 0 {
		return 0
	}
	return binary.BigEndian.Uint32(key[:4]) >> (32 - bits)
}

// readRecs reads records [lo, hi) of a table into buf and checks each one.
func (r *Run) readRecs(tab byte, lo, hi uint64, buf []byte) error {
	rs := uint64(r.h.tables[tab].recSize)
	if err := r.readAt(buf[:(hi-lo)*rs], r.h.tables[tab].off+int64(lo*rs)); err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		if err := r.checkRec(tab, i, buf[(i-lo)*rs:(i-lo+1)*rs]); err != nil {
			return err
		}
	}
	return nil
}

// checkRec checks the checksum and structure of record i of table tab.
func (r *Run) checkRec(tab byte, i uint64, rec []byte) error {
	t := &r.h.tables[tab]
	if !checkRec(tab, i, rec) {
		return r.corrupt(t.off+int64(i*uint64(t.recSize)), "record %d of table %d: checksum mismatch", i, tab)
	}
	var why string
	switch tab {
	case tabCS:
		why = csRecOK(rec)
	case tabObj:
		why = objRecOK(rec)
	}
	if why != "" {
		return r.corrupt(t.off+int64(i*uint64(t.recSize)), "record %d of table %d: %s", i, tab, why)
	}
	return nil
}

// scan visits, in key order, the checked records of table tab whose 32-byte
// key is at least low and whose key's top bits are at most those of high's
// bucket, until visit returns false. It reads the fanout once, binary-searches
// by record reads while the range is larger than one chunk, then reads chunks.
func (r *Run) scan(tab byte, low, high []byte, visit func(i uint64, rec []byte) (bool, error)) error {
	return r.scanWith(tab, low, high, true, visit)
}

// scanWith is scan; lookup says it is a lookup (scan's callers), which
// counts towards the preload of the fanouts and filters (preloadAfter) and
// keeps the block it reads in the cache, rather than a presence check
// (has), which does neither: the ids it checks are mostly new, so their
// blocks would only push others out, and checking a whole block for the
// cache costs more than the few records a search touches.
//
// It is one piece because it is every lookup's path: the narrowing by
// record reads, the block from the cache or the file, and the in-memory
// search share the range and the buffer, and a lookup pays for no more
// than one call.
func (r *Run) scanWith(tab byte, low, high []byte, lookup bool, visit func(i uint64, rec []byte) (bool, error)) error {
	t := &r.h.tables[tab]
	if t.count == 0 {
		return nil
	}
	lo, end, err := r.bucketRange(tab, topBits(low, t.bits), topBits(high, t.bits), lookup)
	if err != nil {
		return err
	}
	hi := end
	rs := uint64(t.recSize)
	// A range of one chunk or less (one bucket of an exact or prefix
	// lookup once the fanout is in memory) is one block of the cache.
	var cached []byte
	var key blockKey
	c := r.cache.Load()
	useCache := lookup && c != nil && hi-lo <= scanChunk
	if useCache {
		key = blockKey{run: r.cacheID.Load(), tab: tab, lo: lo, hi: hi}
		cached, _ = c.get(key)
	}
	bp := getBuf(int(scanChunk * rs))
	defer bufPool.Put(bp)
	buf := *bp
	// Narrow [lo, hi) towards the first key >= low (lower bound) with single
	// record reads until one chunk remains.
	for hi-lo > scanChunk {
		m := lo + (hi-lo)/2
		if err := r.readRecs(tab, m, m+1, buf); err != nil {
			return err
		}
		if bytes.Compare(buf[:32], low) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	// lo is now within one chunk of the first key >= low. Read that chunk
	// and binary-search it in memory, checking only the records the search
	// and the visit touch (a damaged record elsewhere cannot change the
	// answer), then continue chunk by chunk to the end of high's bucket.
	first := true
	for i := lo; i < end; {
		n := min(end-i, scanChunk)
		blk := buf[:n*rs]
		checked := false // every record of blk passed checkRec
		switch {
		case cached != nil: // the whole range, read and checked before
			blk, checked = cached, true
		case useCache: // the whole range: kept, so never the pooled buffer
			blk = make([]byte, n*rs)
			if err := r.readAt(blk, t.off+int64(i*rs)); err != nil {
				return err
			}
			// Only a block whose every record passes is kept; one with a
			// damaged record is used as read, checking what the lookup
			// touches, and read again next time.
			if checked = r.blockOK(tab, i, blk); checked {
				c.put(key, blk)
			}
		default:
			if err := r.readAt(blk, t.off+int64(i*rs)); err != nil {
				return err
			}
		}
		j := uint64(0)
		if first {
			first = false
			a, b := uint64(0), n
			for a < b {
				m := a + (b-a)/2
				rec := blk[m*rs : (m+1)*rs]
				if !checked {
					if err := r.checkRec(tab, i+m, rec); err != nil {
						return err
					}
				}
				if bytes.Compare(rec[:32], low) < 0 {
					a = m + 1
				} else {
					b = m
				}
			}
			j = a
		}
		for ; j < n; j++ {
			rec := blk[j*rs : (j+1)*rs]
			if !checked {
				if err := r.checkRec(tab, i+j, rec); err != nil {
					return err
				}
			}
			more, err := visit(i+j, rec)
			if err != nil || !more {
				return err
			}
		}
		i += n
	}
	return nil
}

// blockOK reports whether every record of blk, records first, first+1, ...
// of table tab, passes checkRec.
func (r *Run) blockOK(tab byte, first uint64, blk []byte) bool {
	rs := uint64(r.h.tables[tab].recSize)
	for j := uint64(0); j < uint64(len(blk))/rs; j++ {
		if r.checkRec(tab, first+j, blk[j*rs:(j+1)*rs]) != nil {
			return false
		}
	}
	return true
}

// heapParents reads the extra parents of a changeset record.
func (r *Run) heapParents(ref uint64, ps []objects.ID) error {
	n := int64(len(ps)) * 32
	if ref > uint64(r.h.heapLen) || n+4 > r.h.heapLen-int64(ref) {
		return r.corrupt(r.h.heapOff, "parent list at heap offset %d outside the heap", ref)
	}
	b := make([]byte, n+4)
	off := r.h.heapOff + int64(ref)
	if err := r.readAt(b, off); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(b[n:]) != heapCRC(ref, b[:n]) {
		return r.corrupt(off, "parent list checksum mismatch")
	}
	for i := range ps {
		copy(ps[i][:], b[32*i:])
	}
	return nil
}

func heapCRC(ref uint64, b []byte) uint32 {
	var pre [8]byte
	binary.BigEndian.PutUint64(pre[:], ref)
	return crc32.Update(crcSmall(0, pre[:]), castagnoli, b)
}
