package props

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// recoveryFixture is a small store built once: a fixed history of commits
// and ref moves on a memory FS, the model after each journal frame, and the
// frames' byte ranges in the segment. Fuzz inputs damage or replace the
// segment of a crash clone of it.
type recoveryFixture struct {
	fs      *faultfs.MemFS
	opts    core.Options
	modelAt map[uint64]*storeModel // model after the frame with this seq
	lastSeq uint64
	frames  []*journal.Frame // as scanned from the base segment
	segPath string
	seg     []byte
}

var (
	recFixOnce sync.Once
	recFix     *recoveryFixture
	recFixErr  error
)

func (m *storeModel) clone() *storeModel {
	c := newStoreModel()
	for k, v := range m.changesets {
		c.changesets[k] = v // csModel values are never modified after creation
	}
	c.order = append([]core.ID(nil), m.order...)
	for k, v := range m.refs {
		c.refs[k] = v
	}
	for k, v := range m.reflog {
		c.reflog[k] = append([]refMove(nil), v...)
	}
	return c
}

// getRecoveryFixture builds the fixture on first use.
func getRecoveryFixture(t testing.TB) *recoveryFixture {
	recFixOnce.Do(func() { recFix, recFixErr = buildRecoveryFixture() })
	if recFixErr != nil {
		t.Fatalf("building the recovery fixture: %v", recFixErr)
	}
	return recFix
}

func buildRecoveryFixture() (*recoveryFixture, error) {
	fx := &recoveryFixture{fs: faultfs.NewMem(), modelAt: map[uint64]*storeModel{}}
	// No checkpoint after Create, so recovery scans every frame.
	fx.opts = core.Options{FS: fx.fs, CheckpointEvery: 1 << 20, InlineThreshold: inlineThreshold, Now: func() time.Time { return epoch }, LockTimeout: 5 * time.Second}
	s, err := core.Create(storeDir, fx.opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m := newStoreModel()
	record := func() error {
		info, err := s.Info()
		if err != nil {
			return err
		}
		fx.modelAt[info.DurableSeq] = m.clone()
		fx.lastSeq = info.DurableSeq
		return nil
	}
	if err := record(); err != nil {
		return nil, err
	}
	var head core.ID
	for i := 0; i < 6; i++ {
		data := bytes.Repeat([]byte{byte('a' + i)}, 10+i)
		if i == 3 {
			data = bytes.Repeat([]byte("large "), 30) // a loose object
		}
		changes := []core.Change{{Path: fmt.Sprintf("f%d", i%3), Data: data}}
		req := core.CommitRequest{Changes: changes, Agent: "fixture", Message: fmt.Sprint("fixture ", i), Time: epoch.Add(time.Duration(i) * time.Second), Advance: "main"}
		base := map[string]file{}
		if !head.IsZero() {
			req.Parents = []core.ID{head}
			base = m.tree(head)
		}
		id, err := s.Commit(req)
		if err != nil {
			return nil, err
		}
		files, key := applyChanges(base, changes)
		m.changesets[id] = &csModel{id: id, parents: req.Parents, files: files, gen: m.generation(req.Parents), agent: req.Agent, message: req.Message, time: req.Time, changeKey: key}
		m.order = append(m.order, id)
		m.moveRef("main", head, id)
		head = id
		if err := record(); err != nil {
			return nil, err
		}
		if i == 2 {
			if err := s.UpdateRefs(core.RefUpdate{Name: "dev", New: id}); err != nil {
				return nil, err
			}
			m.moveRef("dev", core.ID{}, id)
			if err := record(); err != nil {
				return nil, err
			}
		}
	}
	if err := fx.scanFrames(); err != nil {
		return nil, err
	}
	return fx, nil
}

// scanFrames reads the fixture's segment and its frames, with the store's
// key from the segment header, and checks they end at the last recorded
// sequence.
func (fx *recoveryFixture) scanFrames() error {
	var err error
	fx.segPath = path.Join(storeDir, "journal", journal.SegName(1))
	fx.seg, err = afero.ReadFile(fx.fs, fx.segPath)
	if err != nil {
		return err
	}
	var sid journal.StoreID
	copy(sid[:], fx.seg[16:32])
	cfg := journal.Config{FS: fx.fs, Dir: path.Join(storeDir, "journal"), Store: sid, Key: journal.DeriveKey(sid)}
	r := journal.NewReader(cfg)
	defer r.Close()
	first := fx.lastSeq
	for seq := range fx.modelAt {
		if seq < first {
			first = seq
		}
	}
	// The first recorded seq is the state right after Create; frames start
	// after it.
	if _, err := r.Scan(journal.Pos{Seg: 1, Off: journal.FirstFrame}, first+1, 0, func(f *journal.Frame) error {
		fx.frames = append(fx.frames, f)
		return nil
	}); err != nil {
		return err
	}
	if len(fx.frames) == 0 || fx.frames[len(fx.frames)-1].Seq != fx.lastSeq {
		return fmt.Errorf("scanned %d frames from seq %d, want them to end at seq %d", len(fx.frames), first+1, fx.lastSeq)
	}
	return nil
}

// openWithin opens the store on fsys, failing t if Open does not return
// within a bound (a hang is a failure, not a slow pass).
func openWithin(t *testing.T, dir string, o core.Options) (*core.Store, error) {
	t.Helper()
	type res struct {
		s   *core.Store
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := core.Open(dir, o)
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Open did not return within 30s")
		return nil, nil
	}
}

// stillUsable commits once more on a recovered store, takes a strict crash
// clone and checks the commit survived.
func stillUsable(fsys *faultfs.MemFS, s *core.Store, o core.Options) error {
	id, err := s.Commit(core.CommitRequest{Changes: []core.Change{{Path: "after", Data: []byte("recovery")}}, Agent: "fuzz", Message: "after recovery", Time: epoch})
	if err != nil {
		return fmt.Errorf("commit after recovery: %w", err)
	}
	o.FS = fsys.CrashClone(faultfs.Strict, 0)
	s2, err := core.Open(storeDir, o)
	if err != nil {
		return fmt.Errorf("open after a crash following the post-recovery commit: %w", err)
	}
	defer s2.Close()
	sn, err := s2.Snapshot()
	if err != nil {
		return err
	}
	if _, err := sn.Changeset(id); err != nil {
		return fmt.Errorf("the commit acknowledged after recovery is gone after a crash: %w", err)
	}
	return nil
}

// frameDamaged reports whether damage touched a frame's bytes: its header
// and payload, which the checksum covers, and its padding, which must be
// zero (core/journal's ReadFrame), so a flipped bit there makes the frame
// invalid too.
func frameDamaged(f *journal.Frame, damaged map[int64]bool) bool {
	for off := f.Pos.Off; off < f.Pos.Off+f.Size; off++ {
		if damaged[off] {
			return true
		}
	}
	return false
}

// checkDamagedRecovery applies damage (3-byte records: a 16-bit offset past
// the segment header, an xor mask) to the segment of a power-loss clone of
// the fixture and opens it. The claims: Open never panics or hangs; if an
// undamaged frame follows the first damaged one (its watermark proves the
// damaged frame was acknowledged), Open fails with ErrCorrupt naming the
// segment; otherwise it succeeds and shows exactly the frames before the
// first damaged one (a torn tail is repaired, not reported), and the store
// stays usable.
func checkDamagedRecovery(t *testing.T, fx *recoveryFixture, damage []byte, weaken testknobs.Weakening) error {
	fsys := fx.fs.CrashClone(faultfs.Strict, 0)
	seg := bytes.Clone(fx.seg)
	span := fx.frames[len(fx.frames)-1].End().Off + journal.FrameAlign - journal.FirstFrame
	damaged := map[int64]bool{}
	for i := 0; i+3 <= len(damage); i += 3 {
		off := journal.FirstFrame + int64(binary.LittleEndian.Uint16(damage[i:]))%span
		if off >= int64(len(seg)) || damage[i+2] == 0 {
			continue
		}
		seg[off] ^= damage[i+2]
		damaged[off] = true
	}
	for off := range damaged {
		if seg[off] == fx.seg[off] { // xor-ed twice back to the original
			delete(damaged, off)
		}
	}
	if err := afero.WriteFile(fsys, fx.segPath, seg, 0o644); err != nil {
		return err
	}
	firstBad, laterGood := uint64(0), false
	for _, f := range fx.frames {
		bad := frameDamaged(f, damaged)
		if bad && firstBad == 0 {
			firstBad = f.Seq
		} else if !bad && firstBad != 0 {
			laterGood = true
		}
	}
	o := fx.opts
	o.FS = fsys
	testknobs.Weaken(&o, weaken)
	s, err := openWithin(t, storeDir, o)
	if laterGood {
		if !errors.Is(err, core.ErrCorrupt) {
			if s != nil {
				s.Close()
			}
			return fmt.Errorf("frame %d is damaged and a later intact frame proves it was acknowledged, but Open returned %v, not ErrCorrupt", firstBad, err)
		}
		var ce *core.CorruptError
		if !errors.As(err, &ce) || ce.File == "" {
			return fmt.Errorf("corruption of frame %d reported without naming the file: %v", firstBad, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("damage only in the tail (first damaged frame %d of %d) must be repaired, but Open returned %v", firstBad, fx.lastSeq, err)
	}
	defer s.Close()
	want := fx.modelAt[fx.lastSeq]
	if firstBad != 0 {
		want = fx.modelAt[firstBad-1]
	}
	if want == nil {
		return fmt.Errorf("no model for seq %d", firstBad-1)
	}
	if err := checkAgainstModel(s, want); err != nil {
		return fmt.Errorf("after recovery from damage at frame %d: %w", firstBad, err)
	}
	return stillUsable(fsys, s, o)
}

// seedDamage returns damage inputs: none, one byte in each frame's header
// and payload, one in padding, and one past the last frame.
func seedDamage(fx *recoveryFixture) [][]byte {
	rec := func(off int64, x byte) []byte {
		b := make([]byte, 3)
		binary.LittleEndian.PutUint16(b, uint16(off-journal.FirstFrame))
		b[2] = x
		return b
	}
	out := [][]byte{nil}
	for _, f := range fx.frames {
		out = append(out, rec(f.Pos.Off+20, 0x01), rec(f.Pos.Off+int64(journal.FrameHeaderSize), 0x80))
	}
	last := fx.frames[len(fx.frames)-1]
	out = append(out, rec(last.Pos.Off+last.Size-1, 0xff), rec(last.End().Off+8, 0x5a))
	return out
}

// FuzzRecoverDamagedSegment: see checkDamagedRecovery.
func FuzzRecoverDamagedSegment(f *testing.F) {
	fx := getRecoveryFixture(f)
	for _, s := range seedDamage(fx) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, damage []byte) {
		if err := checkDamagedRecovery(t, fx, damage, 0); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzRecoverArbitrarySegment replaces everything after the segment header
// with arbitrary bytes. Open must not panic or hang, and whatever it
// accepts must be a prefix of the real history: the state after some frame,
// exactly, never a frame the fuzzer made up (it cannot forge checksums).
func FuzzRecoverArbitrarySegment(f *testing.F) {
	fx := getRecoveryFixture(f)
	body := fx.seg[journal.FirstFrame:fx.frames[len(fx.frames)-1].End().Off]
	f.Add([]byte{})
	f.Add(bytes.Clone(body))
	f.Add(bytes.Clone(body[:len(body)/2]))
	f.Add(append(bytes.Clone(body[:fx.frames[1].Pos.Off-journal.FirstFrame]), body[fx.frames[2].Pos.Off-journal.FirstFrame:]...))
	f.Fuzz(func(t *testing.T, body []byte) {
		fsys := fx.fs.CrashClone(faultfs.Strict, 0)
		seg := append(bytes.Clone(fx.seg[:journal.FirstFrame]), body...)
		if err := afero.WriteFile(fsys, fx.segPath, seg, 0o644); err != nil {
			t.Fatal(err)
		}
		o := fx.opts
		o.FS = fsys
		s, err := openWithin(t, storeDir, o)
		if err != nil {
			if !errors.Is(err, core.ErrCorrupt) {
				t.Fatalf("Open of an arbitrary segment: %v (want success or ErrCorrupt)", err)
			}
			return
		}
		defer s.Close()
		info, err := s.Info()
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		want := fx.modelAt[info.DurableSeq]
		if want == nil {
			t.Fatalf("the recovered store is durable through seq %d, which no prefix of the history reaches", info.DurableSeq)
		}
		if err := checkAgainstModel(s, want); err != nil {
			t.Fatalf("recovered through seq %d but differs from the history's prefix: %v", info.DurableSeq, err)
		}
		if err := stillUsable(fsys, s, o); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCanaryDamagedSegmentCatchesSkippedChecksums shows the damaged-segment
// property fails against the SkipChecksum canary: a flipped payload byte in the
// last frame is accepted instead of being cut as a torn tail.
func TestCanaryDamagedSegmentCatchesSkippedChecksums(t *testing.T) {
	fx := getRecoveryFixture(t)
	last := fx.frames[len(fx.frames)-1]
	dmg := make([]byte, 3)
	binary.LittleEndian.PutUint16(dmg, uint16(last.Pos.Off+int64(journal.FrameHeaderSize)+int64(len(last.Payload))-1-journal.FirstFrame))
	dmg[2] = 0x01
	if err := checkDamagedRecovery(t, fx, dmg, 0); err != nil {
		t.Fatalf("the correct store fails the property: %v", err)
	}
	err := checkDamagedRecovery(t, fx, dmg, testknobs.SkipChecksum)
	if err == nil {
		t.Fatal("the damaged-segment property passed against the SkipChecksum canary; it cannot catch an accepted bad frame")
	}
	logOnFailure(t, "as required, the property failed against SkipChecksum: %v", err)
}

// openReplaced replaces one file of a crash clone of the fixture with b
// and opens the store. model chooses the clone: ProcessCrash keeps the boot
// id, so a state file that still verifies is trusted; Strict changes it.
func openReplaced(t *testing.T, fx *recoveryFixture, name string, b []byte, model faultfs.Model) (*faultfs.MemFS, *core.Store, core.Options, error) {
	fsys := fx.fs.CrashClone(model, 0)
	if err := afero.WriteFile(fsys, path.Join(storeDir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	o := fx.opts
	o.FS = fsys
	s, err := openWithin(t, storeDir, o)
	return fsys, s, o, err
}

// FuzzOpenWithArbitraryStateFile replaces the never-synced state file with
// arbitrary bytes. The state file is only a hint (after a power loss it may
// hold anything), and every frame of the fixture was acknowledged and
// synced, so Open must succeed and show the whole history, whatever the
// bytes, with the boot id kept or changed.
func FuzzOpenWithArbitraryStateFile(f *testing.F) {
	fx := getRecoveryFixture(f)
	real, err := afero.ReadFile(fx.fs, path.Join(storeDir, "state"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(real), false)
	f.Add(bytes.Clone(real[:len(real)/2]), true)
	f.Add([]byte{}, false)
	f.Add(make([]byte, len(real)), true)
	f.Fuzz(func(t *testing.T, b []byte, powerLoss bool) {
		model := faultfs.ProcessCrash
		if powerLoss {
			model = faultfs.Strict
		}
		fsys, s, o, err := openReplaced(t, fx, "state", b, model)
		if err != nil {
			t.Fatalf("Open with a state file of %d arbitrary bytes (%v): %v", len(b), model, err)
		}
		defer s.Close()
		if err := checkAgainstModel(s, fx.modelAt[fx.lastSeq]); err != nil {
			t.Fatalf("with a state file of %d arbitrary bytes (%v), the store differs from its history: %v", len(b), model, err)
		}
		if err := stillUsable(fsys, s, o); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzOpenWithArbitraryCheckpoint replaces the checkpoint with arbitrary
// bytes. The checkpoint is durable data, so damage to it must fail closed
// (ErrCorrupt naming the file) unless the bytes still decode to a valid
// checkpoint, in which case the store must show the whole history.
func FuzzOpenWithArbitraryCheckpoint(f *testing.F) {
	fx := getRecoveryFixture(f)
	real, err := afero.ReadFile(fx.fs, path.Join(storeDir, "checkpoint"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bytes.Clone(real))
	f.Add(bytes.Clone(real[:len(real)-1]))
	f.Add([]byte{})
	f.Add(make([]byte, len(real)))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsys, s, o, err := openReplaced(t, fx, "checkpoint", b, faultfs.Strict)
		if err != nil {
			var ce *core.CorruptError
			if !errors.As(err, &ce) || ce.File == "" {
				t.Fatalf("Open with a checkpoint of %d arbitrary bytes: %v (want success or a *CorruptError naming the file)", len(b), err)
			}
			return
		}
		defer s.Close()
		if err := checkAgainstModel(s, fx.modelAt[fx.lastSeq]); err != nil {
			t.Fatalf("a checkpoint of %d arbitrary bytes was accepted and the store differs from its history: %v", len(b), err)
		}
		if err := stillUsable(fsys, s, o); err != nil {
			t.Fatal(err)
		}
	})
}
