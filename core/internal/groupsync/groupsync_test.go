package groupsync

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/state"
	"github.com/swarmops/swarmops/core/journal"
	"github.com/swarmops/swarmops/faultfs"
)

// fixture is a store directory with a journal segment, its state records,
// and frames appended to it as writers would (without a sync).
type fixture struct {
	fs    *faultfs.MemFS
	jcfg  journal.Config
	st    *state.File
	boot  [16]byte
	w     *journal.Writer
	end   state.Rec
	epoch uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := faultfs.NewMem()
	if err := m.MkdirAll("/s/journal", 0o755); err != nil {
		t.Fatal(err)
	}
	var id journal.StoreID
	id[0] = 1
	key := journal.DeriveKey(id)
	jcfg := journal.Config{FS: m, Dir: "/s/journal", Store: id, Key: key, SegmentSize: 1 << 20}
	w := journal.NewWriter(jcfg)
	if err := w.CreateSegment(1, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := jcfg.Sync(1, 1); err != nil {
		t.Fatal(err)
	}
	f := &fixture{fs: m, jcfg: jcfg, st: state.New(m, "/s/state", key), boot: state.BootHash("boot"), w: w, epoch: 7}
	f.end = state.Rec{Epoch: f.epoch, Pos: journal.Pos{Seg: 1, Off: journal.FirstFrame}, NextSeq: 1, Boot: f.boot}
	for _, kind := range []uint32{state.Durable, state.End} {
		if err := f.st.Write(kind, f.end); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// append appends a frame and publishes the new end, as a writer does
// under LOCK; it returns the frame's sequence number.
func (f *fixture) append(t *testing.T) uint64 {
	t.Helper()
	seq := f.end.NextSeq
	payload := []byte("frame")
	frame := journal.EncodeFrame(f.jcfg.Key, 1, seq, 0, payload, journal.PayloadDigest(payload))
	at, err := f.w.Append(f.end.Pos, seq, frame)
	if err != nil {
		t.Fatal(err)
	}
	f.end.Pos, f.end.NextSeq = journal.Pos{Seg: at.Seg, Off: at.Off + int64(len(frame))}, seq+1
	if err := f.st.Write(state.End, f.end); err != nil {
		t.Fatal(err)
	}
	return seq
}

func (f *fixture) syncer(fsys *faultfs.Counting, poisoned *atomic.Bool) *Syncer {
	jcfg := f.jcfg
	jcfg.FS = fsys
	return New(Config{FS: fsys, Dir: "/s", State: state.New(fsys, "/s/state", f.jcfg.Key), Boot: f.boot,
		Journal: jcfg, LockTimeout: time.Second, Poisoned: poisoned})
}

// TestOneSyncServesEveryFrameAppendedBeforeIt: two handles (processes, in
// effect) each append a frame; the first to sync makes both durable with
// one fdatasync, and the second finds its frame covered and returns
// without syncing. It fails if the sync step syncs only up to its own
// frame, or stops reading the durable record first.
func TestOneSyncServesEveryFrameAppendedBeforeIt(t *testing.T) {
	f := newFixture(t)
	c := faultfs.NewCounting(f.fs)
	var p1, p2 atomic.Bool
	a, b := f.syncer(c, &p1), f.syncer(c, &p2)
	defer a.Close()
	defer b.Close()
	s1, s2 := f.append(t), f.append(t)
	c.Reset()
	if err := a.To(s1, f.epoch, false); err != nil {
		t.Fatal(err)
	}
	if err := b.To(s2, f.epoch, true); err != nil {
		t.Fatal(err)
	}
	if n := c.Count(faultfs.OpDatasync); n != 1 {
		t.Fatalf("%d datasyncs for two frames appended before the first sync; want 1", n)
	}
	dur, ok, err := f.st.Read(state.Durable)
	if err != nil || !ok || dur.NextSeq != s2+1 {
		t.Fatalf("durable record %+v (%v, %v); want it past frame %d", dur, ok, err, s2)
	}
}

// TestAFailedSyncPoisonsAndIsNeverRetried: a failed fdatasync fails the
// sync step, sets the poisoned flag and marks the durable record; the next
// sync step, of any handle, fails without syncing or publishing, leaving
// the frames past the durable position to recovery.
func TestAFailedSyncPoisonsAndIsNeverRetried(t *testing.T) {
	f := newFixture(t)
	inj := faultfs.NewInjecting(f.fs, faultfs.MustParseRule("op=datasync,nth=1,err=eio"))
	c := faultfs.NewCounting(inj)
	var poisoned atomic.Bool
	s := f.syncer(c, &poisoned)
	defer s.Close()
	seq := f.append(t)
	if err := s.To(seq, f.epoch, false); err == nil {
		t.Fatal("the sync step succeeded through a failed fdatasync")
	}
	if !poisoned.Load() {
		t.Fatal("a failed fdatasync did not set the poisoned flag")
	}
	c.Reset()
	var other atomic.Bool
	s2 := f.syncer(c, &other)
	defer s2.Close()
	if err := s2.To(seq, f.epoch, false); !errors.Is(err, errs.ErrIO) {
		t.Fatalf("a later sync step of a frame past a failed sync: %v; want ErrIO", err)
	}
	if n := c.Count(faultfs.OpDatasync); n != 0 {
		t.Fatalf("the later sync step made %d datasyncs; want none", n)
	}
	dur, ok, err := f.st.Read(state.Durable)
	if err != nil || !ok || dur.Flags&state.FlagPoisoned == 0 || dur.NextSeq > seq {
		t.Fatalf("durable record %+v (%v, %v); want it poisoned, before frame %d", dur, ok, err, seq)
	}
}
