package objects

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/swarmops/swarmops/core/internal/b3"
)

// ErrMalformed is returned by every decoder for bytes that are not the
// canonical encoding of an object: truncated, trailing bytes, a bad
// version, an unsorted tree, a non-minimal field. It is wrapped with what
// was being decoded and the byte offset where decoding stopped. Because
// decoders reject everything non-canonical, each id has exactly one
// encoding, and decode-then-encode reproduces the input byte for byte.
var ErrMalformed = errors.New("objects: malformed encoding")

// ErrInvalid is returned by encoders for a value that has no canonical
// encoding (an unsorted tree, a bad entry name, a generation of zero). It
// exists so that the store can refuse a bad commit before hashing it.
var ErrInvalid = errors.New("objects: invalid object")

// Format limits. They are part of the format: a decoder rejects anything
// beyond them.
const (
	// FormatVersion is the first byte of every tree and changeset encoding.
	FormatVersion = 1
	// MaxNameLen is the longest entry name in bytes (Linux NAME_MAX), which
	// lets the name length fit one byte.
	MaxNameLen = 255
	// MaxParents bounds a changeset's parents (octopus merges included).
	MaxParents = 1024
	// MaxAgentLen bounds the agent name (a 2-byte length).
	MaxAgentLen = math.MaxUint16
	// MaxMessageLen bounds the message (16 MiB), so a corrupt length cannot
	// ask for gigabytes.
	MaxMessageLen = 16 << 20
)

// treeEntryFixed is the size of an entry without its name: mode, id, name length.
const treeEntryFixed = 4 + 32 + 1

// IDOf returns the id of an object of kind k whose canonical encoding is enc:
// BLAKE3-256 over the one-byte kind tag followed by enc. A one-byte tag is
// prefix-free across kinds, so a blob can never share an id with a tree
// whose encoding happens to equal its content.
func IDOf(k Kind, enc []byte) ID {
	h := b3.Get()
	h.WriteByte(byte(k))
	b3.Write(h.Hasher, enc)
	id := ID(h.Sum256())
	b3.Put(h)
	return id
}

// BlobID returns the id of a blob with content data.
func BlobID(data []byte) ID { return IDOf(KindBlob, data) }

// ValidName reports whether name can be a tree entry name: not empty, not
// "." or "..", no "/" and no NUL, at most MaxNameLen bytes, valid UTF-8
// (so that names print and compare the same everywhere).
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrBadPath)
	case name == "." || name == "..":
		return fmt.Errorf("%w: name %q", ErrBadPath, name)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name of %d bytes exceeds %d", ErrBadPath, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %q is not valid UTF-8", ErrBadPath, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return fmt.Errorf("%w: name %q contains %q", ErrBadPath, name, name[i])
		}
	}
	return nil
}

// Validate checks that t has a canonical encoding: every name valid, names
// strictly ascending bytewise (sorted, unique), every mode valid, no zero
// id. The error wraps ErrInvalid and names the entry.
func (t *Tree) Validate() error {
	for i, e := range t.Entries {
		if err := ValidName(e.Name); err != nil {
			return fmt.Errorf("%w: tree entry %d: %w", ErrInvalid, i, err)
		}
		if !e.Mode.Valid() {
			return fmt.Errorf("%w: tree entry %d (%q): mode %o", ErrInvalid, i, e.Name, e.Mode)
		}
		if e.ID.IsZero() {
			return fmt.Errorf("%w: tree entry %d (%q): zero id", ErrInvalid, i, e.Name)
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return fmt.Errorf("%w: tree entry %d (%q) not after %q", ErrInvalid, i, e.Name, t.Entries[i-1].Name)
		}
	}
	if uint64(len(t.Entries)) > math.MaxUint32 {
		return fmt.Errorf("%w: tree has %d entries", ErrInvalid, len(t.Entries))
	}
	return nil
}

// Encode returns the canonical encoding of t, or an error wrapping
// ErrInvalid if t is not valid (see Validate).
func (t *Tree) Encode() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	n := 5
	for _, e := range t.Entries {
		n += treeEntryFixed + len(e.Name)
	}
	b := make([]byte, 0, n)
	b = append(b, FormatVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Entries)))
	for _, e := range t.Entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Mode))
		b = append(b, e.ID[:]...)
		b = append(b, byte(len(e.Name)))
		b = append(b, e.Name...)
	}
	return b, nil
}

// EncodeID returns the canonical encoding of t and its id.
func (t *Tree) EncodeID() ([]byte, ID, error) {
	b, err := t.Encode()
	return withID(KindTree, b, err)
}

// ID returns t's id, or an error wrapping ErrInvalid.
func (t *Tree) ID() (ID, error) {
	_, id, err := t.EncodeID()
	return id, err
}

// Lookup returns the entry named name, using binary search over the sorted
// entries.
func (t *Tree) Lookup(name string) (Entry, bool) {
	lo, hi := 0, len(t.Entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.Entries[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(t.Entries) && t.Entries[lo].Name == name {
		return t.Entries[lo], true
	}
	return Entry{}, false
}

// Validate checks that c has a canonical encoding: generation at least 1,
// at most MaxParents parents, none zero and no duplicates, a non-zero root,
// agent and message within their limits. The error wraps ErrInvalid.
func (c *Changeset) Validate() error {
	if c.Generation == 0 {
		return fmt.Errorf("%w: changeset generation 0 (the first generation is 1)", ErrInvalid)
	}
	if len(c.Parents) > MaxParents {
		return fmt.Errorf("%w: changeset has %d parents, max %d", ErrInvalid, len(c.Parents), MaxParents)
	}
	for i, p := range c.Parents {
		if p.IsZero() {
			return fmt.Errorf("%w: changeset parent %d is the zero id", ErrInvalid, i)
		}
		for j := 0; j < i; j++ {
			if c.Parents[j] == p {
				return fmt.Errorf("%w: changeset parent %d repeats parent %d (%s)", ErrInvalid, i, j, p)
			}
		}
	}
	if c.Root.IsZero() {
		return fmt.Errorf("%w: changeset root is the zero id", ErrInvalid)
	}
	if len(c.Agent) > MaxAgentLen {
		return fmt.Errorf("%w: agent of %d bytes exceeds %d", ErrInvalid, len(c.Agent), MaxAgentLen)
	}
	if len(c.Message) > MaxMessageLen {
		return fmt.Errorf("%w: message of %d bytes exceeds %d", ErrInvalid, len(c.Message), MaxMessageLen)
	}
	return nil
}

// Encode returns the canonical encoding of c, or an error wrapping
// ErrInvalid. The time is stored as UTC seconds and nanoseconds; its
// location and monotonic reading are not part of the changeset.
func (c *Changeset) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	n := 1 + 2 + 32*len(c.Parents) + 32 + 32 + 8 + 8 + 4 + 2 + len(c.Agent) + 4 + len(c.Message)
	b := make([]byte, 0, n)
	b = append(b, FormatVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.Parents)))
	for _, p := range c.Parents {
		b = append(b, p[:]...)
	}
	b = append(b, c.Root[:]...)
	b = append(b, c.Delta[:]...)
	b = binary.BigEndian.AppendUint64(b, c.Generation)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Time.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Time.Nanosecond()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.Agent)))
	b = append(b, c.Agent...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Message)))
	b = append(b, c.Message...)
	return b, nil
}

// EncodeID returns the canonical encoding of c and its id.
func (c *Changeset) EncodeID() ([]byte, ID, error) {
	b, err := c.Encode()
	return withID(KindChangeset, b, err)
}

// withID returns the encoding b of an object of kind k with its id, or
// the error err of the encoding.
func withID(k Kind, b []byte, err error) ([]byte, ID, error) {
	if err != nil {
		return nil, ZeroID, err
	}
	return b, IDOf(k, b), nil
}

// ID returns c's id, or an error wrapping ErrInvalid.
func (c *Changeset) ID() (ID, error) {
	_, id, err := c.EncodeID()
	return id, err
}

// decoder reads big-endian fields and remembers the first failure with its
// offset, so decoders read straight-line and check once.
type decoder struct {
	what string
	b    []byte
	off  int
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d: %s", ErrMalformed, d.what, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail("%s: need %d bytes, have %d", field, n, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8(field string) uint8 {
	p := d.take(1, field)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) u16(field string) uint16 {
	p := d.take(2, field)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (d *decoder) u32(field string) uint32 {
	p := d.take(4, field)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *decoder) u64(field string) uint64 {
	p := d.take(8, field)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (d *decoder) id(field string) (id ID) {
	copy(id[:], d.take(32, field))
	return id
}

func (d *decoder) version() {
	if v := d.u8("version"); d.err == nil && v != FormatVersion {
		d.off--
		d.fail("version %d, want %d", v, FormatVersion)
	}
}

func (d *decoder) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// DecodeTree decodes a canonical tree encoding. Anything else (including a
// valid-looking tree with unsorted names) is an error wrapping ErrMalformed.
// It never panics and allocates at most in proportion to len(b).
func DecodeTree(b []byte) (*Tree, error) {
	d := &decoder{what: "tree", b: b}
	d.version()
	n := d.u32("entry count")
	if d.err == nil && uint64(n) > uint64(len(b)-d.off)/treeEntryFixed {
		d.fail("entry count %d does not fit in %d bytes", n, len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	t := &Tree{Entries: make([]Entry, 0, n)}
	for i := uint32(0); i < n && d.err == nil; i++ {
		start := d.off
		var e Entry
		e.Mode = Mode(d.u32("mode"))
		e.ID = d.id("id")
		e.Name = string(d.take(int(d.u8("name length")), "name"))
		if d.err != nil {
			break
		}
		if !e.Mode.Valid() {
			d.off = start
			d.fail("entry %d: mode %o", i, e.Mode)
		} else if e.ID.IsZero() {
			d.off = start + 4
			d.fail("entry %d: zero id", i)
		} else if err := ValidName(e.Name); err != nil {
			d.off = start + 4 + 32
			d.fail("entry %d: %v", i, err)
		} else if i > 0 && t.Entries[i-1].Name >= e.Name {
			d.off = start + 4 + 32
			d.fail("entry %d: name %q not after %q", i, e.Name, t.Entries[i-1].Name)
		}
		t.Entries = append(t.Entries, e)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeChangeset decodes a canonical changeset encoding. Anything else is
// an error wrapping ErrMalformed. It never panics.
func DecodeChangeset(b []byte) (*Changeset, error) {
	d := &decoder{what: "changeset", b: b}
	d.version()
	np := d.u16("parent count")
	if d.err == nil && np > MaxParents {
		d.off -= 2
		d.fail("%d parents, max %d", np, MaxParents)
	}
	if d.err == nil && int(np)*32 > len(b)-d.off {
		d.fail("%d parents do not fit in %d bytes", np, len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	c := &Changeset{}
	if np > 0 {
		c.Parents = make([]ID, np)
	}
	for i := range c.Parents {
		c.Parents[i] = d.id("parent")
		if d.err != nil {
			break
		}
		if c.Parents[i].IsZero() {
			d.off -= 32
			d.fail("parent %d is the zero id", i)
		}
		for j := 0; j < i && d.err == nil; j++ {
			if c.Parents[j] == c.Parents[i] {
				d.off -= 32
				d.fail("parent %d repeats parent %d", i, j)
			}
		}
	}
	c.Root = d.id("root")
	if d.err == nil && c.Root.IsZero() {
		d.off -= 32
		d.fail("root is the zero id")
	}
	copy(c.Delta[:], d.take(32, "delta"))
	c.Generation = d.u64("generation")
	if d.err == nil && c.Generation == 0 {
		d.off -= 8
		d.fail("generation 0")
	}
	sec := int64(d.u64("seconds"))
	nsec := d.u32("nanoseconds")
	if d.err == nil && nsec >= 1e9 {
		d.off -= 4
		d.fail("nanoseconds %d out of range", nsec)
	}
	c.Time = time.Unix(sec, int64(nsec)).UTC()
	c.Agent = string(d.take(int(d.u16("agent length")), "agent"))
	ml := d.u32("message length")
	if d.err == nil && ml > MaxMessageLen {
		d.off -= 4
		d.fail("message length %d exceeds %d", ml, MaxMessageLen)
	}
	c.Message = string(d.take(int(ml), "message"))
	if err := d.end(); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeBlob returns data as a Blob. Every byte string is a canonical blob,
// so it cannot fail; it exists for symmetry. The result aliases data.
func DecodeBlob(data []byte) Blob { return Blob(data) }

// Decode decodes the canonical encoding of an object of kind k and returns
// Blob, *Tree or *Changeset. An unknown kind is an error wrapping
// ErrMalformed.
func Decode(k Kind, b []byte) (any, error) {
	switch k {
	case KindBlob:
		return DecodeBlob(b), nil
	case KindTree:
		return DecodeTree(b)
	case KindChangeset:
		return DecodeChangeset(b)
	}
	return nil, fmt.Errorf("%w: unknown object kind %d", ErrMalformed, uint8(k))
}

// Encode returns the canonical encoding of a Blob, *Tree or *Changeset (as
// returned by Decode) and its kind.
func Encode(obj any) (Kind, []byte, error) {
	switch o := obj.(type) {
	case Blob:
		return KindBlob, []byte(o), nil
	case *Tree:
		b, err := o.Encode()
		return KindTree, b, err
	case *Changeset:
		b, err := o.Encode()
		return KindChangeset, b, err
	}
	return 0, nil, fmt.Errorf("%w: cannot encode %T", ErrInvalid, obj)
}

// equalEncoding is used by tests: decode-then-encode must reproduce b.
func equalEncoding(k Kind, b []byte) (bool, error) {
	obj, err := Decode(k, b)
	if err != nil {
		return false, err
	}
	_, enc, err := Encode(obj)
	if err != nil {
		return false, err
	}
	return bytes.Equal(enc, b), nil
}
