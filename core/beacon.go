package core

import (
	"fmt"
	"hash/fnv"
	"os"
	"path"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core/vfs"
)

// Publish beacons. A writer queued to move a ref that other processes move
// too learns that its compare-and-swap has lost as soon as the winner
// publishes, not when the queue reaches it (a median of 24–31 ms later
// with 32 writers on one ref), and builds its next attempt while the
// winner syncs: half the lost attempts, and twice the publishes a second
// (docs/perf/contention.md, ninth session).
//
// Each ref hashes to one of beaconBuckets files in lockq/. A queued writer
// watches the beacons of the refs it moves (vfs.Watcher; inotify on Linux)
// and checks its compare-and-swap at each wake-up (lockq.Join's wake). A
// writer that came through the queue (or holds the writer lock across
// commits) writes one byte to the beacon of each ref it moved once it has
// published. A
// beacon holds nothing: its write is a hint to read the published end,
// never a statement of it, so a missed or a spurious one costs time, not
// correctness. Per-ref files keep a publish from waking the waiters of
// other refs: a single watch on the state file woke every queued process
// at every publish and every sync, and halved the throughput of 32 writers
// on a few shared refs.
//
// A writer that found the queue idle does not signal: nobody waited behind
// it, and a lone writer's commit keeps its calls.
const beaconBuckets = 16

func beaconBucket(ref string) int {
	h := fnv.New32a()
	h.Write([]byte(ref))
	return int(h.Sum32() % beaconBuckets)
}

func (s *Store) beaconPath(b int) string {
	return path.Join(s.dir, "lockq", fmt.Sprintf("pub%02d", b))
}

// watchRefs makes sure this process watches the beacons of refs and
// returns the channel every watch wakes, or nil if no watch could be made.
// A watch stays until Close: a process that raced for a ref once is likely
// to race for it again.
func (s *Store) watchRefs(refs []string) <-chan struct{} {
	s.beaconMu.Lock()
	defer s.beaconMu.Unlock()
	if s.noWatch {
		return nil
	}
	wr, ok := s.fs.(vfs.Watcher)
	if !ok {
		s.noWatch = true
		return nil
	}
	for _, ref := range refs {
		b := beaconBucket(ref)
		if _, ok := s.watches[b]; ok {
			continue
		}
		// The beacon must exist to be watched. Making it needs lockq/,
		// which the queue makes before anyone can wait in it.
		p := s.beaconPath(b)
		f, err := s.fs.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			continue
		}
		f.Close()
		w, err := wr.Watch(p)
		if err != nil {
			continue
		}
		if s.watches == nil {
			s.watches = map[int]vfs.Watch{}
			s.wake = make(chan struct{}, 1)
			s.watchDone = make(chan struct{})
		}
		s.watches[b] = w
		go forward(w.C(), s.wake, s.watchDone)
	}
	if s.watches == nil {
		return nil
	}
	return s.wake
}

// forward passes each wake-up of one watch on to the process's wake
// channel until done is closed.
func forward(from <-chan struct{}, to chan struct{}, done <-chan struct{}) {
	for {
		select {
		case <-from:
			select {
			case to <- struct{}{}:
			default:
			}
		case <-done:
			return
		}
	}
}

// signalMoves writes one byte to the beacon of each of refs that exists
// (a process waiting for a ref makes its beacon). It runs after the
// publish, so a waiter it wakes finds the move published. Its errors are
// not the commit's: the move is published whatever they are, and a waiter
// not woken learns at its turn.
func (s *Store) signalMoves(refs []string) {
	s.beaconMu.Lock()
	defer s.beaconMu.Unlock()
	if s.closed.Load() {
		return
	}
	var done [beaconBuckets]bool
	for _, ref := range refs {
		b := beaconBucket(ref)
		if done[b] {
			continue
		}
		done[b] = true
		f := s.beacons[b]
		if f == nil {
			var err error
			if f, err = s.fs.OpenFile(s.beaconPath(b), os.O_RDWR, 0); err != nil {
				continue
			}
			if s.beacons == nil {
				s.beacons = map[int]afero.File{}
			}
			s.beacons[b] = f
		}
		if _, err := f.WriteAt([]byte{1}, 0); err != nil {
			f.Close()
			delete(s.beacons, b)
		}
	}
}
