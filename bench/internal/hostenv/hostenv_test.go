package hostenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDiskBytesCountsAHardLinkedFileOnce(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "a")
	if err := os.WriteFile(p, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	one, err := DiskBytes(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p, filepath.Join(d, "b")); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
	two, err := DiskBytes(d)
	if err != nil {
		t.Fatal(err)
	}
	if one < 64<<10 || two != one {
		t.Fatalf("DiskBytes = %d with one name, %d with two; want at least 64 KiB and equal (du counts a file once)", one, two)
	}
}

func TestProbeMeasuresAPositiveSync(t *testing.T) {
	us, err := Probe(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !(us > 0) {
		t.Fatalf("Probe = %v µs, want > 0", us)
	}
}
