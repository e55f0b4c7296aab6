package props

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/spf13/afero"
	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
)

// TestReflogBitFlipsAreDetectedThroughTheStore: in a store whose
// checkpoints moved ref moves (with their agents and operations) into the
// reflog file, any single flipped bit of the file's chunks makes the
// operation log fail with ErrCorrupt naming the file, and Verify report it;
// no flip reads as other moves.
func TestReflogBitFlipsAreDetectedThroughTheStore(t *testing.T) {
	fs := faultfs.NewMem()
	o := core.Options{FS: fs, CheckpointEvery: 3, InlineCheckpoint: true, Now: func() time.Time { return epoch }}
	s, err := core.Create(storeDir, o)
	if err != nil {
		t.Fatal(err)
	}
	var head core.ID
	for i := range 20 {
		req := core.CommitRequest{Changes: []core.Change{{Path: "f", Data: []byte{byte(i)}}}, Advance: "main",
			Agent: agentPool[i%len(agentPool)]}
		if i > 0 {
			req.Parents = []core.ID{head}
		}
		if head, err = s.Commit(req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := afero.ReadFile(fs, storeDir+"/reflog")
	if err != nil || len(orig) == 0 {
		t.Fatalf("reflog: %d bytes, %v", len(orig), err)
	}
	check(t, 100, func(t *rapid.T) {
		bit := rapid.IntRange(0, len(orig)*8-1).Draw(t, "bit")
		c := fs.CrashClone(faultfs.ProcessCrash, 0)
		b := append([]byte(nil), orig...)
		b[bit/8] ^= 1 << (bit % 8)
		f, err := c.OpenFile(storeDir+"/reflog", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		o := o
		o.FS = c
		s, err := core.Open(storeDir, o)
		if err != nil {
			t.Fatalf("Open must not read the reflog: %v", err)
		}
		defer s.Close()
		sn, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var ce *core.CorruptError
		if _, err := sn.Moves(core.MoveQuery{}); !errors.As(err, &ce) || ce.File != storeDir+"/reflog" {
			t.Fatalf("bit %d flipped: Moves returned %v; want a *CorruptError naming the reflog", bit, err)
		}
		rep, err := s.Verify(false, nil)
		if err != nil || len(rep.Problems) == 0 {
			t.Fatalf("bit %d flipped: Verify found %+v, %v", bit, rep, err)
		}
	})
}
