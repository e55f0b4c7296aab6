// Package journal is the SwarmOps write-ahead journal: numbered segment files
// holding self-delimiting, checksummed frames, one frame per write
// transaction. The journal knows nothing about what a payload means; the
// store (package core) encodes transactions into payloads.
//
// # Segments
//
// A segment is the file journal/seg-%012d. It starts with a 64-byte header
// in a sector of its own, followed by frames that start on 512-byte sector
// boundaries:
//
//		 0               8       12      16                              32
//		 +---------------+-------+-------+-------------------------------+
//		 | magic SWSEG001| vers  | 0     | store id (16 random bytes)    |
//		 +---------------+-------+-------+---------------+---------------+
//		 | segment number (u64)  | first seq (u64)       | checksum (16) |
//		 +-----------------------+-----------------------+---------------+
//		32                      40                      48              64
//
//	  - magic and version reject a file that is not a segment.
//	  - store id ties the segment to one store: the frame checksum key is
//	    derived from it, so bytes left by another store (a recycled file, a
//	    copied directory) never verify here.
//	  - segment number catches a renamed or misplaced file.
//	  - first seq is the sequence number the first frame of the segment must
//	    carry; the scanner uses it to follow a rollover.
//	  - checksum is a keyed BLAKE3 of bytes [0,48).
//
// Segments grow in zero-filled windows (WindowSize, 256 KiB by default). The
// writer zero-fills the next window in the same write-then-sync step as the
// frame that first crosses into it, so that frame's single fdatasync also
// persists the zeros and the new file size; every later frame in the window
// is an overwrite of already-durable zeros, whose fdatasync commits no
// metadata. A frame never spans segments: when it does not fit, the writer
// starts a new segment (syncing the journal directory once, at creation). A
// frame larger than the segment size gets a segment of its own size.
//
// # Frames
//
//		 0       4    5    6    8         12        16
//		 +-------+----+----+----+---------+---------+
//		 | magic |kind|flag| 0  | length  | head    |
//		 +-------+----+----+----+---------+---------+
//		 | seq (u64)          | watermark (u64)     |
//		 +--------------------+---------------------+
//		 | checksum (16 bytes)                      |
//		 +------------------------------------------+  48
//		 | payload (length bytes), zero padded to a multiple of 512
//		 +------------------------------------------+
//
//		 a split frame (head > 0), from byte 48:
//		 | body digest: BLAKE3-256 of the body (32)  |  80
//		 | head (head bytes) | body (length - head bytes), zero padded
//
//	  - magic "SWF1" (never all zeros) lets a scanner reject pre-zeroed space
//	    at once and lets the corruption check find frame starts.
//	  - kind says how the store decodes the payload; flags are reserved (0).
//	  - length bounds the payload. Frames are sector (512-byte) aligned, not
//	    just 8-byte aligned: a power loss may zero or garble every sector an
//	    unsynced write touched, so an append must never rewrite a sector that
//	    holds an earlier, acknowledged frame. Alignment also keeps every
//	    header field inside one sector.
//	  - seq is the frame's sequence number. A frame is valid only if its seq
//	    is the next expected one, so a stale frame (an older frame image left
//	    beyond the end, or a frame from before a cut) never joins the log.
//	  - watermark is the highest seq the writer knew to be durable when it
//	    wrote the frame. A valid frame therefore proves every frame up to its
//	    watermark was acknowledged; recovery uses it to tell a torn tail (a
//	    missing frame after the last durable one) from corruption (a missing
//	    frame the log proves was durable).
//	  - head is 0 for a frame whose payload is one piece. Otherwise the
//	    frame is split: the payload's first head bytes are its head, the
//	    rest its body, and the body's digest follows the header.
//	  - checksum is BLAKE3 keyed with a key derived from the store id, over
//	    header bytes [0,32) followed by the BLAKE3-256 digest of the payload
//	    (of a split frame: of its head followed by the body digest),
//	    truncated to 16 bytes. Hashing the payload digest rather than the
//	    payload lets the store hash the payload before it takes the writer
//	    lock; only 64 bytes are hashed under it. A split frame's head is
//	    checked without reading its body (ScanHeads), which is how replay
//	    skips the blobs of a big transaction; a whole read checks the body
//	    against its digest too.
//
// A frame is valid iff the magic matches, the length fits the segment, the
// checksum verifies and seq is the expected next sequence number, and, when
// its body is read, the body matches its digest.
//
// # Torn tail versus corruption
//
// Scan walks frames from a position and stops at the first invalid one.
// Classify then decides what the stop means: if the stop lies inside a prefix
// known to be durable (from the checkpoint or the published state), or any
// valid frame later in the journal carries a watermark covering the stopped
// sequence, acknowledged data is damaged and the result is a *CorruptError
// naming the file and offset. Otherwise the bytes past the stop are a torn
// tail of unacknowledged writes, which recovery zeroes.
package journal
