// Package mergequeue is the gated merge queue: a land that publishes its
// target only after a check command passed on the very tree it publishes.
//
// The queue lives in the store, so every process that lands onto a target
// shares it:
//
//	queue/TARGET/N       a pending land: the change to land (N: 20 digits,
//	                     the arrival order)
//	queue-done/TARGET/N  its outcome, once decided: a changeset holding
//	                     N.json (landed or ejected, why, the check's exit
//	                     status) and N.out (the check's output tail)
//
// Land records the entry (a ref create: durable, journaled, seen by every
// process), then either finds its outcome or takes the target's runner
// lock (core.Store.LockQueue, released by its holder's death). The holder
// runs every entry pending at that moment as one batch: it stacks them
// onto the target's head with core.Store.MergeOnto (nothing published),
// checks out the tip in a scratch directory, runs the check there, and
// on exit status 0 publishes in ONE UpdateRefs frame: the target moves
// from the head it merged onto to the tip, and every entry of the batch
// moves from queue/ to queue-done/. When the tip fails, a binary search
// over the prefixes of the stack finds the first change whose prefix
// fails: the prefix before it is published as above, the change is
// ejected (its entry moves to queue-done/ with that check's output), and
// the changes after it are stacked onto the new head and checked as a
// batch again. A change that conflicts while stacked is ejected at once
// with the conflict.
//
// Crash safety follows from the one frame: the target only ever moves to
// a tip whose tree a check passed, together with the removal of the
// entries it lands; a crash before that frame leaves every entry queued
// for the next runner (the merges it had stacked stay unreferenced), and
// a crash after it has landed the whole batch. An entry's owner reports
// "landed" only after reading a queue-done outcome written in that same
// frame, so every acknowledged land is in the target. A land already on
// the target (core.Store.Land's delta-hash rule) lands as a no-op, so a
// land retried after a crash never applies a change twice.
package mergequeue
