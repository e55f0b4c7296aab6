// Package objects defines the SwarmOps data model: blobs, trees and
// changesets, their canonical encodings, their BLAKE3-256 ids, the delta
// hash, path and name validation, and id prefixes.
//
// # Ids
//
// An object's id is BLAKE3-256 over a one-byte kind tag followed by the
// object's canonical encoding:
//
//	id = BLAKE3-256( kind || encoding )      kind: 1 blob, 2 tree, 3 changeset
//
// The tag keeps kinds apart: a blob whose bytes equal a tree's encoding has
// a different id. Delta hashes use tag 0x80, so they never collide with ids.
//
// # Encodings
//
// All integers are big-endian and fixed-width: a fixed width has exactly one
// encoding per value (varints admit padded forms), which makes "one id, one
// encoding" a property of the decoder rather than a convention.
//
// A blob's encoding is its content, unchanged.
//
// Tree (entries strictly ascending by name, bytewise):
//
//		+---------+-------------+----------------- ... -----------------+
//		| ver u8  | count u32   | entry 0 | entry 1 | ... | entry n-1   |
//		+---------+-------------+----------------- ... -----------------+
//		entry:
//		+-----------+-----------+-----------+----------------+
//		| mode u32  | id [32]   | nlen u8   | name [nlen]    |
//		+-----------+-----------+-----------+----------------+
//
//	  - ver = 1: lets a later format coexist; any other value is malformed.
//	  - count: lets the decoder bound its allocation by the input length
//	    (each entry is at least 37 bytes) before it reads the entries.
//	  - mode: one of 0100644 (file), 0100755 (executable file), 0120000
//	    (symbolic link), 040000 (directory), git's values; anything else is
//	    malformed, so a file kind has one spelling.
//	  - id: the blob (file, or a link's target string) or tree (directory)
//	    the name points at; never zero.
//	  - nlen, name: 1..255 bytes (NAME_MAX), valid UTF-8, no "/" or NUL, not
//	    "." or "..". Sorting bytewise and rejecting duplicates makes the order
//	    canonical and lets lookups binary-search.
//
// Changeset:
//
//		+--------+-------------+--------------------+-----------+------------+
//		| ver u8 | nparents u16| parents [32]*n     | root [32] | delta [32] |
//		+--------+-------------+--------------------+-----------+------------+
//		+----------------+-------------+-----------+----------+-------------+---------+------------+
//		| generation u64 | seconds i64 | nanos u32 | alen u16 | agent[alen] | mlen u32| msg [mlen] |
//		+----------------+-------------+-----------+----------+-------------+---------+------------+
//
//	  - parents: 0..1024, ordered (the first parent is the one log follows and
//	    the delta is taken against), none zero, no repeats.
//	  - root: the root tree; never zero (an empty tree has an id too).
//	  - delta: DeltaHash of the path changes against the first parent, stored
//	    so the index can find "the same change" without rebuilding trees.
//	  - generation: 1 + the maximum of the parents' (1 for a root changeset),
//	    supplied by the caller who knows the parents; 0 is malformed. It bounds
//	    ancestry walks.
//	  - seconds, nanos: the UTC time; nanos < 1e9. Two fields instead of
//	    UnixNano so every time.Time (including the zero time) is representable.
//	  - agent, message: opaque bytes, length-prefixed; message at most 16 MiB so
//	    a corrupt length cannot request gigabytes.
//
// Nothing may follow the last field. Decoders never panic, allocate at most
// in proportion to their input, and return errors wrapping ErrMalformed with
// the byte offset; encoders refuse invalid values with ErrInvalid.
//
// # Delta hash
//
//	delta = BLAKE3-256( 0x80 || count u64 || change* )
//	change = plen u32 | path | op u8 | mode u32 | id [32]
//
// Changes are sorted by path (then op, mode, id); deletes carry zero mode and
// id. Golden files in testdata/ pin every encoding and id; regenerate them
// with `go test ./core/objects -run TestGolden -update`.
package objects
