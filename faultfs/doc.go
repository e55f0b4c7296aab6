// Package faultfs holds the test filesystems of SwarmOps: wrappers that see,
// count, fail and crash every call of a vfs.FS, and MemFS, a memory
// filesystem that models what a power loss keeps. The store never imports
// this package; tests pass these filesystems in through Options.FS.
//
// # Wrappers
//
// Each wrapper is a small type over any vfs.FS (including another wrapper,
// so they compose) and forwards every call: the FS methods, every call on a
// file it opened (Read, ReadAt, Write, WriteAt, Seek, Sync, Datasync,
// Allocate, Truncate, Close, Stat, Readdir…) and Unlock on a lock it took.
// Each call has an Op; Ops are grouped into Kinds (read, write, sync,
// directory operation, lock, handle), and init checks the grouping.
//
//   - Counting counts calls per Op and per path and can record a trace.
//   - Injecting fails calls chosen by Rules (ParseRule reads them from text)
//     and reports injected errors the caller never surfaced.
//   - Crashing fails call n and every later call with vfs.ErrCrashed without
//     reaching the inner FS, freezing its state: an in-process crash.
//   - CrashExit (CrashAtFromEnv) ends the process at call n with
//     CrashExitStatus: a crash of a subprocess, as SIGKILL would do it.
//   - Hook calls a caller's function before every call, the seam of the
//     deterministic scheduler (crashsweep/sched), which parks the calling
//     agent there.
//
// # The persistence model of MemFS
//
// MemFS keeps two states of everything: the live state, which every read
// sees (the page cache), and the durable state (the disk). CrashClone builds
// a new MemFS from the durable state (Strict), from the durable state plus a
// seeded part of the rest (Torn), or from the live state (ProcessCrash).
// Op by op:
//
//	write, WriteAt       live bytes change; the 512-byte sectors touched
//	                     become unsynced
//	Truncate             live size changes; sectors cut off become unsynced
//	Allocate             live size grows with zeros (fallocate mode 0);
//	                     nothing becomes durable
//	Sync                 the file's bytes and size become durable; its
//	                     directory entry does not
//	Datasync             the same as Sync: fdatasync persists the size needed
//	                     to read the data back, and the only extra metadata
//	                     fsync persists (timestamps) is not modelled
//	Create, Mkdir, Link  a new entry is live at once, durable after SyncDir
//	                     of its directory
//	Symlink              the same; the target is part of the link's inode, so
//	                     a link is durable with its entry, target and all
//	Remove, RemoveAll    the entry is gone from the live state at once, and
//	                     from the durable state after SyncDir
//	Rename               atomic in the live state; durable after SyncDir of
//	                     the old or the new directory (a rename between two
//	                     directories is one operation, as in a journaling
//	                     filesystem). Under every model the entry is under
//	                     the old name or the new one, never both, never
//	                     neither
//	SyncDir              every entry change made so far in that directory
//	                     becomes durable, in order; a rename it contains
//	                     first makes durable the earlier changes of the other
//	                     directory involved
//	Sync on a directory  the same as SyncDir
//	Lock                 not state: locks vanish in every clone
//	BootID               a Strict or Torn clone gets a new boot id, a
//	                     ProcessCrash clone keeps it
//
// Names resolve as the kernel resolves them: symbolic links are followed
// in leading components and, except for Lstat, Readlink, Remove, Rename,
// Link and Mkdir, in the last one; open with O_NOFOLLOW fails with ELOOP on
// a link. Every change of a file's data moves its mtime and ctime, and a
// rename, link or chmod moves its ctime, read from a logical clock that
// advances a microsecond per reading (SetClock replaces it); Stat's Sys is a
// *syscall.Stat_t with the inode number, so the inode and time data a work
// tree index keeps behave as on a real filesystem. Clones keep every time.
//
// A file is reachable in a clone only through entries the clone keeps: a
// file whose own entry (or any parent directory's entry) is not durable
// vanishes under Strict even if its data was synced. Hard links share one
// file in the clone as in the original.
//
// Under Torn, each unsynced sector (in ascending order per file, files and
// directories visited in sorted name order) is independently kept (the live
// bytes), dropped (the durable bytes), zeroed or filled with garbage; each
// file whose live size differs from its durable size gets one of the two;
// each unsynced directory operation is kept or dropped as a whole, decided
// once even when it spans two directories. Kept operations of a directory
// apply in their original order. A kept remove or rename takes away a name
// only if that name still holds its file in the torn state; a kept rename
// whose create was dropped adds only its new name. Every choice comes from one generator
// seeded with the seed, so a torn clone is a pure function of the state and
// the seed.
//
// File data lives in 4 KiB pages, held in chunks of 256 page pointers
// (1 MiB), held in a slice. All three are shared copy-on-write between a
// file's live bytes, its durable image and clones: each is frozen when a
// sync or a clone first shares it and copied before it is changed. A sync
// or a clone therefore costs O(what changed since the last one), not
// O(bytes stored), which keeps crash sweeps at thousands of clones per
// second, and a commit after a sync copies one page and one chunk.
//
// # Surfacing injected errors
//
// An injected error is surfaced when an error that wraps it (errors.Is on the
// injection's own *InjectedError) is passed to Injecting.Check. Tests pass
// every error the code under test returned to Check, then require Unsurfaced
// to be empty: an I/O error the store swallowed, or replaced by an error that
// does not wrap it, fails the test.
package faultfs
