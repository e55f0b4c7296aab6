// Package gitx moves history between a SwarmOps store and a git
// repository: Export writes changesets as git commits, Import brings a git
// revision (or its whole history) into the store as changesets. It uses
// only the store's public API (core.Store, core.Snapshot) and the git
// command-line tool.
//
// # Why git's own tools, not a library
//
// Export feeds `git fast-import` and Import reads with `git cat-file
// --batch`, `git ls-tree -r -z`, `git diff-tree -r -z` and `git rev-list`.
// fast-import is the stream format every conversion tool speaks; it writes
// one pack per run, sorts and encodes trees itself, checks every commit it
// is asked to build on, and works unchanged for SHA-1 and SHA-256
// repositories because the ids it assigns come back through its marks file
// rather than being computed here. The -z plumbing formats are stable and
// carry any path byte for byte. A library (go-git) would mean a second
// implementation of git's object format and pack writing inside the
// product, whose output git itself would still have to check; the git
// binary is on every machine that wants a git repository.
//
// # Export
//
// Export takes one snapshot of the store, so it sees one consistent
// history while agents keep committing. It walks from the refs to export,
// through every parent, and stops at changesets the mapping file already
// names (see below). What is left is written in topological order, parents
// first. A changeset without parents is written as a full tree; any other
// as the paths it changes against its first parent (Snapshot.Diff), with
// deletions first so that a file may replace a directory and the reverse.
// Each blob is sent once per run and referenced by its mark after that;
// fast-import also skips storing a blob the repository's packs already
// hold.
//
// The mapping from changeset to commit is fixed, so the same history always
// gives the same git ids:
//
//	author, committer   Ident(agent): the agent with '<', '>' and control
//	                    bytes turned into '_' and spaces trimmed, e-mail
//	                    slug@swarmops; an empty agent is
//	                    "anonymous <anonymous@swarmops>"
//	dates               the changeset's time in whole seconds, +0000
//	                    (times before 1970 are written as 0)
//	message             the stored bytes, unchanged
//	parents             in the changeset's order: from, then merge
//	tree                the changeset's tree: same names, blobs and modes
//	                    (100644, 100755, 120000, 040000)
//
// Refs land at Prefix+REF (default refs/heads/swarm/REF). fast-import
// writes the new commits on a scratch ref of the export's own
// (refs/swarmops/export-scratch); once the mapping file names them, one
// `git update-ref --stdin` transaction moves every ref from the value the
// export read to its new commit and deletes the scratch ref, so a ref
// moved meanwhile fails the export (core.ErrConflict) and none moves. A
// ref may move anywhere a store ref moved, backwards too, while it holds a
// commit an export wrote. One that holds a commit no export wrote, which
// the new commit does not contain (someone committed in git on the
// exported branch), is refused with a *ForeignError unless Force: moving
// it would drop that work. Export never deletes a git ref but its scratch
// ref, and leaves HEAD as it finds it.
//
// A changeset git cannot hold faithfully is refused, never altered: a path
// component git treats as ".git" (in any case, with the trailing dots and
// spaces NTFS drops, "git~1", or with the code points HFS+ ignores), and a
// message holding a NUL byte. The store's command line never records
// either; only a program using the API directly can.
//
// # The mapping file
//
// swarmops-export.map, in the git directory (the common one of a linked
// work tree, beside the objects and refs), records which commit each
// exported changeset became:
//
//	swarmops-export-map 1 ident=1\n        header: file version, mapping version
//	<changeset id, 64 hex> <commit id, hex>\n  one line per changeset
//
// It is rewritten whole after every export that wrote commits: to a
// temporary file that is fsynced, renamed over the old one, and followed by
// an fsync of the directory. The rename comes only after fast-import
// succeeded and the pack files it wrote, and their directory, were
// fsynced, so the file never names a commit the repository lacks, after a
// process crash or a power loss. The reverse is harmless: commits a
// crashed export wrote but did not record are written again, to the same
// ids, by the next export.
//
// The file is still not trusted. Before an export builds on a commit the
// file names, it checks that the repository holds it (git cat-file
// --batch-check); if any is missing it checks every entry and drops those
// that are gone. A file that is unreadable, from another mapping version,
// or malformed is ignored and rebuilt. A lost or stale file thus costs time,
// never correctness. A lock file (swarmops-export.lock, flock) serializes
// exports into one repository.
//
// fast-import is run with fastimport.unpackLimit=0, so even a one-commit
// export writes a pack (which this package fsyncs) rather than loose
// objects, whose durability would depend on the user's core.fsync. Many
// small exports leave many small packs; `git gc` or `git repack` joins
// them. The git refs themselves are as durable as the repository's
// core.fsync makes them: a ref a power loss takes away is set again by the
// next export.
//
// # Import
//
// Import reads commits with `git cat-file --batch` and turns each into one
// changeset: the author's name becomes the agent, the author time (UTC,
// whole seconds) the time, the full message (everything after the header)
// the message, and the commit's parents, already imported, its parents in
// the same order (a parent named twice is kept once). Without --history the
// revision's tree becomes one changeset without parents; with it, every
// ancestor is imported in topological order (`git rev-list --topo-order
// --reverse --parents`), each as the changes `git diff-tree` reports
// against its first parent. The same git history therefore always gives
// the same changeset ids. A commit the repository's mapping file names
// (an export wrote it, or an import recorded it) is taken back as its
// changeset while the store holds it, so store to git to store keeps ids.
// The target ref is then moved by compare-and-swap from the value it had
// when the import started (created if it was absent), and only to a
// changeset that contains that value unless ImportOptions.Force (a
// *NotFastForwardError otherwise); a ref that moved meanwhile is a
// conflict and is left alone.
//
// Modes 100644, 100755 and 120000 map to objects.ModeFile, ModeExec and
// ModeSymlink. Submodules (160000 gitlinks) cannot be held by the store:
// they are skipped, and every skipped path is reported. Paths the store
// refuses (not UTF-8, a component over 255 bytes, a ".git" or
// ".swarmops-tree" component in any case, see worktree.ValidatePath) make
// the import fail with ErrUnrepresentable naming the commit and the path;
// nothing is moved. Names with NUL or "/" cannot occur in a git tree.
//
// A store changeset is written by one core.Store.Commit call, which takes
// every changed file's content in memory: importing a tree of N bytes
// holds those N bytes at once (each distinct blob once, however many paths
// share it). With --history only the files a commit changes are held.
//
// # Git's environment
//
// Every git command runs with --git-dir set and the GIT_* variables of the
// caller removed (except GIT_EXEC_PATH and the GIT_TRACE family), so a
// GIT_DIR, GIT_INDEX_FILE or GIT_OBJECT_DIRECTORY meant for another
// repository cannot redirect it; GIT_NO_REPLACE_OBJECTS=1 makes Import read
// the objects themselves rather than their replacements.
package gitx
