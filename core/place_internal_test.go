package core

import (
	"errors"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/lockq"
	"github.com/swarmops/swarmops/core/internal/writelock"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// tickets counts the live tickets of the writer queue.
func tickets(t *testing.T, m vfs.FS) int {
	t.Helper()
	n, err := lockq.New(m, "/s/"+writelock.QueueDir).Len()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitTickets waits until the writer queue holds n tickets.
func waitTickets(t *testing.T, m vfs.FS, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); tickets(t, m) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("the writer queue holds %d tickets, want %d", tickets(t, m), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// placeRace sets up a writer, loser, that queues to advance main from a and
// loses it in the queue to the holder of the writer lock, which publishes b.
// It returns once loser has its ConflictError.
func placeRace(t *testing.T, m vfs.FS, retryPlace time.Duration) (holder, loser *Store, b ID) {
	return placeRaceWith(t, m, retryPlace, func(loser *Store, a ID) func() error {
		return func() error {
			_, err := loser.Commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "f", Data: []byte("l")}}, Advance: "main"})
			return err
		}
	})
}

// placeRaceWith is placeRace with the loser's operation: lose, given the
// value of main the operation expects, prepares it and returns it.
func placeRaceWith(t *testing.T, m vfs.FS, retryPlace time.Duration, lose func(loser *Store, a ID) func() error) (holder, loser *Store, b ID) {
	t.Helper()
	var err error
	if holder, err = Create("/s", Options{FS: m}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	if loser, err = Open("/s", Options{FS: m, RetryPlace: retryPlace}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loser.Close() })
	a, err := holder.Commit(CommitRequest{Changes: []Change{{Path: "f", Data: []byte("a")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	op := lose(loser, a)
	release, err := holder.writer.Hold()
	if err != nil {
		t.Fatal(err)
	}
	// The lone holder took LOCK without queueing; a ticket of its own
	// stands for a writer queued ahead of the loser.
	ahead, err := holder.writer.Queue().Take(time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	go func() { lost <- op() }()
	waitTickets(t, m, 2) // the holder's, and the loser's behind it
	if b, err = holder.Commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "f", Data: []byte("b")}}, Advance: "main"}); err != nil {
		t.Fatal(err)
	}
	release()
	ahead.Leave()
	var ce *ConflictError
	if err := <-lost; !errors.As(err, &ce) || ce.Current != b {
		t.Fatalf("the queued writer's advance from a: %v; want a conflict with current %s", err, errs.Short(b))
	}
	return holder, loser, b
}

// queueBehind starts a commit of another handle, which moves ref "other",
// and returns once it queues behind the place placeRace left; the channel
// gets its changeset when it is done.
func queueBehind(t *testing.T, m vfs.FS) <-chan ID {
	t.Helper()
	other := MustOpen(t, "/s", Options{FS: m})
	late := make(chan ID, 1)
	go func() {
		id, err := other.Commit(CommitRequest{Changes: []Change{{Path: "g", Data: []byte("o")}}, Advance: "other"})
		if err != nil {
			t.Error(err)
		}
		late <- id
	}()
	waitTickets(t, m, 2)
	return late
}

// frameOf returns the sequence number of the frame that brought changeset
// id, as s sees it.
func frameOf(t *testing.T, s *Store, id ID) uint64 {
	t.Helper()
	_, seq, err := s.readObjectSeq(id, objects.KindChangeset, ^uint64(0), true)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// TestARetryKeepsItsPlaceInTheQueue: a writer that loses its compare-and-
// swap while it queues keeps its ticket, so that its retry goes ahead of a
// writer that queued after the loss. Without the kept place the other
// writer, which nobody holds up, publishes first.
func TestARetryKeepsItsPlaceInTheQueue(t *testing.T) {
	m := faultfs.NewMem()
	holder, loser, b := placeRace(t, m, time.Minute)
	if n := tickets(t, m); n != 1 {
		t.Fatalf("%d tickets after the loss; want 1, the loser's kept place", n)
	}
	late := queueBehind(t, m)
	retry, err := loser.Commit(CommitRequest{Parents: []ID{b}, Changes: []Change{{Path: "f", Data: []byte("l")}}, Advance: "main"})
	if err != nil {
		t.Fatal(err)
	}
	rs, os := frameOf(t, holder, retry), frameOf(t, holder, <-late)
	if rs > os {
		t.Fatalf("the retry was published in frame %d, after frame %d of the writer that queued after its loss", rs, os)
	}
}

// TestAKeptPlaceIsGivenUp: a place no retry comes back for is given up
// after RetryPlace, and the writers behind it go on; without that, the
// writer queued behind it gets ErrBusy at its lock timeout.
func TestAKeptPlaceIsGivenUp(t *testing.T) {
	m := faultfs.NewMem()
	_, _, _ = placeRace(t, m, 20*time.Millisecond)
	other := MustOpen(t, "/s", Options{FS: m, LockTimeout: 2 * time.Second})
	if _, err := other.Commit(CommitRequest{Changes: []Change{{Path: "g", Data: []byte("o")}}, Advance: "other"}); err != nil {
		t.Fatalf("a writer behind a place nobody came back for: %v", err)
	}
	waitTickets(t, m, 0)
}

// TestClosingGivesUpAKeptPlace: Close leaves the queue it kept a place in.
func TestClosingGivesUpAKeptPlace(t *testing.T) {
	m := faultfs.NewMem()
	_, loser, _ := placeRace(t, m, time.Minute)
	if err := loser.Close(); err != nil {
		t.Fatal(err)
	}
	if n := tickets(t, m); n != 0 {
		t.Fatalf("%d tickets after the loser closed; want 0", n)
	}
}

// TestABareRefUpdateKeepsNoPlace: a ref update that loses in the queue
// leaves it. Its retry usually comes after a new commit, and a place kept
// for it would hold up the queue until given up: commit then ref CAS ran
// at a fifth of its publishes per second with the place kept.
func TestABareRefUpdateKeepsNoPlace(t *testing.T) {
	m := faultfs.NewMem()
	placeRaceWith(t, m, time.Minute, func(loser *Store, a ID) func() error {
		c, err := loser.Commit(CommitRequest{Parents: []ID{a}, Changes: []Change{{Path: "f", Data: []byte("c")}}})
		if err != nil {
			t.Fatal(err)
		}
		return func() error { return loser.UpdateRefs(RefUpdate{Name: "main", Old: a, New: c}) }
	})
	if n := tickets(t, m); n != 0 {
		t.Fatalf("%d tickets after a ref update lost in the queue; want 0", n)
	}
}

// TestAPlaceServesOnlyItsRetry: a place kept for a commit advancing main is
// given up when the process's next transaction moves another ref, which
// then queues behind a writer that came after the loss. Without that it
// would take the place and go first.
func TestAPlaceServesOnlyItsRetry(t *testing.T) {
	m := faultfs.NewMem()
	holder, loser, _ := placeRace(t, m, time.Minute)
	late := queueBehind(t, m)
	side, err := loser.Commit(CommitRequest{Changes: []Change{{Path: "h", Data: []byte("s")}}, Advance: "side"})
	if err != nil {
		t.Fatal(err)
	}
	ss, os := frameOf(t, holder, side), frameOf(t, holder, <-late)
	if ss < os {
		t.Fatalf("a commit on another ref took the place kept for main: published in frame %d, before frame %d of the writer queued behind the place", ss, os)
	}
}
