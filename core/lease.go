package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/vfs"
)

// LeaseDir is the directory of leases in a store.
const LeaseDir = "leases"

// A Lease holds objects for garbage collection: until Expiry, GC keeps
// everything its roots reach. An agent's open work takes one (a checkout's
// base, a commit in flight, a server connection).
type Lease struct {
	Name   string
	Roots  []ID
	Expiry time.Time
}

// leaseMagic starts every lease file.
const leaseMagic = "SWLEASE1"

// maxLeaseRoots bounds what a lease file may claim, so a damaged one never
// allocates without limit.
const maxLeaseRoots = 1 << 16

// Lease writes (or renews) the lease name on roots for ttl. Lease files
// are not synced: no process outlives a power loss, and neither need its
// leases. Errors: ErrInvalid for a bad name or ttl, ErrIO.
func (s *Store) Lease(name string, roots []ID, ttl time.Duration) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := validLeaseName(name); err != nil {
		return err
	}
	if ttl <= 0 || len(roots) > maxLeaseRoots {
		return fmt.Errorf("%w: lease %q: ttl %v, %d roots", ErrInvalid, name, ttl, len(roots))
	}
	b := make([]byte, 0, 20+32*len(roots))
	b = append(b, leaseMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.opts.Now().Add(ttl).UnixNano()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(roots)))
	for _, r := range roots {
		b = append(b, r[:]...)
	}
	dir := path.Join(s.dir, LeaseDir)
	if err := s.fs.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return errs.IO("create lease directory", err)
	}
	tmp := path.Join(dir, fmt.Sprintf(".tmp-%s-%d", name, time.Now().UnixNano()))
	if err := writeFile(s.fs, tmp, b); err != nil {
		// A full disk leaves a partial file gc never looks at.
		_ = s.fs.Remove(tmp)
		return errs.IO("write lease", err)
	}
	if err := s.fs.Rename(tmp, path.Join(dir, name)); err != nil {
		_ = s.fs.Remove(tmp)
		return errs.IO("install lease", err)
	}
	return nil
}

// ReleaseLease removes the lease name; a missing lease is not an error.
func (s *Store) ReleaseLease(name string) error {
	if err := validLeaseName(name); err != nil {
		return err
	}
	err := s.fs.Remove(path.Join(s.dir, LeaseDir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errs.IO("remove lease", err)
	}
	return nil
}

func validLeaseName(name string) error {
	if name == "" || len(name) > 200 || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%w: lease name %q", ErrInvalid, name)
	}
	return nil
}

func writeFile(fsys vfs.FS, name string, b []byte) error {
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(b, 0)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// Leases reads every lease of the store. A lease that does not decode is
// returned in bad, never a panic: a power loss can tear one, since leases
// are not synced (GC removes it and reports it).
func (s *Store) Leases() (leases []Lease, bad []string, err error) {
	dir := path.Join(s.dir, LeaseDir)
	d, err := s.fs.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, errs.IO("open lease directory", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, errs.IO("list lease directory", err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		b, err := readAll(s.fs, path.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, nil, errs.IO("read lease "+n, err)
		}
		l, ok := decodeLease(n, b)
		if !ok {
			bad = append(bad, n)
			continue
		}
		leases = append(leases, l)
	}
	return leases, bad, nil
}

func decodeLease(name string, b []byte) (Lease, bool) {
	if len(b) < 20 || string(b[:8]) != leaseMagic {
		return Lease{}, false
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if n > maxLeaseRoots || uint64(len(b)) != 20+32*uint64(n) {
		return Lease{}, false
	}
	l := Lease{Name: name, Expiry: time.Unix(0, int64(binary.LittleEndian.Uint64(b[8:]))).UTC()}
	for i := 0; i < int(n); i++ {
		l.Roots = append(l.Roots, ID(b[20+32*i:52+32*i]))
	}
	return l, true
}

func readAll(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > 20+32*maxLeaseRoots {
		return []byte{}, nil // decodes as bad
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}
