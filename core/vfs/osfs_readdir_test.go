package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
