// Package worktree turns a directory into a work tree of a SwarmOps store:
// checkout materializes a changeset, a switch moves it to another one
// touching only what differs, status says what changed against its base,
// and a snapshot gives the change list for a commit. It is built on core's
// public API (a Source is a *core.Snapshot) and on vfs, so every call can
// be counted, failed and crashed by faultfs.
//
// # Layout
//
// A work tree is a directory holding .swarmops-tree/ (MetaDir):
//
//	.swarmops-tree/index   the index (below)
//	.swarmops-tree/dirs    the directory records, a cache (below)
//	.swarmops-tree/store   the store's directory, one line, for commands run in the tree
//	.swarmops-tree/tmp/    temporary files, renamed into place; cleared by each operation
//	.swarmops-tree/lock    the lock mutating operations take
//	.swarmops-tree/update-pending  an update writing conflict markers, until
//	                       its index is written (pending.go)
//
// # Index format
//
// All integers are big-endian and fixed-width, as in core/objects, so each
// index has one encoding and the decoder can insist on it:
//
//		+-------------+--------+----------+-----------+----------------+----------+-------------+---------+-----------+-----------+
//		| magic "SWTI"| ver u8 | flags u8 | base [32] | written i64 ns | blen u8  | boot [blen] | rlen u8 | ref[rlen] | count u32 |
//		+-------------+--------+----------+-----------+----------------+----------+-------------+---------+-----------+-----------+
//		entry, count times, paths strictly ascending bytewise:
//		+----------+--------+----------+----------+-----------+-----------+---------+---------+---------+----------+
//		| plen u16 | path   | mode u32 | size u64 | mtime i64 | ctime i64 | ino u64 | dev u64 | id [32] | flags u8 |
//		+----------+--------+----------+----------+-----------+-----------+---------+---------+---------+----------+
//		+------------+
//		| ccount u32 |
//		+------------+
//		conflict record, ccount times, paths strictly ascending bytewise:
//		+----------+------+---------------+-------------+---------------+-------------+-----------------+---------------+
//		| plen u16 | path | base mode u32 | base id[32] | ours mode u32 | ours id[32] | theirs mode u32 | theirs id[32] |
//		+----------+------+---------------+-------------+---------------+-------------+-----------------+---------------+
//		trailer:
//		+----------------------------------------------+
//		| BLAKE3-256 of every byte before it [32]      |
//		+----------------------------------------------+
//
//	  - ver = 2, or 3 for a tree that carries a changeset: version 3 has
//	    carried [32] (never zero) right after ref. Header flags 0 (reserved:
//	    any other value is corrupt). Version 1, written by earlier builds,
//	    lacks rlen, ref, ccount and the conflict records; it is still read,
//	    and rewritten as version 2.
//	  - carried: the tree's base before an update onto a revision that did
//	    not hold it; the tree holds that changeset's commits as local
//	    changes, merged and resolved, and its next commit records it as its
//	    second parent, without merging it again. Cleared by that commit, or
//	    by an update onto a revision that holds it.
//	  - base: the changeset the tree was checked out from, last updated onto
//	    or last committed.
//	  - ref: the ref the tree follows (checked out from or updated onto by
//	    name), empty when it was named by id; update without --onto goes to
//	    its current value.
//	  - written: the filesystem's clock when the index was written, taken as
//	    the mtime of the new index file, after every stat it records. An entry
//	    whose mtime is not older is racy: the file may have changed within the
//	    same clock tick without its mtime moving, so it is re-hashed (git's
//	    racy-timestamp rule).
//	  - boot: the filesystem's boot id (vfs.FS.BootID). Under another boot id
//	    no stat data is trusted: a power loss can leave a file whose name,
//	    size and mtime are as recorded and whose data is torn.
//	  - count: bounds the decoder's allocation by the input (an entry is at
//	    least 80 bytes).
//	  - path: a canonical path (objects.CleanPath); mode: file, executable or
//	    symlink (directories are implied by paths); size, mtime, ctime
//	    (nanoseconds), inode and device: the stat data of the file when it was
//	    last seen to hold id, the blob of its content (or link target).
//	  - entry flags: bit 0 conflict (left unresolved by a merge into the
//	    tree), bit 1 smudged (stat data not to be trusted); others corrupt.
//	  - conflict records: the paths an update left unresolved, with the
//	    mode and id of base, ours and theirs (mode 0 and a zero id: absent;
//	    ours may be mode 040000 with a zero id, a directory that stood where
//	    theirs had a file). A record outlives every later index write until
//	    the path is resolved.
//	  - checksum: every single-bit flip and every truncation is detected
//	    (ErrIndexCorrupt with the offset). The golden file is
//	    testdata/index.golden (go test ./worktree -run TestIndexGolden
//	    -update regenerates it).
//
// An index is written to a temporary file and renamed over the old one.
// When a new index carries an entry the old one could not trust (racy,
// smudged, or from another boot) without looking at its file, the entry is
// marked smudged, so a later write time never makes it look settled.
//
// # Directory records
//
// A walk (status, snapshot) reads a directory only to find the names the
// index lacks. The dirs file records the directories last seen to hold
// exactly their tracked names, each with its own lstat taken before that
// listing; a later walk that finds a directory's stat unchanged lstats its
// tracked names and skips reading it (git's untracked cache is the
// anchor). A name created, removed or renamed in a directory moves its
// mtime and ctime, so a new name is never hidden by a record.
//
//		+-------------+--------+----------------+---------+-------------+-----------+
//		| magic "SWTD"| ver u8 | written i64 ns | blen u8 | boot [blen] | count u32 |
//		+-------------+--------+----------------+---------+-------------+-----------+
//		record, count times, paths strictly ascending bytewise:
//		+----------+------+----------+-----------+-----------+---------+---------+-------------+
//		| plen u16 | path | size u64 | mtime i64 | ctime i64 | ino u64 | dev u64 | names u64   |
//		+----------+------+----------+-----------+-----------+---------+---------+-------------+
//		trailer: BLAKE3-256 of every byte before it [32]
//
//	  - A walk records a directory only if it last changed at least 20 ms
//	    (dirSettle, over a tick of the kernel's coarse clock) before the
//	    walk began: a name created after the reading, in the same tick as
//	    the directory's last change, would not move its times.
//	  - written: the new file's mtime, after every listing it records. A
//	    record whose mtime or ctime is not older is racy and not trusted;
//	    the next walk reads the directory and writes the records again.
//	  - boot: under another boot id nothing is trusted (a power loss may
//	    lose a directory's update and keep its old times).
//	  - names: a 64-bit FNV-1a digest of the tracked names the directory
//	    held; a record vouches only while the index tracks those names.
//	  - The root is never recorded (it holds MetaDir).
//
// The file is a cache: written by rename without a sync, by a status that
// made a new record or dropped one (Refresh) and by Record; a dirs file
// that is missing, torn, foreign or from another boot is no records, never
// an error. Options.NoDirCache turns it off (the CLI's
// SWARMOPS_DIR_RECORDS=off). It relies on the filesystem moving a
// directory's times when its entries change, as POSIX requires and every
// local Linux filesystem does.
//
// # Ignore rules
//
// Untracked paths are ignored by git's rules: nested .gitignore files
// (deeper files override shallower ones), negation, directory-only and
// anchored patterns, "**", and the store's exclude file (ExcludeFile in the
// store directory, lowest priority, as git's info/exclude). Matching is
// go-git's gitignore package; the walk adds git's rule that nothing below an
// excluded directory is re-included, and a .gitignore that is a symbolic
// link is not read. A path in the base tree stays tracked whatever the
// rules say. Options.NoIgnore turns the rules off. Three names are never
// part of a tree, whatever the rules: ".git" (in any case, at any depth),
// MetaDir (likewise) and the store's own directory. A directory holding a
// MetaDir of its own is another work tree (an agent's, made inside the
// orchestrator's): the walk does not enter it and lists it in Skipped.
//
// # Symbolic links and special files
//
// A link is an entry of mode objects.ModeSymlink whose blob is its target;
// it is recorded with readlink and made with symlink, never followed. The
// executable bit is the owner's (S_IXUSR), as git reads it. Sockets, fifos
// and devices are skipped and listed in Skipped, or refused with
// ErrSpecialFile when Options.RefuseSpecial is set.
//
// # What a crash leaves
//
// Every file and link a checkout or switch writes goes to a temporary name
// in .swarmops-tree/tmp and is renamed over its path; removals come before
// writes; the index is written last, also by rename.
//
// Under a process crash (the page cache survives): each path holds its old
// entry or its new one, never part of a file, never anything else; the
// index is the old one or the new one. With the old index, files already
// switched have another inode, so status reports them modified; running the
// switch again finishes it (a path that already holds the new entry is not
// a local change). Before its first write a switch records where it goes
// (pending.go), so until its index is written status names it
// (Status.Switching), a commit's snapshot and an update refuse the tree
// (*SwitchError), and a switch to any other revision first finishes it:
// the paths already switched are never taken for the agent's edits.
// Temporary files left behind are removed by the next operation.
//
// Under a power loss without Options.Sync: nothing was made durable, so
// files may hold old, new, empty or torn data, and the index may be old,
// new or torn. A torn index fails its checksum (ErrIndexCorrupt; check out
// again with Force). Otherwise the boot id differs, so status and snapshot
// re-hash every file and never call a changed file clean.
//
// Under a power loss with Options.Sync (git's core.fsync=all): each file
// is fsynced before its rename and every changed directory after the
// renames, then the index is fsynced, renamed and its directory synced. A
// switch that returned is durable. One that did not leaves each file old or
// new, and an index that is old or new and whole.
//
// An update (Update) writes the same way: removals, then each file to a
// temporary name renamed into place, then the index with the new base and
// the conflict records. A crash before the index leaves the old base, with
// the files already written showing as modified; running the update again
// finishes it: a file that already took theirs, or already holds a clean
// line merge, merges to the same content (theirs' change is then on both
// sides, taken once), so a clean update run again gives exactly what it
// would have; a file that already holds conflict markers conflicts again,
// around them. Entries
// of merged files name theirs' object and are smudged, so a status
// re-hashes them and never calls them clean. Conflict records are carried
// by every later index write (refresh, resolve of other paths) until their
// path is resolved; a commit's snapshot, a switch and an update refuse a
// tree that has any.
//
// The crash sweeps in crash_test.go check these at every filesystem call of
// a checkout, a switch, an update and a resolve, on faultfs.MemFS, under
// process, strict and torn clones; crashsim's worktree part (crashsweep)
// runs the checkout, switch and update sweeps with the canary
// update-trusts-stat too.
//
// # Safety
//
// A checkout never creates, writes or removes anything outside its target:
// every operation goes through a vfs.Root, which resolves beneath the
// target and never through a symbolic link, and trees from the store are
// validated entry by entry before anything of them is written. The rules
// and their tests are in docs/security.md.
package worktree
