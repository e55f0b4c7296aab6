package index

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path"
	"slices"
	"sync"

	"github.com/spf13/afero"
	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// iter is a pull iterator over sorted, unique records.
type iter[T any] func() (T, bool, error)

func sliceIter[T any](s []T) iter[T] {
	return func() (T, bool, error) {
		var zero T
		if len(s) == 0 {
			return zero, false, nil
		}
		v := s[0]
		s = s[1:]
		return v, true, nil
	}
}

// mergeIters merges sorted iterators. Of records with equal keys it keeps
// the one from the earliest iterator (callers order sources newest first),
// so the output is sorted and unique.
func mergeIters[T any](its []iter[T], cmp func(a, b T) int) iter[T] {
	type head struct {
		v  T
		ok bool
	}
	heads := make([]head, len(its))
	started := false
	return func() (T, bool, error) {
		var zero T
		if !started {
			started = true
			for i, it := range its {
				v, ok, err := it()
				if err != nil {
					return zero, false, err
				}
				heads[i] = head{v, ok}
			}
		}
		best := -1
		for i := range heads {
			if heads[i].ok && (best < 0 || cmp(heads[i].v, heads[best].v) < 0) {
				best = i
			}
		}
		if best < 0 {
			return zero, false, nil
		}
		out := heads[best].v
		for i := range heads {
			for heads[i].ok && cmp(heads[i].v, out) == 0 {
				v, ok, err := its[i]()
				if err != nil {
					return zero, false, err
				}
				heads[i] = head{v, ok}
			}
		}
		return out, true, nil
	}
}

func cmpCS(a, b CSRecord) int   { return cmpID(a.ID, b.ID) }
func cmpObj(a, b ObjRecord) int { return cmpID(a.ID, b.ID) }

// fanoutBits picks the fanout size for about 16 to 32 records per bucket, so
// a lookup reads two fanout entries and one small run of records.
func fanoutBits(n uint64) uint32 {
	if n < 32 {
		return 0
	}
	return uint32(min(bits.Len64(n/16)-1, maxFanoutBits))
}

// runBufSize is the write buffer of a run file. 64 KiB writes cost the
// page cache copy as larger ones do; a 1 MiB buffer, which the pool loses
// at every other garbage collection, was 256 fresh pages to fault in for
// each checkpoint, most of the page faults a writer made (13 us each on
// a test VM).
const runBufSize = 64 << 10

// runBufs reuses the write buffers of writeIters: a checkpoint writes a
// run, often a small one, and a fresh buffer per run was most of the
// allocation (and the zeroing) of a checkpoint. The buffer size, and so the
// sequence of writes a run file gets, is the same as without the pool.
var runBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, runBufSize) }}

// runWriter streams a run file: placeholder header, then the tables with
// their fanouts, then the heap, then the real header at offset 0.
type runWriter struct {
	f    afero.File
	name string
	bw   *bufio.Writer
	hash *blake3.Hasher
	off  int64
	h    header
	heap []byte
	rec  []byte
	filt [nFiltered][]byte // built as the tables are written
}

func (w *runWriter) write(p []byte) error {
	if _, err := w.bw.Write(p); err != nil {
		return fmt.Errorf("index: write run %q at offset %d: %w", w.name, w.off, err)
	}
	w.hash.Write(p)
	w.off += int64(len(p))
	return nil
}

// rows is a table's fill drawn from it: each record it yields is encoded
// into rec by enc, until it ends or either of them fails.
func rows[T any](it iter[T], enc func(rec []byte, v *T) error) func(rec []byte) (bool, error) {
	return func(rec []byte) (bool, error) {
		v, ok, err := it()
		if !ok || err != nil {
			return false, err
		}
		return true, enc(rec, &v)
	}
}

// table writes one table from fill, which encodes the next record into rec
// (without its checksum) and reports whether there was one. keyLen bytes at
// the start of each record must strictly ascend.
func (w *runWriter) table(tab byte, capHint uint64, keyLen int, fill func(rec []byte) (bool, error)) error {
	t := &w.h.tables[tab]
	t.recSize = uint32(recSizes[tab])
	t.bits = fanoutBits(capHint)
	t.off = w.off
	counts := make([]uint32, 1<<t.bits)
	var filt []byte
	if tab < nFiltered {
		// Sized from the bound, so a merge whose inputs share ids gets a
		// sparser filter, never a fuller one.
		filt = make([]byte, int64(filterBlocks(capHint))*filterBlockSize)
		w.filt[tab] = filt
	}
	rec := make([]byte, t.recSize)
	prev := make([]byte, keyLen)
	for i := uint64(0); ; i++ {
		ok, err := fill(rec)
		if err != nil {
			return err
		}
		if !ok {
			t.count = i
			break
		}
		if i > 0 && bytes.Compare(prev, rec[:keyLen]) >= 0 {
			return fmt.Errorf("index: write run %q: table %d record %d not in ascending order", w.name, tab, i)
		}
		if i >= 1<<32-1 {
			return fmt.Errorf("index: write run %q: table %d has too many records", w.name, tab)
		}
		copy(prev, rec[:keyLen])
		counts[topBits(rec, t.bits)]++
		if filt != nil {
			if len(filt) == 0 {
				return fmt.Errorf("index: write run %q: table %d has more records than its bound %d", w.name, tab, capHint)
			}
			filterAdd(filt, rec[:keyLen])
		}
		sealRec(tab, i, rec)
		if err := w.write(rec); err != nil {
			return err
		}
	}
	t.fanoutOff = w.off
	var e [8]byte
	var start uint32
	for b := uint32(0); b <= uint32(len(counts)); b++ {
		binary.BigEndian.PutUint32(e[:4], start)
		binary.BigEndian.PutUint32(e[4:], fanoutCRC(tab, b, start))
		if err := w.write(e[:]); err != nil {
			return err
		}
		if b < uint32(len(counts)) {
			start += counts[b]
		}
	}
	return nil
}

// writeIters writes a run from sorted unique iterators. csCap and objCap
// are upper bounds on the record counts, used to size the fanouts.
//
// It is one piece because the file is written in one pass, in the order
// of the format (tables, fanouts, heap, filters, then the header at 0),
// and every section's offset, count and checksum feeds the header.
func writeIters(fsys vfs.FS, dst string, meta uint64, csCap, objCap uint64,
	cs iter[CSRecord], obj iter[ObjRecord], dl iter[deltaRec]) (run *Run, err error) {
	tmp := dst + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("index: create run %q: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			fsys.Remove(tmp)
		}
	}()
	bw := runBufs.Get().(*bufio.Writer)
	bw.Reset(f)
	defer func() {
		bw.Reset(nil) // drop f; a failed writer's error must not reach the next run
		runBufs.Put(bw)
	}()
	w := &runWriter{f: f, name: tmp, bw: bw, hash: blake3.New(32, nil)}
	w.h.meta = meta
	if _, err := w.bw.Write(make([]byte, headerSize)); err != nil {
		return nil, fmt.Errorf("index: write run %q: %w", tmp, err)
	}
	w.off = headerSize
	err = w.table(tabCS, csCap, 32, rows(cs, func(rec []byte, c *CSRecord) error {
		if err := validCS(c); err != nil {
			return err
		}
		var ref uint64
		if len(c.Parents) > 1 {
			ref = uint64(len(w.heap))
			start := len(w.heap)
			for _, p := range c.Parents[1:] {
				w.heap = append(w.heap, p[:]...)
			}
			w.heap = binary.BigEndian.AppendUint32(w.heap, heapCRC(ref, w.heap[start:]))
		}
		encodeCS(rec, c, ref)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	err = w.table(tabObj, objCap, 32, rows(obj, func(rec []byte, o *ObjRecord) error {
		if err := validObj(o); err != nil {
			return err
		}
		encodeObj(rec, o)
		return nil
	}))
	if err != nil {
		return nil, err
	}
	err = w.table(tabDelta, csCap, 64, rows(dl, func(rec []byte, d *deltaRec) error {
		clear(rec)
		copy(rec[:32], d.Delta[:])
		copy(rec[32:64], d.ID[:])
		return nil
	}))
	if err != nil {
		return nil, err
	}
	if w.h.tables[tabDelta].count != w.h.tables[tabCS].count {
		return nil, fmt.Errorf("index: write run %q: %d delta rows for %d changesets", tmp, w.h.tables[tabDelta].count, w.h.tables[tabCS].count)
	}
	w.h.heapOff = w.off
	w.h.heapLen = int64(len(w.heap))
	if err := w.write(w.heap); err != nil {
		return nil, err
	}
	w.h.filtScheme = filterScheme
	for tab, f := range w.filt {
		w.h.filt[tab] = filterLoc{off: w.off, blocks: uint32(len(f) / filterBlockSize), crc: filterCRC(byte(tab), f)}
		if err := w.write(f); err != nil {
			return nil, err
		}
	}
	w.h.fileSize = w.off
	copy(w.h.bodyHash[:], w.hash.Sum(nil))
	if err := w.bw.Flush(); err != nil {
		return nil, fmt.Errorf("index: write run %q: %w", tmp, err)
	}
	if _, err := f.WriteAt(w.h.encode(), 0); err != nil {
		return nil, fmt.Errorf("index: write run header %q: %w", tmp, err)
	}
	// One data sync makes the contents and the size durable before the
	// rename can expose the name.
	if err := vfs.Datasync(f); err != nil {
		return nil, fmt.Errorf("index: datasync run %q: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("index: close run %q: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, dst); err != nil {
		return nil, fmt.Errorf("index: rename run %q: %w", dst, err)
	}
	if err := fsys.SyncDir(path.Dir(dst)); err != nil {
		// The run exists under its final name but may not survive a power
		// loss; the caller must not reference it from a checkpoint.
		return nil, fmt.Errorf("index: sync directory of run %q: %w", dst, err)
	}
	return OpenRun(fsys, dst)
}

// WriteRun writes the records of b as a new run file at dst and returns it
// open. It sorts and deduplicates copies of the records (of duplicates the
// first wins) and is the complete durability protocol: it writes dst+".tmp",
// datasyncs it, renames it to dst (replacing any file there) and syncs dst's
// directory. When it returns nil the run is durable under its name; on error
// the temp file has been removed (best effort) and dst must not be used.
// dst should be a fresh name: readers may hold the old file open. meta is
// stored in the header for the caller (see Run.Meta).
func WriteRun(fsys vfs.FS, dst string, meta uint64, b Batch) (*Run, error) {
	cs := sortedCS(b.Changesets)
	obj := sortedObj(b.Objects)
	return writeIters(fsys, dst, meta, uint64(len(cs)), uint64(len(obj)),
		sliceIter(cs), sliceIter(obj), sliceIter(deltaRows(cs)))
}

// sortedUnique returns the records of in sorted by id, keeping the first of
// each id. It sorts positions rather than the records (pdqsort over 4-byte
// indices with the position as tie-break: stable without a stable sort's
// costly rotations of large records).
func sortedUnique[T any](in []T, id func(*T) *objects.ID) []T {
	idx := make([]int32, len(in))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := bytes.Compare(id(&in[a])[:], id(&in[b])[:]); c != 0 {
			return c
		}
		return int(a) - int(b)
	})
	out := make([]T, 0, len(in))
	for k, i := range idx {
		if k > 0 && *id(&in[i]) == *id(&in[idx[k-1]]) {
			continue
		}
		out = append(out, in[i])
	}
	return out
}

func sortedCS(in []CSRecord) []CSRecord {
	return sortedUnique(in, func(r *CSRecord) *objects.ID { return &r.ID })
}

func sortedObj(in []ObjRecord) []ObjRecord {
	return sortedUnique(in, func(r *ObjRecord) *objects.ID { return &r.ID })
}

func deltaRows(cs []CSRecord) []deltaRec {
	d := make([]deltaRec, len(cs))
	for i, c := range cs {
		d[i] = deltaRec{Delta: c.Delta, ID: c.ID}
	}
	slices.SortFunc(d, cmpDelta)
	return d
}

// MergeRuns writes one run at dst holding the union of runs (a k-way merge
// that streams every table, so memory stays small whatever the run sizes),
// with the same durability protocol as WriteRun. runs are ordered newest
// first: of two records with the same id, the newer run's wins. The inputs
// are left open and untouched; the caller retires them once the merged run
// is referenced from a durable checkpoint.
func MergeRuns(fsys vfs.FS, dst string, meta uint64, runs []*Run) (*Run, error) {
	var csCap, objCap uint64
	var cs []iter[CSRecord]
	var obj []iter[ObjRecord]
	var dl []iter[deltaRec]
	for _, r := range runs {
		csCap += r.Changesets()
		objCap += r.Objects()
		cs = append(cs, r.csIter())
		obj = append(obj, r.objIter())
		dl = append(dl, r.deltaIter())
	}
	return writeIters(fsys, dst, meta, csCap, objCap,
		mergeIters(cs, cmpCS), mergeIters(obj, cmpObj), mergeIters(dl, cmpDelta))
}

// cursor reads a table sequentially, scanChunk checked records at a time.
type cursor struct {
	r    *Run
	tab  byte
	i, n uint64 // next record, records in buf
	base uint64 // index of buf's first record
	buf  []byte
	prev []byte
}

// cursor returns a cursor over table tab. Its buffer holds one chunk, or
// the whole table when that is smaller (a merge opens three cursors per run,
// and most runs a checkpoint merges are far smaller than a chunk); the reads
// are the same either way.
func (r *Run) cursor(tab byte) *cursor {
	n := min(r.h.tables[tab].count, scanChunk)
	return &cursor{r: r, tab: tab, buf: make([]byte, n*uint64(r.h.tables[tab].recSize))}
}

// next returns the next record (valid until the following call), checking
// its checksum and that keys strictly ascend.
func (c *cursor) next() ([]byte, bool, error) {
	t := &c.r.h.tables[c.tab]
	if c.i >= t.count {
		return nil, false, nil
	}
	if c.i >= c.base+c.n {
		c.base = c.i
		c.n = min(t.count-c.i, scanChunk)
		if err := c.r.readRecs(c.tab, c.i, c.i+c.n, c.buf); err != nil {
			return nil, false, err
		}
	}
	rs := uint64(t.recSize)
	rec := c.buf[(c.i-c.base)*rs : (c.i-c.base+1)*rs]
	keyLen := 32
	if c.tab == tabDelta {
		keyLen = 64
	}
	if c.prev != nil && bytes.Compare(c.prev, rec[:keyLen]) >= 0 {
		return nil, false, c.r.corrupt(t.off+int64(c.i*rs), "record %d of table %d out of order", c.i, c.tab)
	}
	c.prev = append(c.prev[:0], rec[:keyLen]...)
	c.i++
	return rec, true, nil
}

func (r *Run) csIter() iter[CSRecord] { return recIter(r, tabCS, (*Run).csFromRec) }

func (r *Run) objIter() iter[ObjRecord] { return recIter(r, tabObj, objFromRec) }

func (r *Run) deltaIter() iter[deltaRec] {
	return recIter(r, tabDelta, func(_ *Run, rec []byte) (deltaRec, error) {
		var d deltaRec
		copy(d.Delta[:], rec[:32])
		copy(d.ID[:], rec[32:64])
		return d, nil
	})
}

// recIter yields the records of table tab in key order, each decoded by
// dec; a record dec fails on ends the walk with its error.
func recIter[T any](r *Run, tab byte, dec func(r *Run, rec []byte) (T, error)) iter[T] {
	c := r.cursor(tab)
	return func() (T, bool, error) {
		rec, ok, err := c.next()
		if !ok || err != nil {
			var zero T
			return zero, false, err
		}
		v, err := dec(r, rec)
		return v, err == nil, err
	}
}
