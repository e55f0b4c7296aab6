package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestProgressIsOffWhenStderrIsNotATerminal checks that no bar is drawn
// into a pipe, a file or a buffer, which is where CI logs and agents read
// from: progress returns no callback at all there.
func TestProgressIsOffWhenStderrIsNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, stderr := range map[string]io.Writer{"a pipe": w, "a file": f, "a buffer": &bytes.Buffer{}} {
		a := &app{stderr: stderr}
		if p := a.progress("checkout"); p != nil {
			t.Errorf("stderr is %s, not a terminal, yet progress draws a bar", name)
		}
	}
}
