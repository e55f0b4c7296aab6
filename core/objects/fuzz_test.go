package objects

import (
	"bytes"
	"testing"
)

func seedAll(f *testing.F) {
	for _, g := range goldenObjects() {
		_, enc, err := Encode(g.obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1})
}

// roundTrip checks the canonical-encoding contract for one decoded object:
// encoding it again must give exactly the input.
func roundTrip(t *testing.T, k Kind, b []byte, obj any) {
	gk, enc, err := Encode(obj)
	if err != nil {
		t.Fatalf("decoded %s does not re-encode: %v", k, err)
	}
	if gk != k || !bytes.Equal(enc, b) {
		t.Fatalf("decode-then-encode of %s differs:\n in  %x\n out %x", k, b, enc)
	}
}

func FuzzDecodeTree(f *testing.F) { fuzzDecoder(f, KindTree, DecodeTree) }

func FuzzDecodeChangeset(f *testing.F) { fuzzDecoder(f, KindChangeset, DecodeChangeset) }

// fuzzDecoder fuzzes dec, the decoder of kind k: whatever it accepts must
// round-trip (roundTrip).
func fuzzDecoder[T any](f *testing.F, k Kind, dec func([]byte) (T, error)) {
	seedAll(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := dec(b)
		if err == nil {
			roundTrip(t, k, b, obj)
		}
	})
}

func FuzzDecode(f *testing.F) {
	seedAll(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		k := Kind(b[0] % 5)
		obj, err := Decode(k, b[1:])
		if err == nil {
			roundTrip(t, k, b[1:], obj)
		}
	})
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/a", "a//b", "a\x00", "a/./b", "a/", "é/\xff", "a/..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if plain, fault := plainPath(s), cleanPathFault(s); plain != (fault == nil) {
			t.Fatalf("%q: the one-pass check says %v, the long way %v", s, plain, fault)
		}
		p, err := CleanPath(s)
		if err != nil {
			return
		}
		for _, c := range SplitPath(p) {
			if ValidName(c) != nil {
				t.Fatalf("CleanPath accepted %q with bad component %q", s, c)
			}
		}
	})
}

func FuzzParsePrefix(f *testing.F) {
	f.Add("abcd")
	f.Add("ABCDE")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrefix(s)
		if err != nil {
			return
		}
		if !p.Match(p.Low()) {
			t.Fatalf("prefix %q does not match its own low id", s)
		}
	})
}
