package journal

import (
	"errors"
	"io/fs"
	"os"

	"github.com/spf13/afero"
	"github.com/swarmops/swarmops/core/vfs"
)

// Writer appends frames. It is used only under the store's writer lock; it
// caches the current segment's open file and its known size, which only ever
// grows (other processes only append), so a cached size is a safe lower
// bound of the zero-filled space.
type Writer struct {
	Config
	seg  uint64
	f    afero.File
	size int64
}

// NewWriter returns a Writer.
func NewWriter(c Config) *Writer { return &Writer{Config: c} }

// Close closes the cached segment file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	w.seg = 0
	return err
}

func (w *Writer) open(n uint64) error {
	if w.f != nil && w.seg == n {
		return nil
	}
	w.Close()
	f, err := w.FS.OpenFile(w.SegPath(n), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.seg, w.size = f, n, st.Size()
	return nil
}

// CreateSegment creates (or re-creates, truncating a leftover of a crashed
// writer) segment n whose first frame will carry firstSeq, with its first
// window zero-filled, and syncs the journal directory so the name survives a
// power loss. The data itself is made durable by the next frame's sync.
func (w *Writer) CreateSegment(n, firstSeq uint64, minSize int64) error {
	w.Close()
	f, err := w.FS.OpenFile(w.SegPath(n), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(EncodeSegHeader(w.Key, SegHeader{Store: w.Store, Seg: n, FirstSeq: firstSeq}), 0); err != nil {
		f.Close()
		return err
	}
	size := w.roundWindow(max(minSize, FirstFrame+1))
	if err := vfs.WriteZeros(f, SegHeaderSize, size); err != nil {
		f.Close()
		return err
	}
	if !w.SkipDirSync {
		if err := w.FS.SyncDir(w.Dir); err != nil {
			f.Close()
			return err
		}
	}
	w.f, w.seg, w.size = f, n, size
	return nil
}

func (w *Writer) roundWindow(n int64) int64 {
	win := w.window()
	return (n + win - 1) / win * win
}

// Append writes frame bytes (from EncodeFrame, carrying seq) at end, rolling
// over into a new segment when they do not fit. It returns where the frame
// was written. The frame is not durable until Sync covers its segment.
func (w *Writer) Append(end Pos, seq uint64, frame []byte) (Pos, error) {
	return w.AppendRoll(end, seq, frame, false)
}

// AppendRoll is Append that, with roll, starts a new segment for the frame
// even when it fits in the current one (unless that is empty): garbage
// collection rolls over so that every earlier frame lies in segments it
// can reclaim. A reader follows the rollover as any other (Reader.Next).
func (w *Writer) AppendRoll(end Pos, seq uint64, frame []byte, roll bool) (Pos, error) {
	n := int64(len(frame))
	at := end
	if end.Off > FirstFrame && (roll || end.Off+n > w.segSize()) {
		at = Pos{end.Seg + 1, FirstFrame}
		if err := w.CreateSegment(at.Seg, seq, FirstFrame+n); err != nil {
			return at, err
		}
	} else if err := w.open(at.Seg); err != nil {
		return at, err
	}
	need := at.Off + n
	if need > w.size {
		if st, err := w.f.Stat(); err != nil {
			return at, err
		} else {
			w.size = st.Size()
		}
	}
	if need > w.size {
		// Zero-fill through the end of the window the frame ends in, so that
		// this frame's fdatasync persists zeros and size at once.
		to := w.roundWindow(need)
		if err := vfs.WriteZeros(w.f, w.size, to); err != nil {
			return at, err
		}
		w.size = to
	}
	if _, err := w.f.WriteAt(frame, at.Off); err != nil {
		return at, err
	}
	return at, nil
}

// Sync fdatasyncs segments from..to inclusive.
func (c *Config) Sync(from, to uint64) error {
	for n := from; n <= to; n++ {
		f, err := c.FS.OpenFile(c.SegPath(n), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) && n < to {
			continue
		}
		if err != nil {
			return err
		}
		err = vfs.Datasync(f)
		cerr := f.Close()
		if err != nil {
			return err
		}
		if cerr != nil {
			return cerr
		}
	}
	return nil
}
