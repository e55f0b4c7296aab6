package objects

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/swarmops/swarmops/core/internal/b3"
)

// ErrBadPath is returned for a path or entry name that the store refuses:
// empty, absolute, containing "." or ".." or empty components, a trailing
// slash, a NUL byte, a component longer than MaxNameLen, or invalid UTF-8.
// It is wrapped with the offending path. Paths are rejected, never cleaned,
// so that what a caller writes is exactly what is stored.
var ErrBadPath = errors.New("objects: bad path")

// MaxPathLen bounds a path in bytes (Linux PATH_MAX).
const MaxPathLen = 4096

// CleanPath checks that p is a canonical relative slash-separated path and
// returns it unchanged. Components are checked with ValidName. The error
// wraps ErrBadPath and quotes p.
func CleanPath(p string) (string, error) {
	if plainPath(p) {
		return p, nil
	}
	if err := cleanPathFault(p); err != nil {
		return "", err
	}
	return p, nil
}

// cleanPathFault is CleanPath's long way: the fault of p, or nil.
func cleanPathFault(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty path", ErrBadPath)
	}
	if len(p) > MaxPathLen {
		return fmt.Errorf("%w: path of %d bytes exceeds %d", ErrBadPath, len(p), MaxPathLen)
	}
	if p[0] == '/' {
		return fmt.Errorf("%w: %q is absolute", ErrBadPath, p)
	}
	rest := p
	for rest != "" {
		comp := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			comp, rest = rest[:i], rest[i+1:]
			if rest == "" {
				return fmt.Errorf("%w: %q has a trailing slash", ErrBadPath, p)
			}
		} else {
			rest = ""
		}
		if err := ValidName(comp); err != nil {
			return fmt.Errorf("%w: in path %q", err, p)
		}
	}
	return nil
}

// plainPath reports, in one pass, that p is a path CleanPath accepts: its
// usual answer, for the paths of a whole index or tree. Any doubt (a
// component that is empty, "." or "..", or too long, a NUL, a path too
// long, invalid UTF-8) sends CleanPath the long way, which names the fault.
func plainPath(p string) bool {
	if p == "" || len(p) > MaxPathLen {
		return false
	}
	ascii := true
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			ascii = ascii && p[i] < 0x80
			if p[i] == 0 {
				return false
			}
			continue
		}
		c := p[start:i]
		if c == "" || c == "." || c == ".." || len(c) > MaxNameLen {
			return false
		}
		start = i + 1
	}
	return ascii || utf8.ValidString(p)
}

// SplitPath returns the components of a path accepted by CleanPath.
func SplitPath(p string) []string { return strings.Split(p, "/") }

// ChangeOp is what a path change does, relative to the first parent.
type ChangeOp uint8

// Change operations. The values are part of the delta hash.
const (
	OpAdd    ChangeOp = 1 // the path did not exist in the first parent
	OpModify ChangeOp = 2 // the path existed with another mode or id
	OpDelete ChangeOp = 3 // the path existed and is gone
)

// String returns "add", "modify", "delete" or "op(N)".
func (o ChangeOp) String() string { return enumName(opNames, uint8(o), "op") }

var opNames = []string{OpAdd: "add", OpModify: "modify", OpDelete: "delete"}

// PathChange is one file-level change of a changeset against its first
// parent: a full path (as accepted by CleanPath), the operation, and the new
// mode and id (zero for a delete).
type PathChange struct {
	Path string
	Op   ChangeOp
	Mode Mode
	ID   ID
}

// deltaTag separates delta hashes from object ids (whose tags are 1..3).
const deltaTag = 0x80

// DeltaHash returns the hash of the canonical form of changes: sorted by
// path, then op, mode and id (so the input order never matters), each a
// length-prefixed path, one op byte, a 4-byte mode and the 32-byte id, with
// mode and id zeroed for deletes. Two changesets that make the same change
// against their first parents share it, which makes landing idempotent. The
// empty change list has a hash too (a merge that changes nothing against its
// first parent). changes is not modified.
func DeltaHash(changes []PathChange) Hash {
	cs := slices.Clone(changes)
	for i := range cs {
		if cs[i].Op == OpDelete {
			cs[i].Mode, cs[i].ID = 0, ZeroID
		}
	}
	slices.SortFunc(cs, func(a, b PathChange) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if a.Op != b.Op {
			return int(a.Op) - int(b.Op)
		}
		if a.Mode != b.Mode {
			if a.Mode < b.Mode {
				return -1
			}
			return 1
		}
		return slices.Compare(a.ID[:], b.ID[:])
	})
	h := b3.Get()
	defer b3.Put(h)
	var buf [8]byte
	h.WriteByte(deltaTag)
	binary.BigEndian.PutUint64(buf[:], uint64(len(cs)))
	h.Write(buf[:8])
	for _, c := range cs {
		binary.BigEndian.PutUint32(buf[:4], uint32(len(c.Path)))
		h.Write(buf[:4])
		h.Write([]byte(c.Path))
		buf[0] = byte(c.Op)
		h.Write(buf[:1])
		binary.BigEndian.PutUint32(buf[:4], uint32(c.Mode))
		h.Write(buf[:4])
		h.Write(c.ID[:])
	}
	return Hash(h.Sum256())
}

// ErrBadPrefix is returned by ParsePrefix for a string that is not 4 to 64
// hex digits.
var ErrBadPrefix = errors.New("objects: malformed id prefix")

// MinPrefixLen is the shortest id prefix that resolves, in hex digits.
const MinPrefixLen = 4

// Prefix is a parsed id prefix: the first Nibbles hex digits of an id.
// Bytes holds them packed, with the low nibble of the last byte zero when
// Nibbles is odd.
type Prefix struct {
	Bytes   []byte
	Nibbles int
}

// ParsePrefix parses 4 to 64 hex digits (either case) as an id prefix. The
// error wraps ErrBadPrefix and quotes s.
func ParsePrefix(s string) (Prefix, error) {
	if len(s) < MinPrefixLen || len(s) > 64 {
		return Prefix{}, fmt.Errorf("%w: %q has %d hex digits, want %d to 64", ErrBadPrefix, s, len(s), MinPrefixLen)
	}
	padded := s
	if len(s)%2 == 1 {
		padded = s + "0"
	}
	b, err := hex.DecodeString(padded)
	if err != nil {
		return Prefix{}, fmt.Errorf("%w: %q is not hex", ErrBadPrefix, s)
	}
	return Prefix{Bytes: b, Nibbles: len(s)}, nil
}

// Match reports whether id starts with the prefix.
func (p Prefix) Match(id ID) bool {
	full := p.Nibbles / 2
	if p.Nibbles < 0 || p.Nibbles > 64 || len(p.Bytes) < (p.Nibbles+1)/2 {
		return false
	}
	if string(id[:full]) != string(p.Bytes[:full]) {
		return false
	}
	if p.Nibbles%2 == 1 {
		return id[full]&0xf0 == p.Bytes[full]
	}
	return true
}

// Low returns the smallest id with the prefix (the prefix followed by zeros).
func (p Prefix) Low() ID {
	var id ID
	copy(id[:], p.Bytes)
	return id
}

// String returns the prefix as lowercase hex digits.
func (p Prefix) String() string { return hex.EncodeToString(p.Bytes)[:p.Nibbles] }
