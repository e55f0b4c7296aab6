package faultfs_test

import (
	"bytes"
	"testing"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// TestZeroFillSharesNoBytes: whole pages of zeros share one frozen page, so
// a later write to one file, before or after a sync, must reach neither
// another file, nor a clone, nor a later zero fill.
func TestZeroFillSharesNoBytes(t *testing.T) {
	m := faultfs.NewMem()
	zero := make([]byte, 3*4096)
	mk := func(name string) afero.File {
		f, err := m.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(zero, 0); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := mk("/a"), mk("/b")
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	strict := m.CrashClone(faultfs.Strict, 0)
	data := bytes.Repeat([]byte{0xa5}, 100)
	if _, err := a.WriteAt(data, 4096+10); err != nil {
		t.Fatal(err)
	}
	c := mk("/c")
	read := func(fs vfs.FS, name string) []byte {
		f, err := fs.OpenFile(name, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make([]byte, len(zero))
		if err := vfs.ReadFull(f, got, 0); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := append([]byte(nil), zero...)
	copy(want[4096+10:], data)
	if got := read(m, "/a"); !bytes.Equal(got, want) {
		t.Fatal("/a does not read back what was written over its zero fill")
	}
	for _, name := range []string{"/b", "/c"} {
		if got := read(m, name); !bytes.Equal(got, zero) {
			t.Fatalf("%s: a write to /a showed up in another zero-filled file", name)
		}
	}
	if got := read(strict, "/a"); !bytes.Equal(got, zero) {
		t.Fatal("a write after the clone showed up in the strict clone")
	}
	b.Close()
	c.Close()
	a.Close()
}
