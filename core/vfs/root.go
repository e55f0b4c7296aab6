package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/afero"
)

// ErrNotBeneath is the error of a Root operation whose name would resolve
// through a symbolic link, or outside the root. A Root never follows a link,
// not even one that points back inside it: that is git's rule ("beyond a
// symbolic link"), and it is what keeps a checkout inside its target
// whatever the target already holds.
var ErrNotBeneath = errors.New("vfs: path does not resolve beneath the root without a symbolic link")

// Root is a directory handle whose operations resolve every name beneath
// the directory and never through a symbolic link: not in a leading
// component, and not in the final one either (OpenFile opens with
// O_NOFOLLOW, the others act on a link itself, as unlink, rename, lstat and
// readlink do). A name is a relative slash-separated path with no empty,
// "." or ".." component; "." alone names the root itself where a directory
// is expected (ReadDir, SyncDir, Lstat). A name that breaks these rules, or
// that meets a link on its way, fails with a *fs.PathError wrapping
// ErrNotBeneath (or fs.ErrInvalid for a malformed name).
//
// The root directory itself is resolved as the FS resolves any name, links
// included: whoever names a root chose it.
//
// A Root is not safe for concurrent use.
type Root interface {
	// Name returns the directory the root was opened on.
	Name() string
	OpenFile(name string, flag int, perm os.FileMode) (afero.File, error)
	Mkdir(name string, perm os.FileMode) error
	// Remove removes a file, a symbolic link or an empty directory.
	Remove(name string) error
	Rename(oldname, newname string) error
	Symlink(target, name string) error
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	// ReadDir lists a directory, sorted by name, each entry described as
	// Lstat would describe it.
	ReadDir(name string) ([]fs.FileInfo, error)
	// LstatNames describes the given entries of the directory name as
	// ReadDir would, in the order given, without reading the directory
	// itself; an entry that is absent is left out. Each of names is one
	// path component.
	LstatNames(name string, names []string) ([]fs.FileInfo, error)
	SyncDir(name string) error
	Close() error
}

// Rooter is implemented by filesystems that resolve beneath a directory
// themselves (the real OS: openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS).
type Rooter interface {
	OpenRoot(dir string) (Root, error)
}

// OpenRoot opens dir as a Root. It uses Rooter when fsys implements it, and
// otherwise a walk over fsys's own methods that lstats every leading
// component before each operation (the faultfs wrappers and MemFS take this
// path, so every step is a call they see). The walk keeps every rule
// against what the directory holds; unlike openat2 it cannot exclude a link
// planted between its check and its operation by a process racing it. It
// needs afero.Lstater and fails with ErrNotSupported without it.
func OpenRoot(fsys FS, dir string) (Root, error) {
	if r, ok := fsys.(Rooter); ok {
		return r.OpenRoot(dir)
	}
	fi, err := Lstat(fsys, dir)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = fsys.Stat(dir); err != nil {
			return nil, err
		}
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "openroot", Path: dir, Err: syscall.ENOTDIR}
	}
	return &walkRoot{fs: fsys, dir: dir}, nil
}

// checkComponent checks a name that must be one path component, neither
// "." nor "..".
func checkComponent(op, name string) error {
	switch {
	case name == "..":
		return &fs.PathError{Op: op, Path: name, Err: ErrNotBeneath}
	case name == "" || name == "." || strings.IndexByte(name, '/') >= 0 || strings.IndexByte(name, 0) >= 0:
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

// checkName reports whether name may be given to a Root: "." (the root
// itself) when self is allowed, or a clean relative path.
func checkName(op, name string, self bool) error {
	if name == "." && self {
		return nil
	}
	if name == "" || name == "." || strings.HasSuffix(name, "/") || strings.IndexByte(name, 0) >= 0 {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if strings.HasPrefix(name, "/") {
		return &fs.PathError{Op: op, Path: name, Err: ErrNotBeneath}
	}
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
			return &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
		case "..":
			return &fs.PathError{Op: op, Path: name, Err: ErrNotBeneath}
		}
	}
	return nil
}

// walkRoot is the generic Root: every operation first lstats each leading
// component of its name and refuses a link or a non-directory among them.
type walkRoot struct {
	fs  FS
	dir string
}

func (r *walkRoot) Name() string { return r.dir }

func (r *walkRoot) full(name string) string {
	if name == "." {
		return r.dir
	}
	return path.Join(r.dir, name)
}

// parents checks the leading components of name (all of them but the
// last), or every component when whole is set.
func (r *walkRoot) parents(op, name string, whole bool) error {
	if name == "." {
		return nil
	}
	comps := strings.Split(name, "/")
	n := len(comps) - 1
	if whole {
		n = len(comps)
	}
	for i := 0; i < n; i++ {
		p := strings.Join(comps[:i+1], "/")
		fi, err := Lstat(r.fs, r.full(p))
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &fs.PathError{Op: op, Path: r.full(name), Err: ErrNotBeneath}
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: op, Path: r.full(name), Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// check is the first step of every operation on name: name must be a
// clean relative path ("." too when self), and its leading components
// (every one when whole) directories, no links.
func (r *walkRoot) check(op, name string, self, whole bool) error {
	if err := checkName(op, name, self); err != nil {
		return err
	}
	return r.parents(op, name, whole)
}

func (r *walkRoot) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if err := r.check("open", name, true, false); err != nil {
		return nil, err
	}
	if flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL && name != "." {
		// O_NOFOLLOW is passed on too; this check is for an FS that
		// ignores the flag. An exclusive create never follows a link.
		if fi, err := Lstat(r.fs, r.full(name)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: r.full(name), Err: ErrNotBeneath}
		}
	}
	return r.fs.OpenFile(r.full(name), flag|syscall.O_NOFOLLOW, perm)
}

func (r *walkRoot) Mkdir(name string, perm os.FileMode) error {
	if err := r.check("mkdir", name, false, false); err != nil {
		return err
	}
	return r.fs.Mkdir(r.full(name), perm)
}

func (r *walkRoot) Remove(name string) error {
	if err := r.check("remove", name, false, false); err != nil {
		return err
	}
	return r.fs.Remove(r.full(name))
}

func (r *walkRoot) Rename(oldname, newname string) error {
	for _, n := range []string{oldname, newname} {
		if err := r.check("rename", n, false, false); err != nil {
			return err
		}
	}
	return r.fs.Rename(r.full(oldname), r.full(newname))
}

func (r *walkRoot) Symlink(target, name string) error {
	if err := r.check("symlink", name, false, false); err != nil {
		return err
	}
	return Symlink(r.fs, target, r.full(name))
}

func (r *walkRoot) Lstat(name string) (fs.FileInfo, error) {
	if err := r.check("lstat", name, true, false); err != nil {
		return nil, err
	}
	return Lstat(r.fs, r.full(name))
}

func (r *walkRoot) Readlink(name string) (string, error) {
	if err := r.check("readlink", name, false, false); err != nil {
		return "", err
	}
	return Readlink(r.fs, r.full(name))
}

func (r *walkRoot) ReadDir(name string) ([]fs.FileInfo, error) {
	if err := r.check("readdir", name, true, true); err != nil {
		return nil, err
	}
	f, err := r.fs.Open(r.full(name))
	if err != nil {
		return nil, err
	}
	fis, err := f.Readdir(-1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(fis, func(i, j int) bool { return fis[i].Name() < fis[j].Name() })
	return fis, nil
}

func (r *walkRoot) LstatNames(name string, names []string) ([]fs.FileInfo, error) {
	fis := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		if err := checkComponent("lstatnames", n); err != nil {
			return nil, err
		}
		p := n
		if name != "." {
			p = name + "/" + n
		}
		fi, err := r.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fis = append(fis, fi)
	}
	return fis, nil
}

func (r *walkRoot) SyncDir(name string) error {
	if err := r.check("syncdir", name, true, true); err != nil {
		return err
	}
	return r.fs.SyncDir(r.full(name))
}

func (r *walkRoot) Close() error { return nil }
