package zblob

import (
	"bytes"
	"errors"
	"go/build"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// text is n bytes of something like source code: compressible.
func text(n int, seed uint64) []byte {
	var b bytes.Buffer
	r := rand.New(rand.NewPCG(seed, 2))
	for b.Len() < n {
		b.WriteString("func f")
		b.WriteByte(byte('a' + r.IntN(26)))
		b.WriteString("(x int) int { return x + 1 }\n")
	}
	return b.Bytes()[:n]
}

// noise is n random bytes: incompressible.
func noise(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestGroupsAreCompressedOnlyWhenItPays: a compressible group is appended
// as a smaller frame that decodes to it, and each member reads back at
// its offset; an incompressible group, one too small to gain and one over
// GroupMax are refused and leave dst as it was.
func TestGroupsAreCompressedOnlyWhenItPays(t *testing.T) {
	prefix := []byte("before")
	for _, c := range []struct {
		name  string
		group []byte
		want  bool
	}{
		{"text", text(20_000, 1), true},
		{"a full group", text(GroupMax, 2), true},
		{"noise", noise(5_000, 3), false},
		{"one byte", []byte("x"), false},
		{"empty", nil, false},
		{"over GroupMax", text(GroupMax+1, 4), false},
	} {
		out, ok := Append(bytes.Clone(prefix), c.group)
		if ok != c.want {
			t.Fatalf("%s: Append of %d bytes: %v (frame of %d); want %v", c.name, len(c.group), ok, len(out)-len(prefix), c.want)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("%s: Append changed dst's bytes", c.name)
		}
		if !ok {
			if len(out) != len(prefix) {
				t.Fatalf("%s: refused, but dst grew by %d bytes", c.name, len(out)-len(prefix))
			}
			continue
		}
		z := out[len(prefix):]
		got, err := Decode(z)
		if err != nil || !bytes.Equal(got, c.group) || len(z) >= len(c.group) {
			t.Fatalf("%s: a frame of %d bytes decodes to %d bytes, %v; want the group's %d back", c.name, len(z), len(got), err, len(c.group))
		}
		m, err := Member(got, 100, 50)
		if err != nil || !bytes.Equal(m, c.group[100:150]) {
			t.Fatalf("%s: member at 100: %q, %v", c.name, m, err)
		}
	}
}

// TestDamagedFramesAreErrorsNeverPanics: a frame with any bit flipped,
// cut short, or with bytes after it, is ErrDecode or (a flip the frame's
// checks cannot see) exactly the bytes its header declares, at most
// GroupMax, which the store's id check then rejects; never a panic. A
// member outside the group is ErrDecode.
func TestDamagedFramesAreErrorsNeverPanics(t *testing.T) {
	group := text(6_000, 7)
	z, ok := Append(nil, group)
	if !ok {
		t.Fatal("test group does not compress")
	}
	check := func(what string, z []byte) {
		got, err := Decode(z)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("%s: %v; want ErrDecode", what, err)
			}
		} else if len(got) > GroupMax {
			t.Fatalf("%s: %d bytes without an error; want at most GroupMax", what, len(got))
		}
		got, err = DecodeMember(z, 3_000, 100)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("%s, a member: %v; want ErrDecode", what, err)
			}
		} else if len(got) != 100 {
			t.Fatalf("%s, a member: %d bytes without an error; want 100", what, len(got))
		}
	}
	for i := range len(z) * 8 {
		d := bytes.Clone(z)
		d[i/8] ^= 1 << (i % 8)
		check("flip", d)
	}
	for i := range len(z) {
		check("cut", z[:i])
	}
	if _, err := Decode(append(bytes.Clone(z), z...)); !errors.Is(err, ErrDecode) {
		t.Fatalf("two frames: %v; want ErrDecode (more than the first declares)", err)
	}
	check("trailing bytes", append(bytes.Clone(z), 1, 2, 3))
	for _, m := range [][2]int64{{0, 6_001}, {5_999, 2}, {-1, 1}, {1, -1}, {1 << 40, 1}} {
		if _, err := Member(group, m[0], m[1]); !errors.Is(err, ErrDecode) {
			t.Fatalf("member %d+%d of a %d-byte group: %v; want ErrDecode", m[0], m[1], len(group), err)
		}
	}
}

// TestTheCacheServesOnlyItsKeys: a cached group is served for its key
// alone (epoch, segment, offset), the one used least recently of more
// than four is dropped, and a nil cache holds nothing.
func TestTheCacheServesOnlyItsKeys(t *testing.T) {
	var c Cache
	for i := range 5 {
		c.Put(Key{Epoch: 1, Seg: 2, Off: int64(i)}, []byte{byte(i)})
	}
	if _, ok := c.Get(Key{Epoch: 1, Seg: 2, Off: 0}, 0, 1); ok {
		t.Fatal("the oldest of five groups is still cached")
	}
	if g, ok := c.Get(Key{Epoch: 1, Seg: 2, Off: 4}, 0, 1); !ok || g[0] != 4 {
		t.Fatalf("the newest group: %v %v", g, ok)
	}
	for _, k := range []Key{{Epoch: 2, Seg: 2, Off: 4}, {Epoch: 1, Seg: 3, Off: 4}, {Epoch: 1, Seg: 2, Off: 5}} {
		if _, ok := c.Get(k, 0, 1); ok {
			t.Fatalf("served %+v, which was never put", k)
		}
	}
	// A group served is used: the next put drops the one used least
	// recently instead.
	c.Get(Key{Epoch: 1, Seg: 2, Off: 1}, 0, 1)
	c.Put(Key{Epoch: 1, Seg: 2, Off: 5}, []byte{5})
	if _, ok := c.Get(Key{Epoch: 1, Seg: 2, Off: 1}, 0, 1); !ok {
		t.Fatal("a group just served was dropped")
	}
	if _, ok := c.Get(Key{Epoch: 1, Seg: 2, Off: 2}, 0, 1); ok {
		t.Fatal("the group used least recently is still cached")
	}
	var big Cache
	big.SetEntries(8)
	for i := range 8 {
		big.Put(Key{Epoch: 1, Off: int64(i)}, []byte{byte(i)})
	}
	if _, ok := big.Get(Key{Epoch: 1, Off: 0}, 0, 1); !ok {
		t.Fatal("a cache of 8 dropped one of 8 groups")
	}
	var n *Cache
	n.Put(Key{}, []byte{1})
	if _, ok := n.Get(Key{}, 0, 1); ok {
		t.Fatal("a nil cache served a group")
	}
}

// TestConcurrentLoadsOfOneGroupDecodeItOnce: readers that want blobs of
// one group at the same time share one decode, a group that does not
// decode is kept by nobody (the next Load tries again), and a nil cache
// decodes every time.
func TestConcurrentLoadsOfOneGroupDecodeItOnce(t *testing.T) {
	want := text(50_000, 13)
	z, ok := Append(nil, want)
	if !ok {
		t.Fatal("the group does not compress")
	}
	var calls atomic.Int32
	release := make(chan struct{})
	c := Cache{decode: func(z []byte) ([]byte, error) {
		calls.Add(1)
		<-release
		return Decode(z)
	}}
	k := Key{Epoch: 1, Seg: 2, Off: 3}
	const readers = 8
	got := make(chan []byte, readers)
	for range readers {
		go func() {
			g, err := c.Load(k, z, 0, 100)
			if err != nil {
				t.Error(err)
			}
			got <- g
		}()
	}
	// Let every reader reach the cache before the one decode finishes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		_, busy := c.busy[k]
		c.mu.Unlock()
		if busy && calls.Load() == 1 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	for range readers {
		if g := <-got; !bytes.Equal(g, want[:100]) {
			t.Fatal("a reader got other bytes than the group's first 100")
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d readers decoded the group %d times; want once", readers, n)
	}

	bad := Key{Epoch: 1, Seg: 2, Off: 4}
	c.decode = nil
	if _, err := c.Load(bad, []byte("not a frame"), 0, 1); !errors.Is(err, ErrDecode) {
		t.Fatalf("a bad frame: %v; want ErrDecode", err)
	}
	if _, ok := c.Get(bad, 0, 1); ok {
		t.Fatal("a frame that did not decode left an entry")
	}
	var n *Cache
	if g, err := n.Load(k, z, 10, 10); err != nil || !bytes.Equal(g, want[10:20]) {
		t.Fatalf("a nil cache: %v", err)
	}
}

// TestAReadOfOneBlobDecodesOnlyAsFarAsIt: the first read of a blob inside
// a group decodes up to the blob's end and keeps nothing; a second read of
// that group, or a read of a group's first blob, decodes the whole group
// and keeps it; a read of a kept group decodes nothing.
func TestAReadOfOneBlobDecodesOnlyAsFarAsIt(t *testing.T) {
	group := text(GroupMax, 21)
	z, ok := Append(nil, group)
	if !ok {
		t.Fatal("the group does not compress")
	}
	var whole int
	c := Cache{decode: func(z []byte) ([]byte, error) {
		whole++
		return Decode(z)
	}}
	k, first := Key{Epoch: 1, Seg: 1, Off: 1}, Key{Epoch: 1, Seg: 1, Off: 2}
	for _, r := range []struct {
		key         Key
		inner, size int64
		whole       int // whole decodes of the read
		kept        bool
	}{
		{k, 1_000, 100, 0, false},
		{k, 200_000, 100, 1, true},
		{k, 100_000, 100, 0, true},
		{first, 0, 10, 1, true},
		{first, 5, 10, 0, true},
	} {
		whole = 0
		m, err := c.Load(r.key, z, r.inner, r.size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m, group[r.inner:r.inner+r.size]) {
			t.Fatalf("a read of %d bytes at %d returned other bytes", r.size, r.inner)
		}
		if _, kept := c.Get(r.key, 0, 1); whole != r.whole || kept != r.kept {
			t.Fatalf("a read of %d bytes at %d: %d whole decodes, kept %v; want %d, %v", r.size, r.inner, whole, kept, r.whole, r.kept)
		}
	}
	for _, at := range [][2]int64{{0, 1}, {1, 5_000}, {GroupMax - 1, 1}, {70_000, 100_000}} {
		m, err := DecodeMember(z, at[0], at[1])
		if err != nil || !bytes.Equal(m, group[at[0]:at[0]+at[1]]) {
			t.Fatalf("DecodeMember(%d, %d): %d bytes, %v; want the group's", at[0], at[1], len(m), err)
		}
	}
	for _, at := range [][2]int64{{GroupMax, 1}, {-1, 1}, {1, -1}} {
		if _, err := DecodeMember(z, at[0], at[1]); !errors.Is(err, ErrDecode) {
			t.Fatalf("DecodeMember(%d, %d) of a %d-byte group: %v; want ErrDecode", at[0], at[1], GroupMax, err)
		}
	}
}

// FuzzDecode: arbitrary bytes never panic, and what decodes is at most
// GroupMax bytes, whole or a prefix.
func FuzzDecode(f *testing.F) {
	for i, b := range [][]byte{text(3_000, 8), text(40_000, 9), append(text(500, 10), noise(500, 11)...)} {
		z, ok := Append(nil, b)
		if !ok {
			f.Fatalf("seed %d does not compress", i)
		}
		f.Add(z)
	}
	f.Fuzz(func(t *testing.T, z []byte) {
		got, err := Decode(z)
		if err == nil && len(got) > GroupMax {
			t.Fatalf("decoded %d bytes; want at most GroupMax", len(got))
		}
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("%v; want ErrDecode", err)
		}
		inner := int64(len(z) * 37 % 5_000)
		got, err = DecodeMember(z, inner, 64)
		if err == nil && len(got) != 64 {
			t.Fatalf("a member of 64 at %d: decoded %d bytes", inner, len(got))
		}
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("a member at %d: %v; want ErrDecode", inner, err)
		}
	})
}

// BenchmarkDecodeHalfAGroup is what a first read of a 4 KiB blob in the
// middle of a full group costs (DecodeMember).
func BenchmarkDecodeHalfAGroup(b *testing.B) {
	z, ok := Append(nil, text(GroupMax, 12))
	if !ok {
		b.Fatal("the group does not compress")
	}
	b.SetBytes(GroupMax / 2)
	for b.Loop() {
		if _, err := DecodeMember(z, GroupMax/2-4096, 4096); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeGroup is what a read of a blob of a full group costs
// when the group is not cached: one decode of GroupMax bytes.
func BenchmarkDecodeGroup(b *testing.B) { benchDecode(b, text(GroupMax, 12)) }

// benchDecode times whole decodes of group's frame.
func benchDecode(b *testing.B, group []byte) {
	z, ok := Append(nil, group)
	if !ok {
		b.Fatal("the group does not compress")
	}
	b.SetBytes(int64(len(group)))
	for b.Loop() {
		if _, err := Decode(z); err != nil {
			b.Fatal(err)
		}
	}
}

// goSource is up to n bytes of Go's own source, the kind of content the
// groups of an imported tree hold; the benchmark is skipped without it.
func goSource(b *testing.B, n int) []byte {
	b.Helper()
	var out []byte
	dir := filepath.Join(build.Default.GOROOT, "src", "net", "http")
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Skipf("no Go source to read: %v", err)
	}
	for _, e := range ents {
		if len(out) >= n {
			break
		}
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && e.Type().IsRegular() {
			out = append(out, data...)
		}
	}
	if len(out) < n {
		b.Skipf("only %d bytes of Go source in %s", len(out), dir)
	}
	return out[:n]
}

// BenchmarkDecodeGoSourceGroup is BenchmarkDecodeGroup on a group of Go
// source, whose blocks hold many short matches: there the room Decode
// leaves past the group (slack) keeps every block on the decoder's fast
// copies.
func BenchmarkDecodeGoSourceGroup(b *testing.B) { benchDecode(b, goSource(b, GroupMax)) }
