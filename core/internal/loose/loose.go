// Package loose is the store's loose objects: blobs larger than the inline
// threshold, each in a file of its own under objects/, named by its id
// (objects/ab/cdef…), made durable before the journal frame that names it.
//
// A loose object file holds the object's encoding, either as it is or as
// one zstd frame of it, whichever is smaller. The index records the
// object's size, so the file's size says which: the encoding itself when
// it is the object's size, a zstd frame when it is smaller. Source files
// above 64 KiB compress about 4× (Go's src, its 267 files above 64 KiB:
// 15.7 MB at zstd's default level, 16.4 MB at its fastest, 14.9 MB at its
// better one, which cost about 1 s more CPU in an import than the
// fastest), and the id, re-hashed on every read, checks what the
// frame decodes to.
package loose

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// Path returns where the loose object id of the store in storeDir lives:
// its directory and its file.
func Path(storeDir string, id objects.ID) (dir, file string) {
	h := id.String()
	dir = path.Join(storeDir, "objects", h[:2])
	return dir, path.Join(dir, h[2:])
}

// Write makes every object of objs (blobs with their Data) durable before
// the frame that names them: temp file, datasync, link (never clobbering)
// into place, sync the directory. skipDirSync is the test-only canary that
// leaves out the directory syncs.
func Write(fsys vfs.FS, storeDir string, objs []txn.Obj, skipDirSync bool) error {
	for _, o := range objs {
		dir, final := Path(storeDir, o.ID)
		created := false
		if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := fsys.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return errs.IO("create "+dir, err)
			}
			created = true
		}
		tmp := path.Join(storeDir, "objects", fmt.Sprintf("tmp-%s-%d", o.ID.String()[:16], time.Now().UnixNano()))
		f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return errs.IO("create loose object temp", err)
		}
		werr := writeEncoded(f, o.Data)
		if werr == nil {
			werr = vfs.Datasync(f)
		}
		cerr := f.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			if err := fsys.Link(tmp, final); err != nil && !errors.Is(err, fs.ErrExist) {
				werr = err
			}
		}
		rerr := fsys.Remove(tmp)
		if werr != nil {
			return errs.IO("write loose object "+o.ID.String(), werr)
		}
		if rerr != nil {
			return errs.IO("remove loose object temp", rerr)
		}
		if !skipDirSync {
			if err := fsys.SyncDir(dir); err != nil {
				return errs.IO("sync "+dir, err)
			}
			if created {
				if err := fsys.SyncDir(path.Join(storeDir, "objects")); err != nil {
					return errs.IO("sync objects directory", err)
				}
			}
		}
	}
	return nil
}

// maxWindow is the zstd window of loose objects: what a decoder of a
// damaged or foreign frame may be made to allocate is bounded by it.
const maxWindow = 8 << 20

// encoder compresses loose objects; EncodeAll is safe for concurrent use.
// With lower memory its history is the window plus one block (8.1 MiB),
// not twice the window: it lives as long as the process, and a commit's
// memory is bounded by its chunk (core.Options.CommitChunkBytes) plus it.
var encoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, encoderOptions...)
	if err != nil {
		panic(fmt.Sprintf("loose: zstd encoder with constant options: %v", err))
	}
	return e
})

// encoderOptions are those of every loose object's compression.
var encoderOptions = []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
	zstd.WithWindowSize(maxWindow), zstd.WithLowerEncoderMem(true)}

// streamAbove is the size from which a loose object is compressed into
// its file as a stream: EncodeAll would hold a second copy of it, as big
// as the object when it does not compress.
const streamAbove = 16 << 20

// writeEncoded writes what Encode returns for data into the new, empty
// file f, without a second copy of a big object.
func writeEncoded(f afero.File, data []byte) error {
	if len(data) < streamAbove {
		_, err := f.WriteAt(Encode(data), 0)
		return err
	}
	w := &countingWriter{w: f}
	zw, err := zstd.NewWriter(w, encoderOptions...)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		zw.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if w.n < int64(len(data)) {
		return nil
	}
	// Not smaller: the object as it is, which the file's size then says.
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	return err
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Encode returns what a loose object file holding data holds: a zstd frame
// of data when that is smaller, else data.
func Encode(data []byte) []byte {
	z := encoder().EncodeAll(data, make([]byte, 0, len(data)/2))
	if len(z) < len(data) {
		return z
	}
	return data
}

// Read reads the loose object file into data, which has the object's
// size. A missing file, one that is not a regular file of at most that
// size, or a smaller one that is not a zstd frame of exactly that many
// bytes, is a *CorruptError naming it.
func Read(fsys vfs.FS, file string, data []byte) error {
	st, err := fsys.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return errs.Corrupt(file, 0, "loose object is missing")
	}
	if err != nil {
		return errs.IO("stat "+file, err)
	}
	if !st.Mode().IsRegular() || st.Size() > int64(len(data)) || st.Size() == 0 && len(data) > 0 {
		return errs.Corrupt(file, 0, "loose object is not a regular file of at most %d bytes", len(data))
	}
	f, err := fsys.OpenFile(file, os.O_RDONLY, 0)
	if err != nil {
		return errs.IO("open "+file, err)
	}
	defer f.Close()
	if st.Size() == int64(len(data)) {
		if err := vfs.ReadFull(f, data, 0); err != nil {
			return errs.IO("read "+file, err)
		}
		return nil
	}
	// Decoded from the file as a stream: a second copy of a big object
	// would double what a checkout of it holds.
	r := &readErr{r: io.NewSectionReader(f, 0, st.Size())}
	if err := decode(r, data); err != nil {
		if r.err != nil {
			return errs.IO("read "+file, r.err)
		}
		return errs.Corrupt(file, 0, "loose object of %d bytes does not decompress to %d: %v", st.Size(), len(data), err)
	}
	return nil
}

// readErr keeps the error of a read that failed other than at the end,
// so a failed read is told from damaged bytes whatever the decoder makes
// of it.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// decode fills data with what the zstd frame read from z decodes to, which
// must be exactly len(data) bytes. Reading into data and then looking for
// one byte more bounds what damaged input can make it decode, whatever its
// header claims.
func decode(z io.Reader, data []byte) error {
	d, err := zstd.NewReader(z, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := io.ReadFull(d, data); err != nil {
		return err
	}
	var one [1]byte
	if n, err := d.Read(one[:]); n != 0 || err != io.EOF {
		return errors.New("more bytes than the object's size")
	}
	return nil
}
