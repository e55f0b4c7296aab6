// Package fstest is the conformance suite for vfs.FS implementations: the
// real OS, MemFS and every faultfs wrapper must behave alike for the calls
// the store makes. Run checks everything and reports every misbehaviour at
// once, in the manner of testing/fstest.TestFS.
package fstest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// TB is the part of testing.TB that Run uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// NewFS returns a fresh filesystem and an existing, empty directory in it
// that a check may use as it likes.
type NewFS func() (vfs.FS, string)

type check struct {
	name string
	run  func(r *runner)
}

// runner collects the failures of one check.
type runner struct {
	fs   vfs.FS
	dir  string
	fail []string
}

func (r *runner) errorf(format string, args ...any) {
	r.fail = append(r.fail, fmt.Sprintf(format, args...))
}

func (r *runner) p(name string) string { return path.Join(r.dir, name) }

// must reports err and says whether the check may go on.
func (r *runner) must(what string, err error) bool {
	if err != nil {
		r.errorf("%s: unexpected error: %v", what, err)
		return false
	}
	return true
}

func (r *runner) wantErr(what string, err, target error) {
	if err == nil {
		r.errorf("%s: got no error, want one satisfying errors.Is(%v)", what, target)
		return
	}
	if !errors.Is(err, target) {
		r.errorf("%s: got %v, want errors.Is(%v)", what, err, target)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		r.errorf("%s: error %v (%T) is not a *fs.PathError", what, err, err)
	}
}

// create creates name; false where it failed (the failure is reported).
func (r *runner) create(name string) (afero.File, bool) {
	f, err := r.fs.Create(r.p(name))
	return f, r.must("Create "+name, err)
}

func (r *runner) write(name string, data string) bool {
	f, ok := r.create(name)
	if !ok {
		return false
	}
	if _, err := f.Write([]byte(data)); !r.must("Write "+name, err) {
		f.Close()
		return false
	}
	return r.must("Close "+name, f.Close())
}

// written writes data to name and opens it read-only; false where either
// failed (the failure is reported).
func (r *runner) written(name, data string) (afero.File, bool) {
	if !r.write(name, data) {
		return nil, false
	}
	f, err := r.fs.Open(r.p(name))
	if !r.must("Open", err) {
		return nil, false
	}
	return f, true
}

func (r *runner) read(name string) (string, bool) {
	f, err := r.fs.Open(r.p(name))
	if !r.must("Open "+name, err) {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if !r.must("ReadAll "+name, err) {
		return "", false
	}
	return string(b), true
}

func (r *runner) wantContent(name, want string) {
	if got, ok := r.read(name); ok && got != want {
		r.errorf("content of %s: got %q, want %q", name, got, want)
	}
}

func (r *runner) wantMissing(name string) {
	_, err := r.fs.Stat(r.p(name))
	r.wantErr("Stat of removed "+name, err, fs.ErrNotExist)
}

// Run runs every check, each on a fresh filesystem from newFS, and reports
// all failures together through t.
func Run(t TB, newFS NewFS) {
	t.Helper()
	var all []string
	for _, c := range checks {
		fsys, dir := newFS()
		r := &runner{fs: fsys, dir: dir}
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.errorf("panic: %v", p)
				}
			}()
			c.run(r)
		}()
		for _, f := range r.fail {
			all = append(all, c.name+": "+f)
		}
	}
	if len(all) > 0 {
		t.Errorf("%d conformance failure(s):\n\t%s", len(all), strings.Join(all, "\n\t"))
	}
}

// Names lists the checks Run performs.
func Names() []string {
	var n []string
	for _, c := range checks {
		n = append(n, c.name)
	}
	return n
}

var checks = []check{
	{"create write read", func(r *runner) {
		if !r.write("a", "hello world") {
			return
		}
		r.wantContent("a", "hello world")
		st, err := r.fs.Stat(r.p("a"))
		if r.must("Stat", err) {
			if st.Size() != 11 || st.IsDir() || st.Name() != "a" {
				r.errorf("Stat: got size %d dir %v name %q, want 11 false \"a\"", st.Size(), st.IsDir(), st.Name())
			}
		}
	}},
	{"open missing", func(r *runner) {
		_, err := r.fs.Open(r.p("nope"))
		r.wantErr("Open missing", err, fs.ErrNotExist)
		_, err = r.fs.OpenFile(r.p("nope/x"), os.O_RDWR|os.O_CREATE, 0o644)
		r.wantErr("OpenFile in missing dir", err, fs.ErrNotExist)
		_, err = r.fs.Stat(r.p("nope"))
		r.wantErr("Stat missing", err, fs.ErrNotExist)
	}},
	{"O_EXCL", func(r *runner) {
		if !r.write("a", "x") {
			return
		}
		_, err := r.fs.OpenFile(r.p("a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		r.wantErr("O_EXCL on existing", err, fs.ErrExist)
		f, err := r.fs.OpenFile(r.p("b"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if r.must("O_EXCL on new", err) {
			r.must("Close", f.Close())
		}
	}},
	{"O_TRUNC and O_APPEND", func(r *runner) {
		if !r.write("a", "0123456789") {
			return
		}
		f, err := r.fs.OpenFile(r.p("a"), os.O_WRONLY|os.O_APPEND, 0)
		if !r.must("open append", err) {
			return
		}
		f.Write([]byte("ab"))
		f.Write([]byte("cd"))
		r.must("Close", f.Close())
		r.wantContent("a", "0123456789abcd")
		f, err = r.fs.OpenFile(r.p("a"), os.O_RDWR|os.O_TRUNC, 0)
		if !r.must("open trunc", err) {
			return
		}
		f.Write([]byte("z"))
		r.must("Close", f.Close())
		r.wantContent("a", "z")
	}},
	{"read only handle refuses writes", func(r *runner) {
		f, ok := r.written("a", "x")
		if !ok {
			return
		}
		defer f.Close()
		if _, err := f.Write([]byte("y")); err == nil {
			r.errorf("Write on read-only handle: got no error")
		}
		r.wantContent("a", "x")
	}},
	{"ReadAt WriteAt holes and EOF", func(r *runner) {
		f, ok := r.create("a")
		if !ok {
			return
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("xy"), 5000); !r.must("WriteAt past end", err) {
			return
		}
		buf := make([]byte, 5002)
		n, err := f.ReadAt(buf, 0)
		if n != 5002 || (err != nil && err != io.EOF) {
			r.errorf("ReadAt whole: got %d, %v; want 5002, nil", n, err)
		}
		if !bytes.Equal(buf[:5000], make([]byte, 5000)) || string(buf[5000:]) != "xy" {
			r.errorf("ReadAt: hole is not zeros or data misplaced")
		}
		n, err = f.ReadAt(buf[:10], 4998)
		if n != 4 || !errors.Is(err, io.EOF) {
			r.errorf("ReadAt across EOF: got %d, %v; want 4, io.EOF", n, err)
		}
		if err := vfs.ReadFull(f, buf[:10], 4998); !errors.Is(err, io.ErrUnexpectedEOF) {
			r.errorf("vfs.ReadFull across EOF: got %v, want io.ErrUnexpectedEOF", err)
		}
	}},
	{"Seek and Read", func(r *runner) {
		f, ok := r.written("a", "0123456789")
		if !ok {
			return
		}
		defer f.Close()
		buf := make([]byte, 3)
		for _, c := range []struct {
			off    int64
			whence int
			pos    int64
			want   string
		}{{2, io.SeekStart, 2, "234"}, {1, io.SeekCurrent, 6, "678"}, {-1, io.SeekEnd, 9, "9"}} {
			pos, err := f.Seek(c.off, c.whence)
			if !r.must("Seek", err) {
				return
			}
			if pos != c.pos {
				r.errorf("Seek(%d, %d): got %d, want %d", c.off, c.whence, pos, c.pos)
			}
			n, _ := f.Read(buf)
			if string(buf[:n]) != c.want {
				r.errorf("Read after Seek(%d, %d): got %q, want %q", c.off, c.whence, buf[:n], c.want)
			}
		}
		if n, err := f.Read(buf); n != 0 || err != io.EOF {
			r.errorf("Read at EOF: got %d, %v; want 0, io.EOF", n, err)
		}
		if _, err := f.Seek(-1, io.SeekStart); err == nil {
			r.errorf("Seek to negative offset: got no error")
		}
	}},
	{"Truncate", func(r *runner) {
		f, ok := r.create("a")
		if !ok {
			return
		}
		defer f.Close()
		f.Write([]byte("0123456789"))
		r.must("Truncate shrink", f.Truncate(4))
		r.must("Truncate grow", f.Truncate(8))
		buf := make([]byte, 8)
		n, _ := f.ReadAt(buf, 0)
		if n != 8 || string(buf) != "0123\x00\x00\x00\x00" {
			r.errorf("after shrink+grow: got %q, want %q", buf[:n], "0123\x00\x00\x00\x00")
		}
	}},
	{"Allocate and Datasync", func(r *runner) {
		f, ok := r.create("a")
		if !ok {
			return
		}
		defer f.Close()
		f.Write([]byte("keep"))
		if !r.must("Allocate", vfs.Allocate(f, 0, 1<<16)) {
			return
		}
		st, err := f.Stat()
		if r.must("Stat", err) && st.Size() != 1<<16 {
			r.errorf("size after Allocate: got %d, want %d", st.Size(), 1<<16)
		}
		buf := make([]byte, 8)
		f.ReadAt(buf, 0)
		if string(buf) != "keep\x00\x00\x00\x00" {
			r.errorf("Allocate changed data: got %q", buf)
		}
		r.must("Allocate inside the file", vfs.Allocate(f, 100, 100))
		if st, _ := f.Stat(); st != nil && st.Size() != 1<<16 {
			r.errorf("Allocate inside the file changed size to %d", st.Size())
		}
		r.must("Datasync", vfs.Datasync(f))
		r.must("Sync", f.Sync())
		if err := vfs.Allocate(f, -1, 10); err == nil {
			r.errorf("Allocate at negative offset: got no error")
		}
	}},
	{"closed file", func(r *runner) {
		f, ok := r.create("a")
		if !ok {
			return
		}
		r.must("Close", f.Close())
		if _, err := f.Write([]byte("x")); err == nil {
			r.errorf("Write after Close: got no error")
		}
		if err := f.Close(); err == nil {
			r.errorf("second Close: got no error")
		}
	}},
	{"mkdir readdir", func(r *runner) {
		r.must("MkdirAll", r.fs.MkdirAll(r.p("d/e/f"), 0o755))
		r.must("MkdirAll existing", r.fs.MkdirAll(r.p("d/e"), 0o755))
		r.wantErr("Mkdir existing", r.fs.Mkdir(r.p("d"), 0o755), fs.ErrExist)
		r.wantErr("Mkdir in missing dir", r.fs.Mkdir(r.p("x/y"), 0o755), fs.ErrNotExist)
		r.write("d/b", "1")
		r.write("d/a", "22")
		st, err := r.fs.Stat(r.p("d/e"))
		if r.must("Stat dir", err) && !st.IsDir() {
			r.errorf("Stat of a directory: IsDir false")
		}
		f, err := r.fs.Open(r.p("d"))
		if !r.must("Open dir", err) {
			return
		}
		defer f.Close()
		fis, err := f.Readdir(-1)
		if !r.must("Readdir", err) {
			return
		}
		var got []string
		for _, fi := range fis {
			got = append(got, fmt.Sprintf("%s:%v:%d", fi.Name(), fi.IsDir(), map[bool]int64{true: 0, false: fi.Size()}[fi.IsDir()]))
		}
		sort.Strings(got)
		if want := "a:false:2 b:false:1 e:true:0"; strings.Join(got, " ") != want {
			r.errorf("Readdir: got %v, want %v", got, want)
		}
		f2, err := r.fs.Open(r.p("d"))
		if !r.must("Open dir", err) {
			return
		}
		defer f2.Close()
		n1, err := f2.Readdirnames(2)
		if !r.must("Readdirnames(2)", err) {
			return
		}
		n2, _ := f2.Readdirnames(2)
		if len(n1) != 2 || len(n2) != 1 {
			r.errorf("Readdirnames in steps of 2: got %v then %v", n1, n2)
		}
		if _, err := f2.Readdirnames(2); err != io.EOF {
			r.errorf("Readdirnames at end: got %v, want io.EOF", err)
		}
	}},
	{"rename", func(r *runner) {
		r.write("a", "new")
		r.write("b", "old")
		r.must("Rename replacing", r.fs.Rename(r.p("a"), r.p("b")))
		r.wantContent("b", "new")
		r.wantMissing("a")
		r.must("Mkdir", r.fs.Mkdir(r.p("d"), 0o755))
		r.must("Rename into dir", r.fs.Rename(r.p("b"), r.p("d/c")))
		r.wantContent("d/c", "new")
		r.wantErr("Rename missing", r.fs.Rename(r.p("zz"), r.p("y")), fs.ErrNotExist)
		r.must("Rename dir", r.fs.Rename(r.p("d"), r.p("e")))
		r.wantContent("e/c", "new")
	}},
	{"remove", func(r *runner) {
		r.must("MkdirAll", r.fs.MkdirAll(r.p("d/e"), 0o755))
		r.write("d/e/f", "x")
		r.write("g", "x")
		r.must("Remove file", r.fs.Remove(r.p("g")))
		r.wantMissing("g")
		if err := r.fs.Remove(r.p("d")); err == nil {
			r.errorf("Remove of a non-empty directory: got no error")
		}
		r.wantErr("Remove missing", r.fs.Remove(r.p("g")), fs.ErrNotExist)
		r.must("RemoveAll", r.fs.RemoveAll(r.p("d")))
		r.wantMissing("d")
		r.must("RemoveAll missing", r.fs.RemoveAll(r.p("d")))
	}},
	{"link", func(r *runner) {
		r.write("a", "one")
		r.write("c", "other")
		r.must("Link", r.fs.Link(r.p("a"), r.p("b")))
		r.wantContent("b", "one")
		r.wantErr("Link onto existing", r.fs.Link(r.p("a"), r.p("c")), fs.ErrExist)
		r.wantContent("c", "other")
		r.wantErr("Link of missing", r.fs.Link(r.p("zz"), r.p("y")), fs.ErrNotExist)
		f, err := r.fs.OpenFile(r.p("b"), os.O_WRONLY|os.O_APPEND, 0)
		if r.must("open link", err) {
			f.Write([]byte("+"))
			f.Close()
		}
		r.wantContent("a", "one+")
		r.must("Remove first name", r.fs.Remove(r.p("a")))
		r.wantContent("b", "one+")
	}},
	{"SyncDir", func(r *runner) {
		r.must("Mkdir", r.fs.Mkdir(r.p("d"), 0o755))
		r.write("d/a", "x")
		r.must("SyncDir", r.fs.SyncDir(r.p("d")))
		r.must("SyncDir of the test dir", r.fs.SyncDir(r.dir))
		r.wantErr("SyncDir missing", r.fs.SyncDir(r.p("nope")), fs.ErrNotExist)
		if err := r.fs.SyncDir(r.p("d/a")); err == nil {
			r.errorf("SyncDir of a regular file: got no error")
		}
		if _, err := r.fs.OpenFile(r.p("d"), os.O_RDWR, 0); err == nil {
			r.errorf("OpenFile of a directory for writing: got no error")
		}
	}},
	{"BootID", func(r *runner) {
		a, err := r.fs.BootID()
		if !r.must("BootID", err) {
			return
		}
		b, _ := r.fs.BootID()
		if a == "" || a != b {
			r.errorf("BootID: got %q then %q, want one non-empty id", a, b)
		}
	}},
	{"Lock excludes and queues", func(r *runner) {
		name := r.p("LOCK")
		l, err := r.fs.Lock(name, time.Second)
		if !r.must("Lock", err) {
			return
		}
		_, err = r.fs.Lock(name, 0)
		r.wantErr("second Lock without wait", err, vfs.ErrBusy)
		start := time.Now()
		_, err = r.fs.Lock(name, 30*time.Millisecond)
		r.wantErr("second Lock with timeout", err, vfs.ErrBusy)
		if d := time.Since(start); d < 30*time.Millisecond {
			r.errorf("Lock gave up after %v, before its 30ms timeout", d)
		}
		var wg sync.WaitGroup
		var l2 vfs.Locked
		var err2 error
		wg.Add(1)
		go func() {
			defer wg.Done()
			l2, err2 = r.fs.Lock(name, 10*time.Second)
		}()
		time.Sleep(20 * time.Millisecond)
		r.must("Unlock", l.Unlock())
		wg.Wait()
		if r.must("waiting Lock after Unlock", err2) {
			r.must("Unlock of waiter", l2.Unlock())
		}
		if err := l.Unlock(); err == nil {
			r.errorf("second Unlock: got no error")
		}
		l3, err := r.fs.Lock(name, 0)
		if r.must("Lock after all unlocked", err) {
			r.must("Unlock", l3.Unlock())
		}
		// The abandoned waiters above must not keep the lock.
		l4, err := r.fs.Lock(name, time.Second)
		if r.must("Lock after abandoned waiters", err) {
			r.must("Unlock", l4.Unlock())
		}
	}},
	{"symlinks", checkSymlinks},
	{"root resolves beneath without links", checkRoot},
	{"root refuses links and escapes", checkRootRefuses},
	{"inode data", checkInode},
	{"errors are PathErrors", func(r *runner) {
		_, err := r.fs.Open(r.p("missing"))
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			r.errorf("Open missing: %v (%T) is not a *fs.PathError", err, err)
		}
		r.write("a", "x")
		err = r.fs.Link(r.p("a"), r.p("a"))
		if !errors.As(err, &pe) {
			r.errorf("Link onto itself: %v (%T) is not a *fs.PathError", err, err)
		}
	}},
}
