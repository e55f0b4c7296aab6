package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"
	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

const (
	runMagic    = "SWOIDX\x00\x01"
	runVersion  = 1
	headerSize  = 256
	headerCRCAt = headerSize - 4
	// maxFanoutBits bounds the fanout table (2^24 entries, 128 MiB) so a
	// corrupt header cannot ask for more.
	maxFanoutBits = 24
	// scanChunk is how many records one ReadAt fetches when scanning.
	scanChunk = 256
)

// table describes one sorted table of a run.
type table struct {
	off       int64  // first record
	count     uint64 // records
	fanoutOff int64  // 2^bits+1 fanout entries of 8 bytes
	bits      uint32 // fanout bits: records are bucketed by the key's top bits
	recSize   uint32
}

// header is the fixed first 256 bytes of a run.
type header struct {
	meta     uint64
	tables   [nTables]table
	heapOff  int64
	heapLen  int64
	fileSize int64
	bodyHash [32]byte
	// filt locates the filters of the changeset and object tables (see
	// filter.go); blocks 0 means none (a run written before filters).
	filt       [nFiltered]filterLoc
	filtScheme uint8 // how the filters hash keys (filterScheme)
}

// nFiltered is the number of tables with a filter: the changeset and the
// object table, whose keys lookups probe for presence.
const nFiltered = 2

type filterLoc struct {
	off    int64
	blocks uint32
	crc    uint32
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, runMagic)
	binary.BigEndian.PutUint32(b[8:], runVersion)
	binary.BigEndian.PutUint64(b[16:], h.meta)
	for i, t := range h.tables {
		p := b[24+32*i:]
		binary.BigEndian.PutUint64(p[0:], uint64(t.off))
		binary.BigEndian.PutUint64(p[8:], t.count)
		binary.BigEndian.PutUint64(p[16:], uint64(t.fanoutOff))
		binary.BigEndian.PutUint32(p[24:], t.bits)
		binary.BigEndian.PutUint32(p[28:], t.recSize)
	}
	binary.BigEndian.PutUint64(b[120:], uint64(h.heapOff))
	binary.BigEndian.PutUint64(b[128:], uint64(h.heapLen))
	binary.BigEndian.PutUint64(b[136:], uint64(h.fileSize))
	copy(b[144:176], h.bodyHash[:])
	for i, f := range h.filt {
		p := b[176+16*i:]
		binary.BigEndian.PutUint64(p[0:], uint64(f.off))
		binary.BigEndian.PutUint32(p[8:], f.blocks)
		binary.BigEndian.PutUint32(p[12:], f.crc)
	}
	b[208] = h.filtScheme
	binary.BigEndian.PutUint32(b[headerCRCAt:], crc32.Checksum(b[:headerCRCAt], castagnoli))
	return b
}

// decodeHeader parses and checks a header: checksum, magic, version, and
// that every section lies inside the file and the sections do not overlap
// the header, so no later read can be steered outside the file.
func decodeHeader(b []byte, size int64) (*header, string, int64) {
	if crc32.Checksum(b[:headerCRCAt], castagnoli) != binary.BigEndian.Uint32(b[headerCRCAt:]) {
		return nil, "header checksum mismatch", headerCRCAt
	}
	if string(b[:8]) != runMagic {
		return nil, "bad magic", 0
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != runVersion {
		return nil, fmt.Sprintf("version %d, want %d", v, runVersion), 8
	}
	h := &header{meta: binary.BigEndian.Uint64(b[16:])}
	h.heapOff = int64(binary.BigEndian.Uint64(b[120:]))
	h.heapLen = int64(binary.BigEndian.Uint64(b[128:]))
	h.fileSize = int64(binary.BigEndian.Uint64(b[136:]))
	copy(h.bodyHash[:], b[144:176])
	if h.fileSize != size {
		return nil, fmt.Sprintf("file is %d bytes, header says %d", size, h.fileSize), 136
	}
	inside := func(off, n int64) bool { return off >= headerSize && n >= 0 && off <= size && n <= size-off }
	for i := range h.tables {
		p := b[24+32*i:]
		t := table{
			off:       int64(binary.BigEndian.Uint64(p[0:])),
			count:     binary.BigEndian.Uint64(p[8:]),
			fanoutOff: int64(binary.BigEndian.Uint64(p[16:])),
			bits:      binary.BigEndian.Uint32(p[24:]),
			recSize:   binary.BigEndian.Uint32(p[28:]),
		}
		at := int64(24 + 32*i)
		if t.recSize != uint32(recSizes[i]) {
			return nil, fmt.Sprintf("table %d record size %d, want %d", i, t.recSize, recSizes[i]), at + 28
		}
		if t.bits > maxFanoutBits {
			return nil, fmt.Sprintf("table %d fanout bits %d", i, t.bits), at + 24
		}
		if t.count > uint64(size) || !inside(t.off, int64(t.count)*int64(t.recSize)) {
			return nil, fmt.Sprintf("table %d (%d records at %d) outside the file", i, t.count, t.off), at
		}
		if !inside(t.fanoutOff, 8*(int64(1)<<t.bits+1)) {
			return nil, fmt.Sprintf("table %d fanout at %d outside the file", i, t.fanoutOff), at + 16
		}
		h.tables[i] = t
	}
	if !inside(h.heapOff, h.heapLen) {
		return nil, "heap outside the file", 120
	}
	for i := range h.filt {
		p := b[176+16*i:]
		f := filterLoc{off: int64(binary.BigEndian.Uint64(p[0:])), blocks: binary.BigEndian.Uint32(p[8:]), crc: binary.BigEndian.Uint32(p[12:])}
		if f.blocks > maxFilterBlocks || (f.blocks > 0 && !inside(f.off, int64(f.blocks)*filterBlockSize)) {
			return nil, fmt.Sprintf("table %d filter (%d blocks at %d) outside the file", i, f.blocks, f.off), int64(176 + 16*i)
		}
		h.filt[i] = f
	}
	// Filters hashed some other way than this reader's (or a run written
	// before filters: scheme 0) are not used; lookups read the tables.
	if h.filtScheme = b[208]; h.filtScheme != filterScheme {
		h.filt = [nFiltered]filterLoc{}
	}
	if h.tables[tabDelta].count != h.tables[tabCS].count {
		return nil, "delta table and changeset table differ in size", 24 + 32*tabDelta + 8
	}
	return h, "", 0
}

// Run is an open, immutable index run file. It is safe for concurrent use:
// it holds no mutable state besides the file, and reads use ReadAt, which
// io.ReaderAt requires to be safe for parallel calls.
type Run struct {
	name string
	f    afero.File
	h    *header

	// fan caches each table's checked fanout once the run has served
	// preloadAfter lookups, saving one read per lookup for long-lived
	// readers while keeping open + first lookup at one small read.
	fan     [nTables]atomic.Pointer[[]uint32]
	lookups atomic.Int64
	// checks counts the presence checks (has) of each filtered table made
	// without its filter.
	checks [nFiltered]atomic.Int64
	// filt holds the checked filters of the changeset and object tables,
	// loaded with the fanouts or by presence checks (has); a lookup of a
	// key they exclude reads nothing.
	filt [nFiltered]atomic.Pointer[[]byte]

	// cache, when set (SetCache), keeps the blocks lookups read; cacheID
	// names this run in it.
	cache   atomic.Pointer[BlockCache]
	cacheID atomic.Uint64
}

// preloadAfter is the number of lookups after which a run loads its fanouts
// (about 4 bytes per 16 to 32 records) and filters (1.5 bytes a record)
// into memory.
const preloadAfter = 32

// OpenRun opens the run file at path and checks its header (one read of
// 256 bytes and one Stat). Records are checked as lookups touch them; the
// whole file is checked by Verify. A damaged header is a *CorruptError.
func OpenRun(fsys vfs.FS, path string) (*Run, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("index: open run: %w", err)
	}
	r, err := openRunFile(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func openRunFile(f afero.File, path string) (*Run, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("index: stat run %q: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, &CorruptError{File: path, Reason: "not a regular file"}
	}
	if st.Size() < headerSize {
		return nil, &CorruptError{File: path, Offset: st.Size(), Reason: fmt.Sprintf("file of %d bytes is shorter than the header", st.Size())}
	}
	b := make([]byte, headerSize)
	if err := vfs.ReadFull(f, b, 0); err != nil {
		return nil, fmt.Errorf("index: read run header %q: %w", path, err)
	}
	h, reason, off := decodeHeader(b, st.Size())
	if h == nil {
		return nil, &CorruptError{File: path, Offset: off, Reason: reason}
	}
	return &Run{name: path, f: f, h: h}, nil
}

// Name returns the path the run was opened or written at.
func (r *Run) Name() string { return r.name }

// Meta returns the caller's value stored when the run was written (for
// example the journal sequence number the run covers).
func (r *Run) Meta() uint64 { return r.h.meta }

// Changesets returns the number of changeset records in the run.
func (r *Run) Changesets() uint64 { return r.h.tables[tabCS].count }

// Objects returns the number of blob and tree records in the run.
func (r *Run) Objects() uint64 { return r.h.tables[tabObj].count }

// Size returns the file size in bytes.
func (r *Run) Size() int64 { return r.h.fileSize }

// Close closes the file. Views that still hold the run must not be used
// afterwards.
func (r *Run) Close() error { return r.f.Close() }

func (r *Run) corrupt(off int64, format string, args ...any) error {
	return &CorruptError{File: r.name, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func (r *Run) readAt(p []byte, off int64) error {
	if err := vfs.ReadFull(r.f, p, off); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return r.corrupt(off, "short read of %d bytes", len(p))
		}
		return fmt.Errorf("index: read %q at offset %d: %w", r.name, off, err)
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, scanChunk*csRecSize); return &b }}

func getBuf(n int) *[]byte {
	bp := bufPool.Get().(*[]byte)
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	*bp = (*bp)[:n]
	return bp
}

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

func (r *Run) csFromRec(rec []byte) (CSRecord, error) {
	var c CSRecord
	extra, ref := decodeCS(rec, &c)
	if extra > 0 {
		if err := r.heapParents(ref, c.Parents[1:]); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Changeset looks up a changeset record by id.
func (r *Run) Changeset(id objects.ID) (CSRecord, bool, error) {
	var out CSRecord
	found := false
	if r.excludes(tabCS, id[:]) {
		return out, false, r.countLookup()
	}
	err := r.scan(tabCS, id[:], id[:], func(_ uint64, rec []byte) (bool, error) {
		if bytes.Equal(rec[:32], id[:]) {
			c, err := r.csFromRec(rec)
			out, found = c, err == nil
			return false, err
		}
		return false, nil
	})
	return out, found, err
}

// Object looks up a blob or tree record by id.
func (r *Run) Object(id objects.ID) (ObjRecord, bool, error) {
	var out ObjRecord
	found := false
	if r.excludes(tabObj, id[:]) {
		return out, false, r.countLookup()
	}
	err := r.scan(tabObj, id[:], id[:], func(_ uint64, rec []byte) (bool, error) {
		if bytes.Equal(rec[:32], id[:]) {
			out, found = decodeObj(rec), true
		}
		return false, nil
	})
	return out, found, err
}

// HasChangeset reports whether the run holds a changeset record with this
// id. It is for a caller that checks ids it expects to be absent (replay's
// and a writer's duplicate checks): it does not count towards the preload
// of every fanout and filter, whose size, at a million records, costs more
// than a few hundred such checks. It loads the changeset filter alone once
// its checks have paid for it (see has), or at once when told that enough
// are coming (ExpectChangesetChecks).
func (r *Run) HasChangeset(id objects.ID) (bool, error) {
	return r.has(tabCS, id)
}

// HasObject is HasChangeset for blobs and trees (a checkpoint's duplicate
// check).
func (r *Run) HasObject(id objects.ID) (bool, error) {
	return r.has(tabObj, id)
}

func (r *Run) has(tab byte, id objects.ID) (bool, error) {
	// Without its filter in memory a check costs two small reads. The
	// filter is loaded once the checks made without it have cost about as
	// much as loading it (FilterBytesPerCheck bytes a check), so a process
	// never pays more than about twice what knowing its future would
	// have cost, whether it makes ten checks or ten million.
	if fl := r.h.filt[tab]; fl.blocks > 0 && r.filt[tab].Load() == nil {
		if r.checks[tab].Add(1)*FilterBytesPerCheck >= int64(fl.blocks)*filterBlockSize {
			if _, err := r.filter(tab); err != nil {
				return false, err
			}
		}
	}
	if r.excludes(tab, id[:]) {
		return false, nil
	}
	found := false
	err := r.scanWith(tab, id[:], id[:], false, func(_ uint64, rec []byte) (bool, error) {
		found = bytes.Equal(rec[:32], id[:])
		return false, nil
	})
	return found, err
}

// FilterBytesPerCheck weighs a filter's load against the presence checks
// it saves: a check without it is two small reads of the run, about as
// costly as reading and checksumming 2 KiB of filter (at 1M changesets on
// the reference machine a pread cost about 10 us, and a run's 1 MiB
// changeset filter took 5.2 ms to read and check).
const FilterBytesPerCheck = 2048

// ExpectChangesetChecks tells the run that about n presence checks of
// changesets are coming (a replay of n frames): it loads the changeset
// filter now if they would cost more than loading it, saving the checks
// has would make before it loads the filter by itself.
func (r *Run) ExpectChangesetChecks(n int) error { return r.expect(tabCS, n) }

// ExpectObjectChecks is ExpectChangesetChecks for blobs and trees (a
// checkpoint's batch).
func (r *Run) ExpectObjectChecks(n int) error { return r.expect(tabObj, n) }

func (r *Run) expect(tab byte, n int) error {
	if int64(n)*FilterBytesPerCheck < int64(r.h.filt[tab].blocks)*filterBlockSize {
		return nil
	}
	_, err := r.filter(tab)
	return err
}

// prefixBounds returns the lowest id with prefix p and an id in the
// bucket of the highest one.
func prefixBounds(p objects.Prefix) (low, high objects.ID) {
	low = p.Low()
	high = low
	if p.Nibbles < 8 {
		// The bucket of the last id with the prefix: set the remaining bits
		// of the first four bytes.
		v := binary.BigEndian.Uint32(low[:4]) | (1<<(32-4*p.Nibbles) - 1)
		binary.BigEndian.PutUint32(high[:4], v)
	}
	return low, high
}

// ChangesetPrefix calls visit, in id order, with the id and generation of
// every changeset record whose id starts with p, until visit returns false.
// It reads only the changeset table (not the object table, not the parent
// heap): what a caller resolving a changeset revision needs.
func (r *Run) ChangesetPrefix(p objects.Prefix, visit func(id objects.ID, generation uint64) bool) error {
	low, high := prefixBounds(p)
	if r.excludesPrefix(tabCS, p, low) {
		return r.countLookup()
	}
	return r.scan(tabCS, low[:], high[:], func(_ uint64, rec []byte) (bool, error) {
		var id objects.ID
		copy(id[:], rec[:32])
		if !p.Match(id) {
			return false, nil
		}
		return visit(id, binary.BigEndian.Uint64(rec[96:])), nil
	})
}

// prefix appends to out the records of either table whose ids start with
// p, at most max of each.
func (r *Run) prefix(p objects.Prefix, max int, out []Match) ([]Match, error) {
	low, high := prefixBounds(p)
	for _, tab := range []byte{tabCS, tabObj} {
		if r.excludesPrefix(tab, p, low) {
			if err := r.countLookup(); err != nil {
				return out, err
			}
			continue
		}
		n := 0
		err := r.scan(tab, low[:], high[:], func(_ uint64, rec []byte) (bool, error) {
			var id objects.ID
			copy(id[:], rec[:32])
			if !p.Match(id) {
				return false, nil
			}
			k := objects.KindChangeset
			if tab == tabObj {
				k = objects.Kind(rec[32])
			}
			out = append(out, Match{ID: id, Kind: k})
			n++
			return n < max, nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// byDelta appends the ids of changesets with delta hash h.
func (r *Run) byDelta(h objects.Hash, out []objects.ID) ([]objects.ID, error) {
	err := r.scan(tabDelta, h[:], h[:], func(_ uint64, rec []byte) (bool, error) {
		if !bytes.Equal(rec[:32], h[:]) {
			return false, nil
		}
		var id objects.ID
		copy(id[:], rec[32:64])
		out = append(out, id)
		return true, nil
	})
	return out, err
}

// ByDelta returns the ids of the run's changesets with delta hash h, sorted.
func (r *Run) ByDelta(h objects.Hash) ([]objects.ID, error) { return r.byDelta(h, nil) }

// Prefix returns up to max ids of the run (changesets first, then objects)
// starting with p.
func (r *Run) Prefix(p objects.Prefix, max int) ([]Match, error) { return r.prefix(p, max, nil) }

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
