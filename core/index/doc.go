// Package index is the on-disk changeset index and object locator of the
// store: sorted, immutable run files that answer, for a changeset id, its
// generation, parents, delta hash and location; for any object id, its
// kind and location; for an id prefix, the matching ids; and for a delta
// hash, the changesets that make that change.
//
// # Structure
//
//	Index ──► View (immutable) ──► runs (files, newest first)
//
// At a checkpoint the store writes the records of the frames since the
// last one as a run (WriteRun, or Index.AddRun); compaction k-way merges
// runs into one (MergeRuns, Index.Compact). The records of the frames past
// the newest checkpoint are kept in memory by the store itself (its
// projection's tail, core/internal/proj), not here. Every change publishes
// a new View with one atomic store; a View never changes, so readers hold
// one as long as they like and take no lock. Of duplicate ids, the newest
// run wins.
//
// # Run file format
//
// All integers are big-endian. Three sorted tables of fixed-size records
// (so a record is found by ReadAt at index*size, no parsing), each followed
// by its fanout; then a heap for the rare parents beyond the first; the
// header is written last, at offset 0.
//
//	+----------------------+ 0
//	| header (256 bytes)   |
//	+----------------------+ 256
//	| changeset records    | 136 bytes each, by id
//	| changeset fanout     | (2^bits + 1) x 8 bytes
//	| object records       | 64 bytes each (56 in version 1), by id (blobs and trees)
//	| object fanout        |
//	| delta records        | 68 bytes each, by (delta, id)
//	| delta fanout         |
//	| parent heap          | extra parents: n x 32 bytes + crc32c
//	| changeset filter     | split-block Bloom filter, 32-byte blocks
//	| object filter        |
//	+----------------------+ fileSize
//
// Header:
//
//	 0 magic "SWOIDX\x00\x01"   8  rejects files that are not runs
//	 8 version u32              4  2 (written), or 1 (read: 56-byte object
//	                               records, no compressed groups); another
//	                               version is refused, not guessed, so a
//	                               build that predates version 2 refuses
//	                               its runs at open
//	12 reserved                 4  zero
//	16 meta u64                 8  the caller's (e.g. the journal sequence covered)
//	24 table x 3 (32 bytes each): off u64 | count u64 | fanoutOff u64 |
//	                              bits u32 | recSize u32
//	                               lets a lookup go straight to its bucket;
//	                               recSize pins the record layout
//	120 heapOff u64 | heapLen u64
//	136 fileSize u64           8  a truncated or extended file fails at open
//	144 bodyHash [32]          32 BLAKE3 of bytes [256, fileSize), for Verify
//	176 filter x 2 (16 bytes each, changesets then objects):
//	    off u64 | blocks u32 | crc32c u32 of ('F', table, filter bytes)
//	                               blocks 0: no filter (a run written
//	                               before filters; lookups read the table)
//	208 filter scheme u8          1: the hash of filter.go over a key's first 6
//	                               bytes; any other value: the filters are
//	                               not used (0: a run written before them)
//	209 reserved (zero) ... 252 crc32c u32 of bytes [0, 252)
//
// Every section is checked to lie inside the file when the run is opened, so
// a damaged header can never steer a read elsewhere.
//
// Changeset record (136 bytes):
//
//	 0 id [32] | 32 delta [32] | 64 first parent [32] (zero if none) |
//	96 generation u64 | 104 segment u32 | 108 offset u64 | 116 length u32 |
//	120 nparents u16 | 122 flags u8 (bit 0: loose) | 123 zero u8 |
//	124 heap ref u64 (extra parents, when nparents > 1) | 132 crc32c u32
//
// Most changesets have one parent, so it is inline and a lookup needs no
// second read; merges read their other parents from the heap.
//
// Object record (64 bytes; version 1: the first 52 bytes, then crc32c):
//
//	0 id [32] | 32 kind u8 | 33 flags u8 | 34 zero u16 | 36 segment u32 |
//	40 offset u64 | 48 length u32 | 52 stored u32 | 56 inner u32 | 60 crc32c u32
//
// flags: bit 0 loose (the object is a file under objects/, length its
// size); bit 1 in a compressed group: the blob is `length` bytes at
// `inner` of what the zstd frame of `stored` bytes at offset decodes to
// (a group of blobs of a split journal frame's body, core/internal/zblob);
// stored is 1 to MaxGroup and inner+length at most MaxGroup. Stored and
// inner are zero otherwise. Both bits at once, or any other bit, is
// damage. Length is the object's size in every case.
//
// Delta record (68 bytes): delta [32] | changeset id [32] | crc32c u32.
//
// Every record's crc32c (Castagnoli) covers its table number and its index
// followed by its bytes, so a record copied to another place fails too.
// Lookups check the records they touch; Verify checks everything.
//
// Fanout entry (8 bytes): start u32 | crc32c u32 of (table, bucket, start).
// Entry b is the index of the first record whose key's top `bits` bits are
// >= b; entry 2^bits is the record count. bits is chosen for 16 to 32
// records per bucket, so an exact lookup costs two reads after open: the two
// adjacent fanout entries (16 bytes) and one bucket of records (about 2 KiB),
// whatever the size of the run. Opening costs one read (the header).
//
// Filter (see filter.go): blocks of eight 32-bit words; a key's hash picks
// a block and one bit in each word. It is sized at 12 bits a key, so about
// 0.5 % of absent keys pass it. A run loads its fanouts and filters after
// preloadAfter lookups; from then on a lookup of an id the run does not
// hold reads nothing. The filter's checksum is checked when it is loaded
// (a damaged filter could exclude a key the run holds), and Verify checks
// that it passes every key of its table.
//
// # Durability
//
// WriteRun, MergeRuns and AddRun write dst+".tmp", datasync it once,
// rename it to dst and sync the directory: when they return, the run is
// durable under its name. A checkpoint may then reference it. Retired runs
// are deleted by the caller after the checkpoint that drops them is durable.
//
// # Errors
//
// Damage is a *CorruptError (errors.Is ErrCorrupt) naming the file and the
// offset; bad records handed to WriteRun are ErrInvalid; I/O errors are wrapped
// with the file and offset. Nothing panics on a damaged file.
package index
