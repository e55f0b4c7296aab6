package core

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path"

	"github.com/swarmops/swarmops/core/internal/b3"
	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/loose"
	"github.com/swarmops/swarmops/core/internal/proj"
	"github.com/swarmops/swarmops/core/internal/reflog"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/refs"
	"github.com/swarmops/swarmops/core/vfs"
)

// CollectedName is the file that records a garbage collection's horizon:
// the objects of frames before it that the index does not name were
// collected. Verification reads it; nothing on the open, commit or
// recovery path does.
const CollectedName = "collected"

const collectedMagic = "SWGC0001"

// writeCollected durably records horizon h (temp, datasync, rename,
// directory sync) before the index that drops what it collected is
// installed. It never lowers the horizon.
func writeCollected(fsys vfs.FS, dir string, h uint64) error {
	if old, err := readCollected(fsys, dir); err != nil {
		return err
	} else if old > h {
		return nil
	}
	b := make([]byte, 0, 48)
	b = append(b, collectedMagic...)
	b = binary.LittleEndian.AppendUint64(b, h)
	sum := b3.Sum256(b)
	b = append(b, sum[:]...)
	tmp := path.Join(dir, CollectedName+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return errs.IO("create gc horizon", err)
	}
	_, werr := f.WriteAt(b, 0)
	if werr == nil {
		werr = vfs.Datasync(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return errs.IO("write gc horizon", werr)
	}
	if err := fsys.Rename(tmp, path.Join(dir, CollectedName)); err != nil {
		return errs.IO("install gc horizon", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return errs.IO("sync store directory", err)
	}
	return nil
}

// readCollected returns the recorded horizon, 0 when no collection ran.
func readCollected(fsys vfs.FS, dir string) (uint64, error) {
	file := path.Join(dir, CollectedName)
	f, err := fsys.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, errs.IO("open gc horizon", err)
	}
	defer f.Close()
	b := make([]byte, 49)
	n, _ := f.ReadAt(b, 0)
	if n != 48 || string(b[:8]) != collectedMagic || b3.Sum256(b[:16]) != [32]byte(b[16:48]) {
		return 0, errs.Corrupt(file, 0, "gc horizon does not decode")
	}
	return binary.LittleEndian.Uint64(b[8:]), nil
}

// journalBase returns where the journal starts: its first segment's first
// frame, seq 1 unless a garbage collection removed earlier segments.
func (s *Store) journalBase() (journal.Pos, uint64, error) {
	segs, err := s.jcfg.Segments()
	if err != nil {
		return journal.Pos{}, 0, errs.IO("list journal", err)
	}
	pos := journal.Pos{Seg: 1, Off: journal.FirstFrame}
	if len(segs) == 0 || segs[0] <= 1 {
		return pos, 1, nil
	}
	r := journal.NewReader(s.jcfg)
	defer r.Close()
	h, err := r.SegHeader(segs[0])
	if err != nil {
		return pos, 0, err
	}
	return journal.Pos{Seg: segs[0], Off: journal.FirstFrame}, h.FirstSeq, nil
}

// seedRefs gives the replay of a collected journal, which starts at seq
// base, the ref moves before it, from the reflog file (every move before
// the checkpoint is there, and the checkpoint is past base), and the
// protections the store's table holds as of base: those cannot be checked
// against frames that are gone.
func (v *verifier) seedRefs(base uint64) error {
	s := v.s
	s.view.mu.Lock()
	rlen := s.view.proj.ReflogLen
	pats, seqs := s.view.proj.Refs.Protected(base - 1)
	s.view.mu.Unlock()
	older, err := reflog.Read(s.fs, s.dir, rlen)
	if err != nil {
		return err
	}
	for name, log := range older {
		for _, e := range log {
			if e.Seq < base {
				v.fresh.Refs.Apply(e.Seq, e.Time, e.Origin, []refs.Move{{Name: name, Old: e.Old, New: e.New}})
			}
		}
	}
	for i, p := range pats {
		v.fresh.Refs.RestoreProtection(p, seqs[i])
	}
	return nil
}

// holds reports whether the store's location l holds object id: in a
// collected store, the index may name a copy of an object the journal
// also holds elsewhere, or a changeset whose first frame was collected.
func (v *verifier) holds(id ID, l proj.Loc) bool {
	s := v.s
	var data []byte
	if l.Loose {
		data = make([]byte, l.Size)
		_, file := loose.Path(s.dir, id)
		if loose.Read(s.fs, file, data) != nil {
			return false
		}
	} else {
		var err error
		if data, err = s.readInline(s.view.reader, nil, 0, inlineAt{l.Seg, l.Off, l.Size, l.Stored, l.Inner}); err != nil {
			return false
		}
	}
	return objects.IDOf(l.Kind, data) == id
}
