package index

import (
	"encoding/binary"
	"hash/crc32"
)

// The changeset and object tables of a run each carry a split-block Bloom
// filter (the layout of Parquet's and Impala's): an array of 32-byte blocks
// of eight 32-bit words. A key picks one block and sets one bit in each of
// its words, so a probe touches one cache line. At filterBitsPerKey bits per
// key it answers "absent" for all but about 0.5 % of the keys a run does not
// hold, and never for a key it holds.
//
// What it is for: a store holds up to maxRuns runs, and a lookup of an id
// that is not in a run (every run but one for a hit, every run for a miss,
// and every new changeset that replay or a checkpoint checks for a
// duplicate) used to cost a read of that run's bucket. A run loads its
// filters with its fanouts, after preloadAfter lookups, so a one-shot
// lookup still reads only what it needs.
const (
	filterBitsPerKey = 12
	filterBlockSize  = 32
	// maxFilterBlocks bounds the filter a header may ask for (1 GiB).
	maxFilterBlocks = 1 << 25
)

// filterSalts are the odd multipliers that turn one 32-bit hash into a bit
// position in each word of a block (Parquet's).
var filterSalts = [8]uint32{
	0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
	0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
}

// filterBlocks sizes the filter of a table of at most n keys.
func filterBlocks(n uint64) uint32 {
	if n == 0 {
		return 0
	}
	return uint32(min((n*filterBitsPerKey+8*filterBlockSize-1)/(8*filterBlockSize), maxFilterBlocks))
}

// filterKeyLen is how many leading bytes of a key the filter hashes: 6,
// the CLI's short id (12 hex digits). Keys are BLAKE3 ids, so 48 bits keep
// an exact lookup's false positives where they were (two of a million ids
// share them with odds of about 1 in 280 million), and a lookup by a prefix
// of 12 or more hex digits can ask the filter too.
const filterKeyLen = 6

// filterScheme names, in the run header, how filterHash turns keys into
// bits; a run whose filters use another scheme (or none: 0) is read
// without them.
const filterScheme = 1

// filterHash mixes the first filterKeyLen bytes of a key into 64 bits.
func filterHash(key []byte) uint64 {
	h := uint64(binary.BigEndian.Uint32(key[0:]))<<16 | uint64(binary.BigEndian.Uint16(key[4:]))
	// The 64-bit finalizer of MurmurHash3.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// filterSlot returns the block a hash picks among nblocks.
func filterSlot(h uint64, nblocks uint32) uint32 {
	return uint32((h >> 32) * uint64(nblocks) >> 32)
}

// filterAdd sets key's bits in f, a filter of len(f)/filterBlockSize blocks.
func filterAdd(f []byte, key []byte) {
	h := filterHash(key)
	blk := f[filterSlot(h, uint32(len(f)/filterBlockSize))*filterBlockSize:][:filterBlockSize]
	for i, s := range filterSalts {
		w := binary.BigEndian.Uint32(blk[4*i:])
		binary.BigEndian.PutUint32(blk[4*i:], w|1<<((uint32(h)*s)>>27))
	}
}

// filterHas reports whether key may be in the set f was built from: false
// means it is not.
func filterHas(f []byte, key []byte) bool {
	h := filterHash(key)
	blk := f[filterSlot(h, uint32(len(f)/filterBlockSize))*filterBlockSize:][:filterBlockSize]
	for i, s := range filterSalts {
		if binary.BigEndian.Uint32(blk[4*i:])&(1<<((uint32(h)*s)>>27)) == 0 {
			return false
		}
	}
	return true
}

// filterCRC is the checksum a header keeps of a table's filter, so a
// damaged filter (which could answer "absent" for a key the run holds) is
// found when it is loaded, not trusted.
func filterCRC(tab byte, f []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, []byte{'F', tab}), castagnoli, f)
}
