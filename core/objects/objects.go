package objects

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ID is a BLAKE3-256 object id over a type tag and a canonical encoding.
type ID [32]byte

// Hash is a BLAKE3-256 digest that is not an object id (a delta hash).
type Hash [32]byte

// ZeroID is the absent id: a ref that does not exist, a tree with no entries
// before it is written, a CAS that expects absence.
var ZeroID ID

// ErrBadID is returned for a string that is not 64 hex digits.
var ErrBadID = errors.New("objects: malformed id")

// String returns the id as 64 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is ZeroID.
func (id ID) IsZero() bool { return id == ZeroID }

// String returns the hash as 64 lowercase hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the all-zero hash.
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseID parses 64 hex digits (either case).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 64 {
		return id, fmt.Errorf("%w: %q has %d characters, want 64", ErrBadID, s, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("%w: %q: %w", ErrBadID, s, err)
	}
	return id, nil
}

// ParseHash parses 64 hex digits (either case) as a Hash.
func ParseHash(s string) (Hash, error) {
	id, err := ParseID(s)
	return Hash(id), err
}

// Kind is an object's type tag.
type Kind uint8

// Object kinds. The values are part of the on-disk format and of every id.
const (
	KindBlob      Kind = 1
	KindTree      Kind = 2
	KindChangeset Kind = 3
)

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return k >= KindBlob && k <= KindChangeset }

// String returns "blob", "tree", "changeset" or "kind(N)".
func (k Kind) String() string { return enumName(kindNames, uint8(k), "kind") }

var kindNames = []string{KindBlob: "blob", KindTree: "tree", KindChangeset: "changeset"}

// enumName returns names[v], the name of the value v of an enumeration, or
// what(v) for a value without a name.
func enumName(names []string, v uint8, what string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, v)
}

// Mode is a tree entry's mode.
type Mode uint32

// Entry modes. The values are part of the on-disk format and are git's, so
// a tree maps to a git tree entry for entry. No other mode is valid, so each
// file kind has exactly one encoding.
const (
	ModeFile Mode = 0o100644
	ModeExec Mode = 0o100755
	ModeDir  Mode = 0o040000
	// ModeSymlink is a symbolic link. Its id names a blob holding the link's
	// target exactly as readlink(2) returns it; the target is never
	// followed when a tree is written or read.
	ModeSymlink Mode = 0o120000
)

// Valid reports whether m is ModeFile, ModeExec, ModeSymlink or ModeDir.
func (m Mode) Valid() bool {
	return m == ModeFile || m == ModeExec || m == ModeSymlink || m == ModeDir
}

// IsSymlink reports whether m is ModeSymlink (the entry's blob is a link
// target).
func (m Mode) IsSymlink() bool { return m == ModeSymlink }

// IsDir reports whether m is ModeDir (the entry's id names a tree).
func (m Mode) IsDir() bool { return m == ModeDir }

// Entry is one name in a tree.
type Entry struct {
	Name string
	Mode Mode
	ID   ID
}

// Tree is a sorted list of entries (sorted by Name, bytewise, no duplicates).
type Tree struct {
	Entries []Entry
}

// Changeset is one commit.
type Changeset struct {
	Parents    []ID
	Root       ID   // root tree
	Delta      Hash // hash of the sorted path changes against Parents[0]
	Generation uint64
	Agent      string
	Message    string
	Time       time.Time // UTC, nanoseconds
}

// Blob is file content. Its encoding is the content itself.
type Blob []byte
