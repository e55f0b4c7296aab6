package worktree_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/worktree"
)

// benchTree checks out a changeset of n files (1 KiB each, 50 a
// directory) into a temporary directory on the real OS, its index
// refreshed so that stat data is trusted.
func benchTree(b *testing.B, n int) (*fixture, string) {
	base := b.TempDir()
	f := newFixture(b, vfs.OS(), filepath.Join(base, "store"))
	var cs []core.Change
	for i := 0; i < n; i++ {
		cs = append(cs, put(fmt.Sprintf("d%03d/f%05d.go", i/50, i), fmt.Sprintf("%01024d", i)))
	}
	id := f.commit(objects.ZeroID, cs...)
	dir := filepath.Join(base, "w")
	f.checkout(id, dir)
	wt := mustOpen(b, dir, f.opts())
	if err := wt.Refresh(mustStatus(b, wt)); err != nil {
		b.Fatal(err)
	}
	return f, dir
}

// eachIteration times b.N runs of do on the work tree at dir, each opened
// with o and closed after.
func eachIteration(b *testing.B, dir string, o worktree.Options, do func(*worktree.Tree) error) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := onTree(dir, o, do); err != nil {
			b.Fatal(err)
		}
	}
}

// reportStats reports the last iteration's work per operation.
func reportStats(b *testing.B, st worktree.Stats) {
	b.ReportMetric(float64(st.Stated), "stated/op")
	b.ReportMetric(float64(st.Hashed), "read/op")
	b.ReportMetric(float64(st.BytesRead), "bytesread/op")
}

// BenchmarkStatusUnchanged is status on an unchanged tree: every entry is
// stat'ed, none is read.
func BenchmarkStatusUnchanged(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			f, dir := benchTree(b, n)
			var st *worktree.Status
			eachIteration(b, dir, f.opts(), func(wt *worktree.Tree) (err error) {
				st, err = wt.Status()
				return err
			})
			if len(st.Changes) != 0 {
				b.Fatalf("unchanged tree has changes: %v", kinds(st))
			}
			reportStats(b, st.Stats)
		})
	}
}

// BenchmarkSnapshotOneChangedFile is the snapshot a commit --dir takes
// after one file was edited: every entry is stat'ed, one file is read.
func BenchmarkSnapshotOneChangedFile(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			f, dir := benchTree(b, n)
			if err := os.WriteFile(filepath.Join(dir, "d000/f00007.go"), []byte("edited\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			var s *worktree.Snapshot
			eachIteration(b, dir, f.opts(), func(wt *worktree.Tree) (err error) {
				s, err = wt.Snapshot()
				return err
			})
			if len(s.Changes) != 1 {
				b.Fatalf("snapshot has %d changes, want 1", len(s.Changes))
			}
			reportStats(b, s.Stats)
		})
	}
}

// BenchmarkUpdate brings a tree of n files onto a revision that changed 10
// of them, with 10 local edits of which one is in a file theirs changed
// too (one-line files: a conflict, written with markers). Only the paths
// that differ between the revisions are looked at, so apart from the
// index (read and rewritten whole) its cost follows the change, not the
// tree. Each iteration first resets the tree (untimed): a forced switch
// back, the edits again.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			f, dir := benchTree(b, n)
			base := mustOpen(b, dir, f.opts()).Base()
			path := func(i int) string { return fmt.Sprintf("d%03d/f%05d.go", i/50, i) }
			var theirs []core.Change
			for i := 0; i < 10; i++ {
				theirs = append(theirs, put(path(i*7), fmt.Sprintf("%01024d\ntheirs\n", i*7)))
			}
			onto := f.commit(base, theirs...)
			force := f.opts()
			force.Force = true
			var res *worktree.UpdateResult
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := onTree(dir, force, func(wt *worktree.Tree) error {
					_, err := wt.Switch(f.snap(), base)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < 10; k++ {
					p := filepath.Join(dir, path(k*3+7*9))
					if k == 0 {
						p = filepath.Join(dir, path(0))
					}
					if err := os.WriteFile(p, []byte("ours\n"+fmt.Sprintf("%01024d", k)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				sn := f.snap()
				b.StartTimer()
				if err := onTree(dir, f.opts(), func(wt *worktree.Tree) (err error) {
					res, err = wt.Update(sn, onto, "")
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Written), "written/op")
			b.ReportMetric(float64(len(res.Conflicts)), "conflicts/op")
		})
	}
}
