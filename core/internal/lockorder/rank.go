// Package lockorder is the order in which the store takes its locks, and,
// in a build with the lockorder tag, a checker of it: every mutex of the
// store (Mutex, RWMutex) and every file lock taken through a filesystem
// wrapped by WrapFS records, per goroutine, the locks it holds, and taking
// one whose rank is not above every rank held panics, naming both. A
// normal build compiles the wrappers down to the plain sync types and the
// unwrapped filesystem.
//
// The ranks, outermost first (core's package documentation has the table
// with what each lock guards):
//
//	GC          GCLOCK: one garbage collection
//	Land        core's per-target land mutex: one land onto a ref at a time
//	Guard       lockq/GUARD: taken for a few microseconds to take a ticket
//	Ticket      lockq/t…: a place in the writer queue; a waiter takes the
//	            ticket ahead of its own to wait for it
//	Lock        LOCK: the writer lock
//	Hold        writelock's hold.mu: sections run under a held writer lock
//	Merge       MERGELOCK: one compacting process
//	Checkpoint  CKPTLOCK: one process writing or installing a checkpoint
//	Sync        SYNCLOCK: the sync step, and recovery (under LOCK)
//	SyncHandle  groupsync's handle.mu: the kept segment handle
//	Projection  core's view.mu: the projection, its reader and epoch
//	Cache       cscache's mu: the snapshot changeset cache
//	Leaf        the pipeline's queue.mu and owned.mu, writelock's
//	            place.mu, treebuild.Recent's mu, the checkpoint
//	            scheduler's failure.mu: nothing is taken under them
//
// A mutex gets its rank where it is declared, as a type argument:
// lockorder.Mutex[lockorder.Projection]. A file lock's rank is its name's
// (FileRank).
//
// A lock tried without waiting (TryLock, or a file lock with timeout 0)
// cannot deadlock and is not checked, but is recorded: what is taken under
// it is. A queue ticket (and GUARD) is checked when taken, against what the
// goroutine holds, but not recorded as held: a place kept for a retry
// outlives the goroutine that queued, and another goroutine waits from it
// or gives it up, so a ticket belongs to the process, not to a goroutine.
package lockorder

import (
	"path"
	"strings"
)

// Rank is a lock's place in the order: a goroutine holding a lock of rank
// r may take only locks of rank above r.
type Rank int

// The ranks, outermost first.
const (
	unranked Rank = iota
	GCRank
	LandRank
	GuardRank
	TicketRank
	LockRank
	HoldRank
	MergeRank
	CheckpointRank
	SyncRank
	SyncHandleRank
	ProjectionRank
	CacheRank
	LeafRank
)

// Ranker is a rank marker: the type argument of Mutex and RWMutex that
// gives a mutex its rank where it is declared.
type Ranker interface{ Rank() Rank }

// The rank markers of the store's mutexes.
type (
	Land       struct{} // core's per-target land mutex
	Hold       struct{} // writelock's hold.mu
	SyncHandle struct{} // groupsync's handle.mu
	Projection struct{} // core's view.mu
	Cache      struct{} // cscache's mu
	Leaf       struct{} // a mutex nothing is taken under
)

func (Land) Rank() Rank       { return LandRank }
func (Hold) Rank() Rank       { return HoldRank }
func (SyncHandle) Rank() Rank { return SyncHandleRank }
func (Projection) Rank() Rank { return ProjectionRank }
func (Cache) Rank() Rank      { return CacheRank }
func (Leaf) Rank() Rank       { return LeafRank }

var names = [...]string{"unranked", "GC", "Land", "Guard", "Ticket", "Lock", "Hold", "Merge", "Checkpoint", "Sync",
	"SyncHandle", "Projection", "Cache", "Leaf"}

func (r Rank) String() string {
	if r < 0 || int(r) >= len(names) {
		return "Rank(?)"
	}
	return names[r]
}

// Ranks lists every rank, outermost first.
func Ranks() []Rank {
	out := make([]Rank, 0, len(names)-1)
	for r := GCRank; r <= LeafRank; r++ {
		out = append(out, r)
	}
	return out
}

// FileRank returns the rank of the lock file name (a path), and false for
// a file that is none of the store's locks.
func FileRank(name string) (Rank, bool) {
	switch b := path.Base(name); b {
	case "GUARD":
		return GuardRank, path.Base(path.Dir(name)) == "lockq"
	case "LOCK":
		return LockRank, true
	case "MERGELOCK":
		return MergeRank, true
	case "GCLOCK":
		return GCRank, true
	case "CKPTLOCK":
		return CheckpointRank, true
	case "SYNCLOCK":
		return SyncRank, true
	default:
		if path.Base(path.Dir(name)) == "lockq" && isTicket(b) {
			return TicketRank, true
		}
	}
	return unranked, false
}

// isTicket reports whether b names a lockq ticket: "t" and 20 digits.
func isTicket(b string) bool {
	if len(b) != 21 || !strings.HasPrefix(b, "t") {
		return false
	}
	for _, c := range b[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
