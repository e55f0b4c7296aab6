package crashsweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/worktree"
)

// The work-tree part crashes, at every filesystem call, a first checkout
// (with Sync), a switch (without), an update of a tree with local edits
// behind another agent's commit (a clean line merge, a conflict written
// with markers, a binary conflict, files written, removed, made and
// pruned), with and without Sync, and a status refresh that writes the
// index's stat data and the directory records. Its oracle, on each
// crashed state:
//
//   - process crash: each file holds its old content or what the
//     uncrashed operation leaves, never a part or anything else;
//   - process, strict and one torn clone: a status calls no file clean
//     unless it holds its index entry's object, and lists every untracked
//     file (a torn index without Sync is refused as corrupt, which calls
//     nothing clean), also after a file is planted in every directory;
//   - after the uncrashed update: its conflicts are recorded, under a
//     process crash, and under a strict power loss too with Sync; and the
//     status is as truthful as after any crash.
//
// It is worktree/crash_test.go's sweep, run by crashsim so that the
// canaries update-trusts-stat and dirs-record-untracked reach it.

const (
	treeStore = "/s"
	treeDir   = "/w"
)

// Absent is what FileContent returns for a path that holds no file.
const Absent = "<absent>"

// treeFixture is a store on a memory filesystem and the revisions the
// part moves a tree between.
type treeFixture struct {
	m     *faultfs.MemFS
	s     *core.Store
	sn    *core.Snapshot
	a, b  objects.ID // checkout a, switch to b
	ua    objects.ID // update: the tree's base
	ub    objects.ID // update: another agent's commit on ua
	clock time.Time
}

func (f *treeFixture) commit(parent objects.ID, changes ...core.Change) (objects.ID, error) {
	var ps []core.ID
	if !parent.IsZero() {
		ps = []core.ID{parent}
	}
	f.clock = f.clock.Add(time.Second)
	return f.s.Commit(core.CommitRequest{Parents: ps, Changes: changes, Time: f.clock})
}

func put(p, data string) core.Change { return core.Change{Path: p, Data: []byte(data)} }
func del(p string) core.Change       { return core.Change{Path: p, Delete: true} }
func link(p, target string) core.Change {
	return core.Change{Path: p, Data: []byte(target), Mode: objects.ModeSymlink}
}

// newTreeFixture commits the revisions: a and b differ in every way a
// switch handles (changed, added and deleted files, an executable bit, a
// link retargeted, a file turned into a directory); ub changes, on ua,
// a line the tree changes too, another line of a file the tree edits,
// and adds, removes and retargets.
func newTreeFixture() (*treeFixture, error) {
	f := &treeFixture{m: faultfs.NewMem(), clock: time.Unix(1_700_000_000, 0)}
	var err error
	if f.s, err = core.Create(treeStore, core.Options{FS: f.m, InlineCheckpoint: true}); err != nil {
		return nil, err
	}
	steps := []func() error{
		func() (err error) {
			f.a, err = f.commit(objects.ZeroID, put("a", "alpha"), put("dir/b", "beta"),
				core.Change{Path: "dir/run", Data: []byte("#!/bin/sh"), Mode: objects.ModeExec},
				link("l", "a"), put("f2d", "file"), put("gone", "bye"), put("big", string(make([]byte, 3000))))
			return err
		},
		func() (err error) {
			f.b, err = f.commit(f.a, put("a", "ALPHA"), put("dir/new", "new"), del("gone"), link("l", "dir/b"),
				del("f2d"), put("f2d/x", "in a dir"), put("big", "short now"), del("dir/b"), put("dir2/c", "gamma"))
			return err
		},
		func() (err error) {
			f.ua, err = f.commit(objects.ZeroID, put("x", "1\n2\n3\n"), put("y", "1\n2\n3\n4\n5\n"), put("z", "z\n"),
				put("d/gone", "g\n"), put("bin", "\x00b"), put("keep", "k\n"))
			return err
		},
		func() (err error) {
			f.ub, err = f.commit(f.ua, put("x", "1\ntheirs\n3\n"), put("y", "1\n2\n3\n4\nFIVE\n"), put("keep", "K\n"),
				del("d/gone"), put("d2/new", "n2\n"), put("bin", "\x00B"), link("l", "keep"))
			return err
		},
		func() (err error) { f.sn, err = f.s.Snapshot(); return err },
		func() error { return f.m.SyncDir("/") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			f.s.Close()
			return nil, fmt.Errorf("work-tree part setup: %w", err)
		}
	}
	return f, nil
}

// opts are the options of a tree operation on fsys, with the part's
// canaries.
func (pc *partRun) treeOpts(fsys vfs.FS, sync bool) worktree.Options {
	o := worktree.Options{FS: fsys, StoreDir: treeStore, Sync: sync}
	testknobs.Weaken(&o, pc.cfg.Weaken)
	return o
}

func treePart(_ context.Context, pc *partRun) error {
	f, err := newTreeFixture()
	if err != nil {
		return err
	}
	defer f.s.Close()
	empty := f.m.CrashClone(faultfs.ProcessCrash, 0)
	checkout := func(sync bool) func(vfs.FS) error {
		return func(fsys vfs.FS) error {
			_, err := worktree.Checkout(f.sn, f.a, treeDir, pc.treeOpts(fsys, sync))
			return err
		}
	}
	if err := pc.treeSweep("checkout (Sync)", empty, true, checkout(true), nil); err != nil {
		return err
	}
	onA := empty.CrashClone(faultfs.ProcessCrash, 0)
	if err := checkout(true)(onA); err != nil {
		return fmt.Errorf("work-tree part setup: %w", err)
	}
	sw := func(fsys vfs.FS) error {
		wt, err := worktree.Open(treeDir, pc.treeOpts(fsys, false))
		if err != nil {
			return err
		}
		defer wt.Close()
		_, err = wt.Switch(f.sn, f.b)
		return err
	}
	if err := pc.treeSweep("switch", onA, false, sw, nil); err != nil {
		return err
	}
	if err := pc.backSweep(f, onA, sw); err != nil {
		return err
	}
	edited, err := f.editedTree()
	if err != nil {
		return err
	}
	for _, sync := range []bool{true, false} {
		up := func(fsys vfs.FS) error {
			wt, err := worktree.Open(treeDir, pc.treeOpts(fsys, sync))
			if err != nil {
				return err
			}
			defer wt.Close()
			_, err = wt.Update(f.sn, f.ub, "")
			return err
		}
		if err := pc.treeSweep(fmt.Sprintf("update (Sync %v)", sync), edited, sync, up, []string{"bin", "x"}); err != nil {
			return err
		}
	}
	return pc.refreshSweep(f)
}

// backSweep crashes the switch sw from the tree's revision a to b at
// every call, then checks out a again: the tree must hold exactly a's
// files with nothing to report. The paths the stopped switch had already
// written are its, not the agent's: a checkout of the old base that took
// them for local changes, or found nothing to do, leaves them for the
// next commit to record.
func (pc *partRun) backSweep(f *treeFixture, onA *faultfs.MemFS, sw func(vfs.FS) error) error {
	want, err := TreeFiles(onA, treeDir)
	if err != nil {
		return err
	}
	const name = "switch, then back"
	return pc.everyCall(name, onA, sw, func(at int64, m *faultfs.MemFS) error {
		pc.rep.States++
		fsys := m.CrashClone(faultfs.ProcessCrash, 0)
		wt, err := worktree.Open(treeDir, pc.treeOpts(fsys, false))
		if err != nil {
			return pc.violation("tree", name, at, "process", "the tree does not open: %v", err)
		}
		defer wt.Close()
		if _, err := wt.Switch(f.sn, f.a); err != nil {
			return pc.violation("tree", name, at, "process", "the checkout of the old base failed: %v", err)
		}
		if msg := NeitherOldNorNew(fsys, want, want); msg != "" {
			return pc.violation("tree", name, at, "process", "after the checkout of the old base: %s", msg)
		}
		st, err := wt.Status()
		if err != nil || len(st.Changes) > 0 || st.Base != f.a {
			return pc.violation("tree", name, at, "process", "after the checkout of the old base: status %v, %v", st, err)
		}
		return nil
	})
}

// refreshSweep crashes a status that writes what it found (the index's
// stat data and the directory records) on a tree whose records were
// written before a file was added in one of its directories.
func (pc *partRun) refreshSweep(f *treeFixture) error {
	m, err := f.editedTree()
	if err != nil {
		return err
	}
	refresh := func(fsys vfs.FS) error {
		wt, err := worktree.Open(treeDir, pc.treeOpts(fsys, false))
		if err != nil {
			return err
		}
		defer wt.Close()
		st, err := wt.Status()
		if err != nil {
			return err
		}
		return wt.Refresh(st)
	}
	if err := refresh(m); err != nil {
		return fmt.Errorf("work-tree part setup: %w", err)
	}
	if err := afero.WriteFile(m, treeDir+"/d/later", []byte("l\n"), 0o644); err != nil {
		return err
	}
	return pc.treeSweep("status refresh", m, false, refresh, nil)
}

// editedTree is a tree checked out at ua (with Sync) and then edited: a
// line both sides change, a line only the tree changes, a binary file
// both change, a file added and one removed.
func (f *treeFixture) editedTree() (*faultfs.MemFS, error) {
	m := f.m.CrashClone(faultfs.ProcessCrash, 0)
	if _, err := worktree.Checkout(f.sn, f.ua, treeDir, worktree.Options{FS: m, StoreDir: treeStore, Sync: true}); err != nil {
		return nil, fmt.Errorf("work-tree part setup: %w", err)
	}
	if err := m.SyncDir("/"); err != nil {
		return nil, err
	}
	for p, data := range map[string]string{"x": "1\nours\n3\n", "y": "ONE\n2\n3\n4\n5\n", "n": "new\n", "bin": "\x00ours"} {
		if err := afero.WriteFile(m, treeDir+"/"+p, []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	return m, m.Remove(treeDir + "/z")
}

// treeSweep crashes op on base at every call and checks every crashed
// state, then the uncrashed one (conflicts: what an uncrashed op records).
func (pc *partRun) treeSweep(name string, base *faultfs.MemFS, sync bool, op func(vfs.FS) error, conflicts []string) error {
	done := base.CrashClone(faultfs.ProcessCrash, 0)
	if err := op(done); err != nil {
		return fmt.Errorf("work-tree part, %s: the uncrashed run: %w", name, err)
	}
	old, err := TreeFiles(base, treeDir)
	if err != nil {
		return fmt.Errorf("work-tree part, %s: %w", name, err)
	}
	new, err := TreeFiles(done, treeDir)
	if err != nil {
		return fmt.Errorf("work-tree part, %s: the uncrashed run: %w", name, err)
	}
	err = pc.everyCall(name, base, op, func(at int64, m *faultfs.MemFS) error {
		pc.rep.States++
		if msg := NeitherOldNorNew(m.CrashClone(faultfs.ProcessCrash, 0), old, new); msg != "" {
			return pc.violation("tree", name, at, "process", "%s", msg)
		}
		return pc.treeStatus(name, at, m, sync)
	})
	if err != nil {
		return err
	}
	if err := pc.treeStatus(name, 0, done, sync); err != nil || conflicts == nil {
		return err
	}
	models := []faultfs.Model{faultfs.ProcessCrash}
	if sync {
		models = append(models, faultfs.Strict)
	}
	for _, model := range models {
		wt, err := worktree.Open(treeDir, worktree.Options{FS: done.CrashClone(model, 0), StoreDir: treeStore})
		if err != nil {
			return pc.violation("tree", name, 0, model.String(), "a crash after it returned: the tree does not open: %v", err)
		}
		var got []string
		for _, c := range wt.Index().Conflicts {
			got = append(got, c.Path)
		}
		wt.Close()
		if !slices.Equal(got, conflicts) {
			return pc.violation("tree", name, 0, model.String(), "a crash after it returned: conflicts %v, want %v", got, conflicts)
		}
	}
	return nil
}

// treeStatus checks a status on the process, strict and one torn clone
// of m: it calls no file clean unless the file holds its index entry's
// object. Without Sync a power loss may tear the index, which is then
// refused as corrupt (nothing is called clean).
func (pc *partRun) treeStatus(name string, at int64, m *faultfs.MemFS, sync bool) error {
	clones := []struct {
		model faultfs.Model
		seed  int64
	}{{faultfs.ProcessCrash, 0}, {faultfs.Strict, 0}, {faultfs.Torn, 1}}
	for _, c := range clones {
		tornOK := !sync && c.model != faultfs.ProcessCrash
		if msg := StatusLie(m.CrashClone(c.model, c.seed), tornOK); msg != "" {
			return pc.violation("tree", name, at, c.model.String(), "%s", msg)
		}
		// A file created after the crash in any directory is seen: no
		// directory record left by the crash vouches for a name set that
		// changed since.
		fsys := m.CrashClone(c.model, c.seed)
		if err := plant(fsys); err != nil {
			return err
		}
		if msg := StatusLie(fsys, tornOK); msg != "" {
			return pc.violation("tree", name, at, c.model.String(), "after a file was added in every directory: %s", msg)
		}
	}
	return nil
}

// plant creates a file named "planted" in every directory of the tree at
// /w but its metadata directory.
func plant(fsys vfs.FS) error {
	return afero.Walk(fsys, treeDir, func(p string, fi fs.FileInfo, err error) error {
		switch {
		case err != nil && p == treeDir && errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case !fi.IsDir():
			return nil
		case fi.Name() == worktree.MetaDir:
			return fs.SkipDir
		}
		return afero.WriteFile(fsys, p+"/planted", []byte("p\n"), 0o644)
	})
}

// StatusLie opens the work tree at /w (its store at /s) on fsys and
// returns what its status gets wrong ("" when nothing): a path called
// clean that does not hold its index entry's object, an untracked file it
// does not list, or a tree that does not open. tornIndexOK accepts an index refused as corrupt, which calls
// nothing clean (a power loss without Sync may tear it).
func StatusLie(fsys vfs.FS, tornIndexOK bool) string {
	wt, err := worktree.Open(treeDir, worktree.Options{FS: fsys, StoreDir: treeStore})
	if errors.Is(err, worktree.ErrNotWorkTree) || tornIndexOK && errors.Is(err, worktree.ErrIndexCorrupt) {
		return "" // no index: nothing is called clean
	}
	if err != nil {
		return fmt.Sprintf("the tree does not open: %v", err)
	}
	defer wt.Close()
	st, err := wt.Status()
	if err != nil {
		return fmt.Sprintf("status: %v", err)
	}
	changed := map[string]bool{}
	for _, c := range st.Changes {
		changed[c.Path] = true
	}
	files, err := TreeFiles(fsys, treeDir)
	if err != nil {
		return fmt.Sprintf("reading the tree: %v", err)
	}
	tracked := map[string]bool{}
	for _, e := range wt.Index().Entries {
		tracked[e.Path] = true
	}
	for p := range files {
		if !tracked[p] && !changed[p] {
			return fmt.Sprintf("status misses the untracked file %s", p)
		}
	}
	for _, e := range wt.Index().Entries {
		if changed[e.Path] {
			continue
		}
		got := FileContent(fsys, treeDir+"/"+e.Path)
		data := got
		if e.Mode == objects.ModeSymlink {
			var isLink bool
			if data, isLink = strings.CutPrefix(got, "->"); !isLink {
				return fmt.Sprintf("status calls %s clean, but it holds %q, not the index's link", e.Path, got)
			}
		}
		if objects.BlobID([]byte(data)) != e.ID {
			return fmt.Sprintf("status calls %s clean, but it holds %q, not the index's object", e.Path, got)
		}
	}
	return ""
}

// FileContent is what p holds for a work-tree oracle: a file's bytes, "->"
// and a link's target, or Absent (a directory holds no file content).
func FileContent(fsys vfs.FS, p string) string {
	fi, err := vfs.Lstat(fsys, p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && fi.IsDir()):
		return Absent
	case err != nil:
		return "<" + err.Error() + ">"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := vfs.Readlink(fsys, p)
		return "->" + target
	}
	f, err := fsys.Open(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TreeFiles maps every file and link below dir (its metadata directory
// left out) to what FileContent returns; a dir that does not exist holds
// none.
func TreeFiles(fsys vfs.FS, dir string) (map[string]string, error) {
	out := map[string]string{}
	err := afero.Walk(fsys, dir, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if fi.IsDir() && rel == worktree.MetaDir {
			return fs.SkipDir
		}
		if !fi.IsDir() && p != dir {
			out[rel] = FileContent(fsys, p)
		}
		return nil
	})
	return out, err
}

// NeitherOldNorNew checks the process-crash oracle of a tree operation on
// the work tree at /w of fsys: every path of old or new (TreeFiles of the
// tree before and after the uncrashed operation; a nil map: no files)
// holds its old or its new content, never a part or anything else. It
// returns the first path that does not ("" when none).
func NeitherOldNorNew(fsys vfs.FS, old, new map[string]string) string {
	for _, p := range union(old, new) {
		if got := FileContent(fsys, treeDir+"/"+p); got != or(old[p]) && got != or(new[p]) {
			return fmt.Sprintf("%s holds %q, neither the old %q nor the new %q", p, got, or(old[p]), or(new[p]))
		}
	}
	return ""
}

func or(s string) string {
	if s == "" {
		return Absent
	}
	return s
}

func union(a, b map[string]string) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
