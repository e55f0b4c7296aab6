package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRenameBetweenManyDirectoriesKeepsItsDescriptors is checkout's
// pattern on a tree of more directories than a Root keeps open: every
// file goes to a temporary name in one directory and is renamed into its
// own. The second parent looked up by a rename must not evict the first
// one's descriptor (renameat then failed with EBADF once the cache was
// full: the 879th file of a checkout of Go's src).
func TestRenameBetweenManyDirectoriesKeepsItsDescriptors(t *testing.T) {
	dir := t.TempDir()
	fsys := OS()
	root, err := OpenRoot(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Mkdir("tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*dirCacheMax; i++ {
		d := fmt.Sprintf("d%04d", i)
		if err := root.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		d += "/sub"
		if err := root.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := fmt.Sprintf("tmp/t%d", i)
		f, err := root.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := root.Rename(tmp, d+"/f"); err != nil {
			t.Fatalf("rename %d: %v", i, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("d%04d/sub/f", 3*dirCacheMax-1))); err != nil {
		t.Fatal(err)
	}
}
