// Package core is the SwarmOps store: a local, durable, content-addressed
// version store that many processes on one host commit to at once.
//
// # What a Store is
//
// A store is a directory. Its source of truth is one journal of frames; a
// write transaction (a commit's new blobs, trees and changeset, and the ref
// moves that go with it) is one frame, made durable by one fdatasync that
// serves every frame appended before it. Refs and the object index are
// projections of the journal that every process rebuilds by replaying the
// frames after the last checkpoint. A Store is one process's handle on a
// store: it is safe for concurrent use by any number of goroutines, and any
// number of processes may hold one on the same directory.
//
// # Using it
//
// Create makes a store and Open opens one (recovering it first if a crash
// left it so). Commit writes a changeset, and with CommitRequest.Advance
// moves a ref to it in the same frame; UpdateRefs moves refs by
// compare-and-swap; Land merges a changeset onto a ref, retrying a lost
// race with an incremental re-merge. Every ref move records the agent and
// the operation that made it (Origin); Snapshot.Moves lists the moves (the
// operation log), and Undo reverses one by compare-and-swap. Protect marks
// refs (a name or a prefix) that only Land may move from then on. Snapshot
// returns a read-only view of everything durable, which takes no lock. Verify checks the store, Recover
// repairs it explicitly, Checkpoint writes a checkpoint now, and Close
// releases the handle:
//
//	s, err := core.Open(dir, core.Options{})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	id, err := s.Commit(core.CommitRequest{Parents: []core.ID{head}, Advance: "main",
//		Changes: []core.Change{{Path: "README", Data: []byte("hi")}}})
//	var ce *core.ConflictError
//	if errors.As(err, &ce) {
//		// main moved: ce.Current is its value; rebase and retry
//	}
//
// Every error satisfies errors.Is for at most one of the sentinels (ErrBusy,
// ErrConflict, ErrNotFound, ErrCorrupt, ...), and damage is a *CorruptError
// naming the file and the offset.
//
// # Guarantees
//
// Acknowledged means durable (C1): once a write returns nil, its effects
// survive a process crash, a power loss, and a power loss that tears the
// writes it interrupted.
//
// Atomic (C2): after any crash and recovery, each write is wholly visible or
// wholly absent, changeset, objects and ref moves together; nothing names
// an absent object.
//
// Prefix (C3): if B was acknowledged after A returned, B durable implies A
// durable.
//
// No undurable reads (C4): a Snapshot sees only what is durable, so
// nothing a reader saw can be taken away by a crash.
//
// Linearizable refs (C5): compare-and-swap on a ref is linearizable across
// processes; of writers racing from one value exactly one wins, and each
// loser gets a *ConflictError with a current value that is durable.
//
// Integrity (C6): every frame and object is checksummed; damage inside the
// durable prefix is reported as ErrCorrupt, never silently truncated, while
// a torn tail past it is repaired. Verify with deep re-hashes every object.
//
// Bounded recovery (C7): an open after a crash reads the checkpoint and at
// most about CheckpointEvery frames or CheckpointBytes bytes of journal,
// whatever the history's size; an open whose state is trusted reads a big
// (split) frame by its head, not its blobs.
//
// Fair and live (C8): writers are served in the order they came, and a
// writer gets ErrBusy only after LockTimeout; no lock is ever broken.
//
// Faults surfaced (C9): an I/O error, a full disk or a failed sync fails the
// operation with a typed error; a failed sync is never retried and reported
// as success, it poisons the handle and the next opener recovers.
//
// Crash-safe recovery (C10): recovery's every step is idempotent, so a
// crash during recovery leaves a store the next recovery handles alike.
//
// # The rooms
//
// Data flows one way: core, then its internal packages, then the formats
// (core/journal, core/objects, core/index, core/refs), then core/vfs, the
// one filesystem seam every I/O goes through.
//
//	internal/pipeline   batches a process's transactions, early conflicts
//	internal/writelock  the writer queue (internal/lockq), LOCK, kept places
//	internal/groupsync  the sync step: one fdatasync for every process
//	internal/state      the shared end and durable records
//	internal/txn        a frame's transaction payload
//	internal/treebuild  a commit's trees and objects, built outside locks
//	internal/loose      large blobs in files of their own
//	internal/proj       the projection: tail index, index runs, refs
//	internal/ckpt       the checkpoint file, and when to write one
//	internal/compact    merging index runs apart from checkpoints
//	internal/recovery   the replay, fail-closed checks and tail cut
//	internal/reflog     older ref moves, out of the checkpoint
//	internal/cscache    changesets snapshots have read
//	internal/deepcheck  the object half of a deep Verify
//	internal/merge      Land's three-way merge of paths (contents: core/textmerge)
//	internal/errs       the error values core re-exports
//	internal/lockorder  the lock order, checked in a lockorder build
//
// # Lock order
//
// A goroutine takes the store's locks in this order, outermost first, and
// never takes one while it holds a later one. The file locks are shared by
// every process on the store; the mutexes are one handle's.
//
//	rank        lock                 guards
//	GC          GCLOCK               garbage collection (one process)
//	(none)      QUEUELOCK.<hash>     one merge-queue runner per target (LockQueue);
//	            outermost, taken by package mergequeue, never under a store lock
//	Land        Store lands.by[ref]  this handle's lands onto one ref, one at a time
//	Guard       lockq/GUARD          taking a ticket (held microseconds)
//	Ticket      lockq/t<number>      a place in the writer queue
//	Lock        LOCK                 appending: the end record, the journal's end
//	Hold        writelock hold.mu    sections run under a writer lock kept by Hold
//	Merge       MERGELOCK            compaction (one process)
//	Checkpoint  CKPTLOCK             writing or installing a checkpoint
//	Sync        SYNCLOCK             the durable record, the sync, recovery
//	SyncHandle  groupsync handle.mu  the segment handle kept for syncs
//	Projection  Store view.mu        the projection, its reader, its epoch
//	Cache       cscache mu           the snapshot changeset cache
//	Leaf        pipeline queue.mu and owned.mu, writelock place.mu,
//	            treebuild Recent.mu, ckpt Scheduler failure.mu:
//	            nothing is taken under them
//
// A lock that is only tried (TryLock, a file lock with no wait) cannot
// deadlock and may be taken out of order. A ticket kept for a retry belongs
// to the process, not to a goroutine. The mutexes inside core/index,
// core/journal, core/vfs and internal/lockq are their packages' own and
// are taken last. Atomics (the projection's mark, the poisoned and closed
// flags, checkpoint progress) take no lock.
//
// In a build with the lockorder tag, every mutex above and every file lock
// records, per goroutine, what it holds, and a lock taken against this
// table panics (internal/lockorder); go test -tags lockorder ./core/...
// runs the package's tests that way, and the ordinary test run runs that
// command (TestEveryLockIsTakenInTheDocumentedOrder).
package core
