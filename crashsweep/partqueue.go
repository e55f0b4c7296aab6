package crashsweep

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/mergequeue"
)

// The merge-queue part crashes, at every filesystem call, a gated land
// (mergequeue.Land) of a fourth change onto main with three entries
// already queued (refs queue/main/N: what agents that queued and died
// leave), one of which fails the check: the batch of four fails, is
// searched for the breaker, three land and one is ejected. The check is
// the test hook testknobs.QueueCheck (no scratch tree, no process): it
// fails a tree holding a path that starts with "BAD". Its oracle, on the
// process-crash and the strict clone of each crashed state:
//
//   - every value main took after the base is a tree the check passes:
//     the queue never publishes an untested tree;
//   - the same land, run again uncrashed, lands, and then main holds
//     exactly the three good changes and no entry is pending: no landed
//     change is lost and no entry forgotten;
//   - Verify(deep) is clean.
//
// It is the subprocess sweep's merge-queue part, in-process, so that the
// canary queue-two-frames reaches it.

const queueStore = "/q"

// queueWant is what main holds once the three good changes landed.
var queueWant = []string{"README", "g1.txt", "g2.txt", "g3.txt"}

var queueHookOnce sync.Once

// queueCheckFails is the part's check: a tree fails when a path starts
// with "BAD".
func queueCheckFails(paths []string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return strings.HasPrefix(p, "BAD") })
}

// queueSetup makes the store: main at a base, four changes on it (the
// third breaks the check), the first three queued for main. It returns
// the filesystem and the last change, which the crashed land queues.
func queueSetup() (*faultfs.MemFS, core.ID, error) {
	m := faultfs.NewMem()
	clock := time.Unix(1_700_000_000, 0)
	s, err := core.Create(queueStore, core.Options{FS: m, InlineCheckpoint: true, Now: func() time.Time { return clock }})
	if err != nil {
		return nil, core.ID{}, err
	}
	defer s.Close()
	base, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("README", "project\n")}, Advance: "main"})
	if err != nil {
		return nil, core.ID{}, err
	}
	var last core.ID
	for i, file := range []string{"g1.txt", "g2.txt", "BAD-q", "g3.txt"} {
		clock = clock.Add(time.Second)
		if last, err = s.Commit(core.CommitRequest{Parents: []core.ID{base}, Changes: []core.Change{put(file, "x\n")}}); err != nil {
			return nil, core.ID{}, err
		}
		if i < 3 {
			if err := s.UpdateRefs(core.RefUpdate{Name: fmt.Sprintf("%smain/%020d", mergequeue.PendingPrefix, i+1), New: last}); err != nil {
				return nil, core.ID{}, err
			}
		}
	}
	return m, last, s.Close()
}

func queuePart(_ context.Context, pc *partRun) error {
	queueHookOnce.Do(func() {
		testknobs.QueueCheck = func(_ string, paths []string) (int, string) {
			if queueCheckFails(paths) {
				return 1, "bad\n"
			}
			return 0, ""
		}
	})
	base, change, err := queueSetup()
	if err != nil {
		return fmt.Errorf("merge-queue part setup: %w", err)
	}
	land := func(fsys vfs.FS) error {
		s, err := core.Open(queueStore, core.Options{FS: fsys, InlineCheckpoint: true})
		if err != nil {
			return err
		}
		o := mergequeue.Options{Check: "(testknobs.QueueCheck)", Agent: "runner"}
		testknobs.Weaken(&o, pc.cfg.Weaken)
		out, err := mergequeue.Land(s, change, "main", o)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err == nil && !out.Landed {
			err = fmt.Errorf("the change was not landed: %+v", out)
		}
		return err
	}
	done := base.CrashClone(faultfs.ProcessCrash, 0)
	if err := land(done); err != nil {
		return fmt.Errorf("merge-queue part: the uncrashed land: %w", err)
	}
	if msg := queueOracle(done, true); msg != "" {
		return pc.violation("queue", "land --check", 0, "process", "%s", msg)
	}
	const name = "land --check"
	return pc.everyCall(name, base, land, func(at int64, m *faultfs.MemFS) error {
		for _, model := range []faultfs.Model{faultfs.ProcessCrash, faultfs.Strict} {
			pc.rep.States++
			c := m.CrashClone(model, 0)
			if msg := queueOracle(c, false); msg != "" {
				return pc.violation("queue", name, at, model.String(), "%s", msg)
			}
			if err := land(c); err != nil {
				return pc.violation("queue", name, at, model.String(), "the land run again after the crash failed: %v", err)
			}
			if msg := queueOracle(c, true); msg != "" {
				return pc.violation("queue", name, at, model.String(), "after the land run again: %s", msg)
			}
		}
		return nil
	})
}

// queueOracle checks the store on fsys: every value main took after its
// first is a tree the check passes; with finished, main holds exactly
// queueWant, no entry is pending and a deep verify is clean. It returns
// what is wrong ("" when nothing).
func queueOracle(fsys vfs.FS, finished bool) string {
	s, err := core.Open(queueStore, core.Options{FS: fsys, InlineCheckpoint: true})
	if err != nil {
		return "the store does not open: " + err.Error()
	}
	defer s.Close()
	sn, err := s.Snapshot()
	if err != nil {
		return err.Error()
	}
	moves, err := sn.RefLog("main")
	if err != nil {
		return "main's log: " + err.Error()
	}
	for _, mv := range moves[1:] {
		paths, err := flatPaths(sn, mv.New)
		if err != nil {
			return err.Error()
		}
		if queueCheckFails(paths) {
			return fmt.Sprintf("main moved to %s, whose tree %v fails the check", mv.New, paths)
		}
	}
	if !finished {
		return ""
	}
	refs, err := sn.Refs()
	if err != nil {
		return err.Error()
	}
	for _, r := range refs {
		if strings.HasPrefix(r.Name, mergequeue.PendingPrefix) {
			return fmt.Sprintf("entry %s is still pending", r.Name)
		}
	}
	head, err := sn.Ref("main")
	if err != nil {
		return err.Error()
	}
	got, err := flatPaths(sn, head)
	if err != nil {
		return err.Error()
	}
	if !slices.Equal(got, queueWant) {
		return fmt.Sprintf("main holds %v, want %v", got, queueWant)
	}
	rep, err := s.Verify(true, nil)
	if err != nil {
		return "Verify(deep): " + err.Error()
	}
	if len(rep.Problems) > 0 {
		return fmt.Sprintf("Verify(deep) found %d problems, the first: %v", len(rep.Problems), rep.Problems[0])
	}
	return ""
}

// flatPaths lists the paths of id's tree, sorted.
func flatPaths(sn *core.Snapshot, id core.ID) ([]string, error) {
	flat, err := sn.Flatten(id)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(flat))
	for p := range flat {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}
