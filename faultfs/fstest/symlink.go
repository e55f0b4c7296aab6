package fstest

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/swarmops/swarmops/core/vfs"
)

// wantLink checks that name is a symbolic link holding target.
func (r *runner) wantLink(name, target string) {
	fi, err := vfs.Lstat(r.fs, r.p(name))
	if !r.must("Lstat "+name, err) {
		return
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		r.errorf("Lstat %s: mode %v, want a symlink", name, fi.Mode())
	}
	got, err := vfs.Readlink(r.fs, r.p(name))
	if r.must("Readlink "+name, err) && got != target {
		r.errorf("Readlink %s: got %q, want %q", name, got, target)
	}
}

func checkSymlinks(r *runner) {
	if !r.write("file", "data") || !r.must("Mkdir", r.fs.Mkdir(r.p("dir"), 0o755)) {
		return
	}
	r.write("dir/in", "inside")
	r.must("Symlink to file", vfs.Symlink(r.fs, "file", r.p("lf")))
	r.must("Symlink to dir", vfs.Symlink(r.fs, "dir", r.p("ld")))
	r.must("Symlink dangling", vfs.Symlink(r.fs, "nowhere/x", r.p("dangling")))
	r.must("Symlink absolute", vfs.Symlink(r.fs, r.p("file"), r.p("abs")))
	r.wantLink("lf", "file")
	r.wantLink("dangling", "nowhere/x")
	r.wantContent("lf", "data")
	r.wantContent("abs", "data")
	r.wantContent("ld/in", "inside")
	if st, err := r.fs.Stat(r.p("ld")); r.must("Stat through a link", err) && !st.IsDir() {
		r.errorf("Stat of a link to a directory: IsDir false")
	}
	_, err := r.fs.Stat(r.p("dangling"))
	r.wantErr("Stat of a dangling link", err, fs.ErrNotExist)
	r.wantErr("Symlink onto an existing name", vfs.Symlink(r.fs, "x", r.p("file")), fs.ErrExist)
	if _, err := vfs.Readlink(r.fs, r.p("file")); !errors.Is(err, syscall.EINVAL) {
		r.errorf("Readlink of a regular file: got %v, want EINVAL", err)
	}
	if _, err := r.fs.OpenFile(r.p("lf"), os.O_RDONLY|syscall.O_NOFOLLOW, 0); !errors.Is(err, syscall.ELOOP) {
		r.errorf("open O_NOFOLLOW of a link: got %v, want ELOOP", err)
	}
	f, err := r.fs.Open(r.p("dir"))
	if r.must("Open dir", err) {
		fis, err := f.Readdir(-1)
		f.Close()
		r.must("Readdir", err)
		for _, fi := range fis {
			if fi.Name() == "in" && fi.Mode()&fs.ModeSymlink != 0 {
				r.errorf("Readdir: a regular file shows as a link")
			}
		}
	}
	r.must("Rename a link", r.fs.Rename(r.p("lf"), r.p("lf2")))
	r.wantLink("lf2", "file")
	r.must("Remove a link to a directory", r.fs.Remove(r.p("ld")))
	r.wantContent("dir/in", "inside")
	r.must("RemoveAll of a link", r.fs.RemoveAll(r.p("lf2")))
	r.wantContent("file", "data")
	_, err = vfs.Lstat(r.fs, r.p("lf2"))
	r.wantErr("Lstat of a removed link", err, fs.ErrNotExist)
}

func checkRoot(r *runner) {
	root, err := vfs.OpenRoot(r.fs, r.dir)
	if !r.must("OpenRoot", err) {
		return
	}
	defer root.Close()
	r.must("root Mkdir", root.Mkdir("d", 0o755))
	r.must("root Mkdir nested", root.Mkdir("d/e", 0o755))
	f, err := root.OpenFile("d/e/f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if !r.must("root create", err) {
		return
	}
	f.Write([]byte("via root"))
	r.must("Close", f.Close())
	r.wantContent("d/e/f", "via root")
	r.must("root Rename", root.Rename("d/e/f", "d/g"))
	r.wantContent("d/g", "via root")
	r.must("root Symlink", root.Symlink("../outside", "d/l"))
	r.wantLink("d/l", "../outside")
	if got, err := root.Readlink("d/l"); r.must("root Readlink", err) && got != "../outside" {
		r.errorf("root Readlink: got %q", got)
	}
	fi, err := root.Lstat("d/l")
	if r.must("root Lstat", err) && fi.Mode()&fs.ModeSymlink == 0 {
		r.errorf("root Lstat of a link: mode %v", fi.Mode())
	}
	fis, err := root.ReadDir("d")
	if r.must("root ReadDir", err) {
		var names []string
		for _, fi := range fis {
			names = append(names, fi.Name())
			if fi.Name() == "l" && fi.Mode()&fs.ModeSymlink == 0 {
				r.errorf("root ReadDir: the link shows as %v", fi.Mode())
			}
		}
		if len(names) != 3 || names[0] != "e" || names[1] != "g" || names[2] != "l" {
			r.errorf("root ReadDir: got %v, want [e g l]", names)
		}
	}
	if fis, err := root.ReadDir("."); r.must("root ReadDir of the root", err) && len(fis) != 1 {
		r.errorf("root ReadDir(.): got %d entries, want 1", len(fis))
	}
	r.must("root SyncDir", root.SyncDir("d"))
	r.must("root SyncDir of the root", root.SyncDir("."))
	f, err = root.OpenFile("d/g", os.O_RDONLY, 0)
	if r.must("root open for reading", err) {
		r.must("Close", f.Close())
	}
	r.must("root Remove link", root.Remove("d/l"))
	r.must("root Remove file", root.Remove("d/g"))
	r.must("root Remove dir", root.Remove("d/e"))
	r.wantMissing("d/g")
}

func checkRootRefuses(r *runner) {
	out := r.p("outside")
	if !r.must("Mkdir outside", r.fs.Mkdir(out, 0o755)) || !r.write("outside/secret", "s") {
		return
	}
	if !r.must("Mkdir t", r.fs.Mkdir(r.p("t"), 0o755)) {
		return
	}
	root, err := vfs.OpenRoot(r.fs, r.p("t"))
	if !r.must("OpenRoot", err) {
		return
	}
	defer root.Close()
	r.must("Symlink abs", vfs.Symlink(r.fs, out, r.p("t/abs")))
	r.must("Symlink rel", vfs.Symlink(r.fs, "../outside", r.p("t/rel")))
	r.must("Mkdir t/in", r.fs.Mkdir(r.p("t/in"), 0o755))
	r.must("Symlink inside", vfs.Symlink(r.fs, "in", r.p("t/inner")))
	r.write("t/in/f", "x")
	for _, l := range []string{"abs", "rel", "inner"} {
		_, err := root.OpenFile(l+"/new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		r.wantErr("create through link "+l, err, vfs.ErrNotBeneath)
		_, err = root.OpenFile(l+"/secret", os.O_RDONLY, 0)
		r.wantErr("open through link "+l, err, vfs.ErrNotBeneath)
		r.wantErr("Mkdir through link "+l, root.Mkdir(l+"/d", 0o755), vfs.ErrNotBeneath)
		r.wantErr("Remove through link "+l, root.Remove(l+"/secret"), vfs.ErrNotBeneath)
		r.wantErr("Rename from through link "+l, root.Rename(l+"/secret", "got"), vfs.ErrNotBeneath)
		r.wantErr("Rename to through link "+l, root.Rename("in/f", l+"/f"), vfs.ErrNotBeneath)
		r.wantErr("Symlink through link "+l, root.Symlink("x", l+"/s"), vfs.ErrNotBeneath)
		_, err = root.Lstat(l + "/secret")
		r.wantErr("Lstat through link "+l, err, vfs.ErrNotBeneath)
		_, err = root.Readlink(l + "/secret")
		r.wantErr("Readlink through link "+l, err, vfs.ErrNotBeneath)
		_, err = root.ReadDir(l)
		r.wantErr("ReadDir of link "+l, err, vfs.ErrNotBeneath)
		r.wantErr("SyncDir of link "+l, root.SyncDir(l), vfs.ErrNotBeneath)
	}
	r.must("Symlink to the secret", vfs.Symlink(r.fs, out+"/secret", r.p("t/final")))
	_, err = root.OpenFile("final", os.O_WRONLY|os.O_TRUNC, 0)
	r.wantErr("open of a final link", err, vfs.ErrNotBeneath)
	_, err = root.OpenFile("final", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	r.wantErr("exclusive create on a link", err, fs.ErrExist)
	for _, bad := range []string{"../outside/secret", "/etc/passwd", "in/../../outside/secret"} {
		_, err := root.OpenFile(bad, os.O_RDONLY, 0)
		r.wantErr("open "+bad, err, vfs.ErrNotBeneath)
	}
	for _, bad := range []string{"", ".", "in/", "in//f", "in/./f", "a\x00b"} {
		if err := root.Mkdir(bad, 0o755); !errors.Is(err, fs.ErrInvalid) {
			r.errorf("Mkdir %q: got %v, want fs.ErrInvalid", bad, err)
		}
	}
	r.must("Remove of a final link", root.Remove("abs"))
	r.wantContent("outside/secret", "s")
	r.wantContent("t/in/f", "x")
}

func checkInode(r *runner) {
	r.write("a", "1")
	r.write("b", "2")
	sa, err1 := r.fs.Stat(r.p("a"))
	sb, err2 := r.fs.Stat(r.p("b"))
	if !r.must("Stat a", err1) || !r.must("Stat b", err2) {
		return
	}
	ia, ok1 := vfs.InodeOf(sa)
	ib, ok2 := vfs.InodeOf(sb)
	if !ok1 || !ok2 {
		r.errorf("InodeOf: no inode data in %T", sa.Sys())
		return
	}
	if ia.Ino == ib.Ino && ia.Dev == ib.Dev {
		r.errorf("two files share inode %d", ia.Ino)
	}
	r.must("Rename", r.fs.Rename(r.p("a"), r.p("c")))
	sc, err := vfs.Lstat(r.fs, r.p("c"))
	if r.must("Lstat c", err) {
		if ic, _ := vfs.InodeOf(sc); ic.Ino != ia.Ino {
			r.errorf("rename changed the inode: %d -> %d", ia.Ino, ic.Ino)
		}
	}
	if sa.ModTime().IsZero() || ia.Ctime.IsZero() {
		r.errorf("zero mtime or ctime: %v %v", sa.ModTime(), ia.Ctime)
	}
}
