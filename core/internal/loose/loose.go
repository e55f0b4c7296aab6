// Package loose is the store's loose objects: blobs larger than the inline
// threshold, each in a file of its own under objects/, named by its id
// (objects/ab/cdef…), made durable before the journal frame that names it.
package loose

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"time"

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
		_, werr := f.WriteAt(o.Data, 0)
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

// Read reads the loose object file into data, which has the object's
// size. A missing file, or one that is not a regular file of that size, is
// a *CorruptError naming it.
func Read(fsys vfs.FS, file string, data []byte) error {
	st, err := fsys.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return errs.Corrupt(file, 0, "loose object is missing")
	}
	if err != nil {
		return errs.IO("stat "+file, err)
	}
	if !st.Mode().IsRegular() || st.Size() != int64(len(data)) {
		return errs.Corrupt(file, 0, "loose object is not a regular file of %d bytes", len(data))
	}
	f, err := fsys.OpenFile(file, os.O_RDONLY, 0)
	if err != nil {
		return errs.IO("open "+file, err)
	}
	defer f.Close()
	if err := vfs.ReadFull(f, data, 0); err != nil {
		return errs.IO("read "+file, err)
	}
	return nil
}
