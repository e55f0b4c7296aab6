// Package testknobs holds the store's test-only canaries and hooks, out of
// core's API. It is internal to the module: core's tests, crashsweep,
// cmd/crashsim, props and cmd/swarmops's test hook reach it, and so does
// a swarmops binary built with the swarmops_canary tag, which sets the
// canaries SWARMOPS_TEST_CANARY names (cmd/swarmops/canary.go); a user of
// core cannot, and a normal build reads no such variable, so no user can
// weaken a store.
//
// The canaries each break one durability rule on purpose, so that the crash
// sweep and the property tests can show they would notice: a check that
// cannot fail proves nothing. Weaken sets them on a core.Options (or a
// worktree.Options, mergequeue.Options or gitx.ExportOptions, for the
// canaries of those paths, or a server.Config for the server's), through
// a function each package registers when it is initialized.
package testknobs

import (
	"fmt"
	"sort"
	"strings"
)

// Weakening is a set of canaries. The zero value is the correct store.
type Weakening uint32

// The canaries.
const (
	SkipDatasync        Weakening = 1 << iota // never fdatasync the journal
	AckBeforeSync                             // acknowledge, then sync
	SkipDirSync                               // skip SyncDir when a segment or loose object is created
	SkipChecksum                              // do not verify checksums on read or recovery
	EarlyDurable                              // publish the durable offset before the sync
	FalseFresh                                // write every frame as fresh, even one whose changeset the store holds
	SkipReflogSync                            // name a reflog chunk in the checkpoint before it is durable
	DropProtections                           // write checkpoints without the protected ref patterns
	QueueSkipWaiter                           // a writer-queue waiter ignores the ticket just ahead of it
	CASIfExists                               // a ref compare-and-swap checks the expected value only when the ref exists
	LandNoFastForward                         // Land merges where it should fast-forward
	GCIgnoresLeases                           // gc keeps nothing for live leases
	GCSkipsRebuild                            // a commit built before a gc's index was installed is appended as built
	UpdateTrustsStat                          // a work tree's update records a merged file's stat data as clean
	QueueTwoFrames                            // the merge queue publishes its entries' outcomes and the target's move in two frames
	ExportTrustsMap                           // an export builds on the commits its mapping file names without checking git has them
	ServerEarlyReply                          // the server replies success to a request once it has read its stdin, before the command returns
	DirsRecordUntracked                       // a work tree's walk records a directory holding untracked names as holding only tracked ones
)

// ServerCanaries are the canaries of the server (server.Config); the
// others weaken the store and the paths built on it.
const ServerCanaries = ServerEarlyReply

// names maps each canary to the name crashsim and SWARMOPS_TEST_CANARY
// use (crashsweep.Canaries lists the same names, with why each matters).
var names = map[string]Weakening{
	"skip-datasync": SkipDatasync, "ack-before-sync": AckBeforeSync, "skip-dirsync": SkipDirSync,
	"skip-checksum": SkipChecksum, "early-durable": EarlyDurable, "false-fresh": FalseFresh,
	"skip-reflog-sync": SkipReflogSync, "drop-protections": DropProtections,
	"queue-skip-waiter": QueueSkipWaiter, "cas-if-exists": CASIfExists, "land-no-ff": LandNoFastForward,
	"gc-ignores-leases": GCIgnoresLeases, "gc-skips-rebuild": GCSkipsRebuild,
	"update-trusts-stat": UpdateTrustsStat, "queue-two-frames": QueueTwoFrames,
	"export-trusts-map": ExportTrustsMap, "server-early-reply": ServerEarlyReply,
	"dirs-record-untracked": DirsRecordUntracked,
}

// Parse maps a comma-separated list of canary names to their weakening.
// An empty or unknown name is an error naming the known ones.
func Parse(list string) (Weakening, error) {
	var w Weakening
	for _, n := range strings.Split(list, ",") {
		b, ok := names[strings.TrimSpace(n)]
		if !ok {
			known := make([]string, 0, len(names))
			for k := range names {
				known = append(known, k)
			}
			sort.Strings(known)
			return 0, fmt.Errorf("unknown canary %q (known: %s)", n, strings.Join(known, ", "))
		}
		w |= b
	}
	return w, nil
}

// attach holds, per package that has canaries, the function that sets
// them on its options type; each package registers its own.
var attach []func(opts any, w Weakening) bool

// RegisterOptions is how a package registers its options type O, whose
// canaries live in an unexported field that field returns: core for
// core.Options, worktree for worktree.Options, mergequeue for
// mergequeue.Options, gitx for gitx.ExportOptions, server for
// server.Config. It is called once per
// package, by its initialization.
func RegisterOptions[O any](field func(*O) *Weakening) {
	attach = append(attach, func(opts any, w Weakening) bool {
		o, ok := opts.(*O)
		if ok {
			*field(o) = w
		}
		return ok
	})
}

// Weaken sets the canaries of opts (a *core.Options, *worktree.Options,
// *mergequeue.Options, *gitx.ExportOptions or *server.Config) to w: everything opened or run with opts (or a
// copy) runs with them. It panics when no linked-in package owns the
// type of opts, a mistake of the test that calls it.
func Weaken[O any](opts *O, w Weakening) {
	for _, set := range attach {
		if set(opts, w) {
			return
		}
	}
	panic(fmt.Sprintf("testknobs.Weaken: %T is no options type with canaries (or its package is not linked in)", opts))
}

// QueueCheck, when not nil, replaces the merge queue's check command: it
// is called with the target and the paths of the tip's tree, and returns
// the check's exit status and output, with no scratch work tree and no
// process. It lets the crash sweep run the queue over a memory
// filesystem at every call. It is set before any land runs and never
// while one runs.
var QueueCheck func(target string, paths []string) (exit int, output string)

// LandBeforeCommit, when not nil, is called by core's Land after it has
// computed a merge (or chosen a fast-forward) and before it tries to
// commit it, with the 1-based attempt number, so that a test can make a
// race happen on purpose (cmd/swarmops sets it from
// SWARMOPS_TEST_LAND_PAUSE). It is set before any Land runs and never
// while one runs.
var LandBeforeCommit func(attempt int)

// GCAfterMark and GCBeforeFinish, when not nil, are called by core's GC
// after its first mark and before its last turn of the writer lock (the
// last rescan, the rewrite and the generation step),
// so that a test can put a commit in those windows. They are set before
// any GC runs and never while one runs.
var GCAfterMark, GCBeforeFinish func()
