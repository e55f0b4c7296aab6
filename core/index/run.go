package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

const (
	runMagic = "SWOIDX\x00\x01"
	// runVersion is the version this build writes: 64-byte object
	// records, which can place a blob in a compressed group (flagZ). A
	// build that predates them refuses such a run at open ("version 2,
	// want 1"). Version 1 runs (56-byte object records, no groups) are
	// read as they are.
	runVersion   = 2
	runVersionV1 = 1
	headerSize   = 256
	headerCRCAt  = headerSize - 4
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
	version  uint32 // runVersion, or runVersionV1 (read only)
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
	v := binary.BigEndian.Uint32(b[8:])
	if v != runVersion && v != runVersionV1 {
		return nil, fmt.Sprintf("version %d, want %d or %d", v, runVersion, runVersionV1), 8
	}
	h := &header{version: v, meta: binary.BigEndian.Uint64(b[16:])}
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
		want := recSizes[i]
		if i == tabObj && v == runVersionV1 {
			want = objRecSizeV1
		}
		if t.recSize != uint32(want) {
			return nil, fmt.Sprintf("table %d record size %d, want %d", i, t.recSize, want), at + 28
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
