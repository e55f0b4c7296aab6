package core_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

const seg1 = "/s/journal/seg-000000000001"

// threeCommits makes a store with three durable commits advancing main and
// returns the FS, the ids and the durable end offset.
func threeCommits(t *testing.T, o core.Options) (*faultfs.MemFS, []core.ID, int64) {
	t.Helper()
	m := faultfs.NewMem()
	o.FS = m
	s := mustCreate(t, "/s", o)
	var ids []core.ID
	for i := 0; i < 3; i++ {
		req := core.CommitRequest{Changes: []core.Change{put(fmt.Sprint("f", i), strings.Repeat("x", 100*i))}, Advance: "main"}
		if i > 0 {
			req.Parents = []core.ID{ids[i-1]}
		}
		ids = append(ids, mustCommit(t, s, req))
	}
	in, err := s.Info()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return m, ids, in.DurableOffset
}

// scribble writes b at off in name and makes it durable, as a disk would
// after a misdirected or torn write.
func scribble(t *testing.T, m *faultfs.MemFS, name string, off int64, b []byte) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, m *faultfs.MemFS, name string, n int64) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

// flipBit flips bit 4 of the byte at off in file name, durably.
func flipBit(t *testing.T, m *faultfs.MemFS, name string, off int64) {
	t.Helper()
	xorByte(t, m, name, off, 0x10)
}

// xorByte flips the bits of mask in the byte at off in file name, durably.
func xorByte(t *testing.T, m *faultfs.MemFS, name string, off int64, mask byte) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	scribble(t, m, name, off, []byte{b[0] ^ mask})
}

func TestTornTailIsRepaired(t *testing.T) {
	m, ids, end := threeCommits(t, core.Options{})
	// Garbage past the durable end: a frame header that never completed,
	// then random bytes, as a torn append leaves.
	scribble(t, m, seg1, end, []byte("SWF1\x01\x00\x00\x00garbage of a frame that never made it"))
	after := m.CrashClone(faultfs.Strict, 0) // power loss: new boot id
	rep, err := core.Recover("/s", core.Options{FS: after})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep.TornBytesCut == 0 || rep.FramesReplayed != 3 || len(rep.Corrupt) != 0 {
		t.Fatalf("report %+v: want torn bytes cut, 3 frames replayed, no corruption", rep)
	}
	s, err := core.Open("/s", core.Options{FS: after})
	if err != nil {
		t.Fatalf("Open after repair: %v", err)
	}
	defer s.Close()
	if got, _ := snap(t, s).Ref("main"); got != ids[2] {
		t.Fatalf("main = %v, want the last acknowledged commit", got)
	}
	// Recovery is idempotent: a second one finds nothing to cut.
	rep2, err := core.Recover("/s", core.Options{FS: after})
	if err != nil || rep2.TornBytesCut != 0 {
		t.Fatalf("second Recover: %+v, %v", rep2, err)
	}
}

func TestFlippedBitInDurablePrefixIsCorrupt(t *testing.T) {
	for _, model := range []faultfs.Model{faultfs.Strict, faultfs.ProcessCrash} {
		t.Run(model.String(), func(t *testing.T) {
			m, _, _ := threeCommits(t, core.Options{})
			// Frame 1 sits at the first frame offset; flip a payload bit.
			flipBit(t, m, seg1, journal.FirstFrame+journal.FrameHeaderSize+20)
			after := m.CrashClone(model, 0)
			_, err := core.Open("/s", core.Options{FS: after})
			var ce *core.CorruptError
			if !errors.As(err, &ce) || ce.File != seg1 || ce.Offset != journal.FirstFrame {
				t.Fatalf("Open: got %v, want *CorruptError in %s at offset %d", err, seg1, journal.FirstFrame)
			}
			rep, err := core.Recover("/s", core.Options{FS: after})
			if !errors.Is(err, core.ErrCorrupt) || len(rep.Corrupt) != 1 {
				t.Fatalf("Recover: %+v, %v; want the problem reported and ErrCorrupt", rep, err)
			}
			// Recovery failed closed: nothing was cut, so the flip is still
			// reported the same way.
			if _, err := core.Open("/s", core.Options{FS: after}); !errors.As(err, &ce) || ce.Offset != journal.FirstFrame {
				t.Fatalf("second Open: %v", err)
			}
		})
	}
}

// TestFlippedBitGoesUnnoticedWithoutChecksums shows the corruption check can
// fail: with the SkipChecksum canary the same flip opens silently.
func TestFlippedBitGoesUnnoticedWithoutChecksums(t *testing.T) {
	m, _, _ := threeCommits(t, core.Options{})
	flipBit(t, m, seg1, journal.FirstFrame+journal.FrameHeaderSize+20)
	o := core.Options{FS: m.CrashClone(faultfs.Strict, 0)}
	testknobs.Weaken(&o, testknobs.SkipChecksum)
	s, err := core.Open("/s", o)
	if err != nil {
		t.Fatalf("with checksums skipped the flip should go unnoticed, got %v", err)
	}
	s.Close()
}

func TestLaterWatermarkProvesMiddleFrameDurable(t *testing.T) {
	m, _, _ := threeCommits(t, core.Options{})
	// Frame 2 starts one frame after frame 1; frame 3 (watermark 2) follows.
	s, _ := core.Open("/s", core.Options{FS: m})
	s.Close()
	f, _ := m.OpenFile(seg1, os.O_RDONLY, 0)
	hdr := make([]byte, journal.FrameHeaderSize)
	f.ReadAt(hdr, journal.FirstFrame)
	f.Close()
	size := journal.FrameSize(int(uint32(hdr[8]) | uint32(hdr[9])<<8 | uint32(hdr[10])<<16 | uint32(hdr[11])<<24))
	// Zero frame 2 entirely: it looks like a torn frame, but frame 3 says
	// frame 2 was durable before it was written.
	scribble(t, m, seg1, journal.FirstFrame+size, make([]byte, journal.FrameHeaderSize))
	_, err := core.Open("/s", core.Options{FS: m.CrashClone(faultfs.Strict, 0)})
	var ce *core.CorruptError
	if !errors.As(err, &ce) || ce.Offset != journal.FirstFrame+size || !strings.Contains(ce.Reason, "proves") {
		t.Fatalf("got %v, want corruption at frame 2 proven by a later watermark", err)
	}
}

// TestBadStoreFiles damages every store file in every way and expects a
// typed error that names the file, or a clean recovery for the state file
// (a page-cache hint the store can always rebuild), and never a panic.
func TestBadStoreFiles(t *testing.T) {
	damages := map[string]func(m *faultfs.MemFS, name string){
		"truncated": func(m *faultfs.MemFS, name string) { truncate(t, m, name, 10) },
		"empty":     func(m *faultfs.MemFS, name string) { truncate(t, m, name, 0) },
		"zeroed": func(m *faultfs.MemFS, name string) {
			st, _ := m.Stat(name)
			scribble(t, m, name, 0, make([]byte, st.Size()))
		},
		"directory": func(m *faultfs.MemFS, name string) {
			m.Remove(name)
			m.Mkdir(name, 0o755)
		},
		"missing": func(m *faultfs.MemFS, name string) { m.Remove(name) },
	}
	files := []string{"/s/checkpoint", "/s/state", seg1}
	for _, file := range files {
		for dname, damage := range damages {
			t.Run(filepath.Base(file)+"/"+dname, func(t *testing.T) {
				m, ids, _ := threeCommits(t, core.Options{})
				damage(m, file)
				s, err := core.Open("/s", core.Options{FS: m})
				if file == "/s/state" && dname != "directory" {
					if err != nil {
						t.Fatalf("a damaged state file must be rebuilt by recovery, got %v", err)
					}
					if got, _ := snap(t, s).Ref("main"); got != ids[2] {
						t.Fatalf("main after state rebuild = %v", got)
					}
					s.Close()
					return
				}
				if err == nil {
					s.Close()
					t.Fatalf("Open succeeded on a %s %s", dname, file)
				}
				if !errors.Is(err, core.ErrCorrupt) && !errors.Is(err, core.ErrNotStore) && !errors.Is(err, core.ErrIO) {
					t.Fatalf("untyped error %v", err)
				}
				if !strings.Contains(err.Error(), file) {
					t.Fatalf("error %q does not name %s", err, file)
				}
			})
		}
	}
}

// TestSymlinkedStoreFiles runs on the real OS, where symlinks exist.
func TestSymlinkedStoreFiles(t *testing.T) {
	for _, target := range []string{"dangling", "dir", "loop"} {
		t.Run(target, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			s, err := core.Create(dir, core.Options{FS: vfs.OS()})
			if err != nil {
				t.Fatal(err)
			}
			mustCommit(t, s, core.CommitRequest{Changes: []core.Change{put("a", "1")}})
			s.Close()
			ck := filepath.Join(dir, "checkpoint")
			os.Remove(ck)
			switch target {
			case "dangling":
				os.Symlink(filepath.Join(dir, "nowhere"), ck)
			case "dir":
				os.Symlink(dir, ck)
			case "loop":
				os.Symlink(ck, ck)
			}
			_, err = core.Open(dir, core.Options{FS: vfs.OS()})
			if err == nil || (!errors.Is(err, core.ErrCorrupt) && !errors.Is(err, core.ErrNotStore) && !errors.Is(err, core.ErrIO)) {
				t.Fatalf("got %v, want a typed error", err)
			}
			if !strings.Contains(err.Error(), ck) {
				t.Fatalf("error %q does not name %s", err, ck)
			}
		})
	}
}
