package wire

import (
	"encoding/binary"
	"testing"
)

func TestAReaderReadsFieldsInOrderAndIsDoneAtTheLastByte(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, "abc"...)
	r := NewReader(b, 0)
	if v := r.Uvarint(); v != 300 {
		t.Fatalf("Uvarint = %d, want 300", v)
	}
	if v := r.Varint(); v != -7 {
		t.Fatalf("Varint = %d, want -7", v)
	}
	if s := string(r.Take(3)); s != "abc" {
		t.Fatalf("Take(3) = %q, want abc", s)
	}
	if !r.Done() || r.Pos != len(b) {
		t.Fatalf("Done = %v at %d of %d; want true at the end", r.Done(), r.Pos, len(b))
	}
}

func TestAFieldThatDoesNotFitMarksTheReaderBadAndReadsAsZero(t *testing.T) {
	for _, c := range []struct {
		name string
		read func(r *Reader) bool // reports whether the field read as zero
	}{
		{"uvarint", func(r *Reader) bool { return r.Uvarint() == 0 }},
		{"varint", func(r *Reader) bool { return r.Varint() == 0 }},
		{"take", func(r *Reader) bool { s := r.Take(32); return len(s) == 32 && s[0] == 0 }},
	} {
		r := NewReader([]byte{0x80}, 0) // a varint cut after its first byte; 1 byte for Take(32)
		if !c.read(r) || !r.Bad || r.Pos != 0 || r.Done() {
			t.Fatalf("%s of a cut field: Bad %v at %d, Done %v; want bad at 0, a zero value, not done", c.name, r.Bad, r.Pos, r.Done())
		}
	}
}

func TestTakeAfterAFailureReadsNothingAndAllocatesLittle(t *testing.T) {
	r := NewReader([]byte("abcdef"), 0)
	r.Bad = true
	if s := r.Take(2); string(s) != "\x00\x00" || r.Pos != 0 {
		t.Fatalf("Take(2) after a failure = %q at %d; want two zero bytes at 0", s, r.Pos)
	}
	if s := r.Take(1 << 40); len(s) >= maxJunk {
		t.Fatalf("Take of a damaged length returned %d bytes; want fewer than %d", len(s), maxJunk)
	}
}
