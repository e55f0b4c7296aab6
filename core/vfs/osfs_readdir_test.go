package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"
)

// TestRootReadDirListsEveryName checks the root's own getdents parse
// against the os package's: a directory whose records fill several reads
// of the buffer, names of every length up to NAME_MAX and outside ASCII,
// each listed once with its own stat data (the infos share one array).
func TestRootReadDirListsEveryName(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := 0; i < 1500; i++ {
		name := fmt.Sprintf("%d-%s%s", i, strings.Repeat("n", i%235), strings.Repeat("é", i%7))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Repeat("x", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	want = append(want, "sub")
	slices.Sort(want)
	root, err := OpenRoot(OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fis, err := root.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fi := range fis {
		got = append(got, fi.Name())
		osfi, err := os.Lstat(filepath.Join(dir, fi.Name()))
		if err != nil {
			t.Fatalf("%q: %v", fi.Name(), err)
		}
		if fi.Size() != osfi.Size() || fi.Mode() != osfi.Mode() {
			t.Errorf("%q: size %d mode %v, want %d %v", fi.Name(), fi.Size(), fi.Mode(), osfi.Size(), osfi.Mode())
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d names, want %d; first difference near %v", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] + " / " + b[i]
		}
	}
	return "the end"
}

// TestRootLstatNamesDescribesOnlyTheNamesGiven: each name as ReadDir
// describes it (a link as a link, with its inode data), an absent one
// left out, in the order given; a name that is not one component is
// refused, on the real OS's root and on the walking one alike.
func TestRootLstatNamesDescribesOnlyTheNamesGiven(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "d", "l")); err != nil {
		t.Fatal(err)
	}
	roots := map[string]func() (Root, error){
		"os":   func() (Root, error) { return OpenRoot(OS(), dir) },
		"walk": func() (Root, error) { return OpenRoot(noRooter{OS()}, dir) },
	}
	for name, open := range roots {
		root, err := open()
		if err != nil {
			t.Fatal(err)
		}
		fis, err := root.LstatNames("d", []string{"sub", "gone", "l", "f"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, fi := range fis {
			got = append(got, fmt.Sprintf("%s %v %d", fi.Name(), fi.Mode().Type(), map[bool]int64{true: fi.Size()}[fi.Mode().IsRegular()]))
			if _, ok := InodeOf(fi); !ok {
				t.Errorf("%s: %s carries no inode data", name, fi.Name())
			}
		}
		if want := []string{"sub d--------- 0", "l L--------- 0", "f ---------- 5"}; !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
		for _, bad := range []string{"..", ".", "", "sub/x", "a\x00b"} {
			if _, err := root.LstatNames("d", []string{"f", bad}); err == nil {
				t.Errorf("%s: name %q accepted", name, bad)
			}
		}
		root.Close()
	}
}

// noRooter hides the real OS's Rooter, so OpenRoot walks.
type noRooter struct{ FS }

func (n noRooter) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	return n.FS.(afero.Lstater).LstatIfPossible(name)
}

func (n noRooter) ReadlinkIfPossible(name string) (string, error) {
	return n.FS.(afero.LinkReader).ReadlinkIfPossible(name)
}
