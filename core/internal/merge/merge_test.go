package merge

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/swarmops/swarmops/core/objects"
)

// file makes an entry whose id is derived from a content label.
func file(content string) objects.Entry {
	return objects.Entry{Mode: objects.ModeFile, ID: objects.ID{0: 1, 1: byte(len(content)), 2: content[0]}}
}

func tree(kv ...string) map[string]objects.Entry {
	m := map[string]objects.Entry{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = file(kv[i+1])
	}
	return m
}

func editsString(edits []HeadEdit) []string {
	var out []string
	for _, e := range edits {
		if e.Delete {
			out = append(out, "-"+e.Path)
		} else {
			out = append(out, "+"+e.Path)
		}
	}
	return out
}

func TestThreeWayMergeDecidesEachPathByWhoChangedIt(t *testing.T) {
	cases := []struct {
		name               string
		base, head, theirs map[string]objects.Entry
		edits, conflicts   []string
	}{
		{"theirs adds a file head lacks",
			tree("a", "1"), tree("a", "1", "h", "h"), tree("a", "1", "t", "t"), []string{"+t"}, nil},
		{"theirs modifies a file head left alone",
			tree("a", "1"), tree("a", "1", "h", "h"), tree("a", "2"), []string{"+a"}, nil},
		{"theirs deletes a file head left alone",
			tree("a", "1", "b", "b"), tree("a", "1", "b", "b"), tree("a", "1"), []string{"-b"}, nil},
		{"both made the same change: nothing to do",
			tree("a", "1"), tree("a", "2"), tree("a", "2"), nil, nil},
		{"both deleted: nothing to do",
			tree("a", "1"), tree(), tree(), nil, nil},
		{"both modified differently: conflict",
			tree("a", "1"), tree("a", "2"), tree("a", "3"), nil, []string{"a"}},
		{"head deleted what theirs modified: conflict",
			tree("a", "1"), tree(), tree("a", "3"), nil, []string{"a"}},
		{"both added differently: conflict",
			tree(), tree("n", "x"), tree("n", "y"), nil, []string{"n"}},
		{"head's own changes elsewhere never matter",
			tree("a", "1", "z", "z"), tree("a", "1", "z", "Z"), tree("a", "2", "z", "z"), []string{"+a"}, nil},
		{"a file where head has a directory: conflict",
			tree(), tree("d/x", "x"), tree("d", "d"), nil, []string{"d"}},
		{"a file under a path head has as a file: conflict",
			tree(), tree("d", "d"), tree("d/x", "x"), nil, []string{"d/x"}},
		{"theirs turns a directory into a file head left alone",
			tree("d/x", "x"), tree("d/x", "x"), tree("d", "d"), []string{"+d", "-d/x"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New(c.base, c.head, c.theirs)
			edits, conflicts := m.Result()
			if got := editsString(edits); !slices.Equal(got, c.edits) {
				t.Errorf("edits: got %v, want %v", got, c.edits)
			}
			if !slices.Equal(conflicts, c.conflicts) {
				t.Errorf("conflicts: got %v, want %v", conflicts, c.conflicts)
			}
		})
	}
}

func TestForEachDirListsProperAncestors(t *testing.T) {
	var got []string
	forEachDir("a/b/c", func(d string) { got = append(got, d) })
	if want := []string{"a", "a/b"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	got = nil
	forEachDir("top", func(d string) { got = append(got, d) })
	if len(got) != 0 {
		t.Fatalf("got %v for a top-level path, want none", got)
	}
}

// drawTree draws a small tree over a fixed alphabet of paths, so that the
// three sides overlap often.
func drawTree(t *rapid.T, label string) map[string]objects.Entry {
	paths := []string{"a", "b", "c", "d/x", "d/y", "e/f/g", "e"}
	m := map[string]objects.Entry{}
	for _, p := range paths {
		if rapid.Bool().Draw(t, label+" has "+p) {
			m[p] = file(rapid.SampledFrom([]string{"1", "2", "33"}).Draw(t, label+" content "+p))
		}
	}
	// One tree never holds a path as a file and as a directory.
	if _, ok := m["e/f/g"]; ok {
		delete(m, "e")
	}
	return m
}

// drawEdit draws a tree that keeps each of base's paths with probability
// one half and otherwise drops or rewrites it (or adds it, if base lacks it).
func drawEdit(t *rapid.T, base map[string]objects.Entry, label string) map[string]objects.Entry {
	paths := []string{"a", "b", "c", "d/x", "d/y", "e/f/g", "e"}
	m := map[string]objects.Entry{}
	for _, p := range paths {
		switch rapid.IntRange(0, 3).Draw(t, label+" edit of "+p) {
		case 0, 1:
			if e, ok := base[p]; ok {
				m[p] = e
			}
		case 2: // drop
		case 3:
			m[p] = file(rapid.SampledFrom([]string{"1", "2", "33"}).Draw(t, label+" content "+p))
		}
	}
	if _, ok := m["e/f/g"]; ok {
		delete(m, "e")
	}
	return m
}

// TestIncrementalRemergeEqualsAFreshMerge is the claim behind
// LandResult.Remerged: moving a merge onto a newer head by the head's diff
// alone gives exactly the edits and conflicts a merge from scratch against
// the newer head gives.
func TestIncrementalRemergeEqualsAFreshMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base, theirs := drawTree(t, "base"), drawTree(t, "theirs")
		h1, h2 := drawTree(t, "head1"), drawTree(t, "head2")
		inc := New(maps.Clone(base), maps.Clone(h1), maps.Clone(theirs))
		var edits []HeadEdit
		for _, p := range ChangedPaths(h1, h2) {
			e, ok := h2[p]
			_, had := h1[p]
			edits = append(edits, HeadEdit{Path: p, Delete: !ok, Entry: e, Had: had})
		}
		if n := inc.AdvanceHead(edits); n != len(edits) {
			t.Fatalf("AdvanceHead reported %d re-merged paths, want %d", n, len(edits))
		}
		fresh := New(maps.Clone(base), maps.Clone(h2), maps.Clone(theirs))
		ge, gc := inc.Result()
		we, wc := fresh.Result()
		if fmt.Sprint(ge) != fmt.Sprint(we) || !slices.Equal(gc, wc) {
			t.Fatalf("incremental: edits %v conflicts %v\nfresh:       edits %v conflicts %v", ge, gc, we, wc)
		}
	})
}

// TestMergeResultIsTheirsOverHead checks the result against the definition:
// applying the edits to head yields head with theirs' changes, whenever
// there is no conflict.
func TestMergeResultIsTheirsOverHead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// head and theirs are edits of base, so most draws merge cleanly;
		// independent trees conflicted so often that rapid ran out of
		// valid draws now and then.
		base := drawTree(t, "base")
		head, theirs := drawEdit(t, base, "head"), drawEdit(t, base, "theirs")
		edits, conflicts := New(maps.Clone(base), maps.Clone(head), maps.Clone(theirs)).Result()
		if len(conflicts) > 0 {
			t.Skip("conflicting draw")
		}
		got := maps.Clone(head)
		for _, e := range edits {
			if e.Delete {
				delete(got, e.Path)
			} else {
				got[e.Path] = e.Entry
			}
		}
		for _, p := range ChangedPaths(base, theirs) {
			te, tok := theirs[p]
			ge, gok := got[p]
			if !sameEntry(te, tok, ge, gok) {
				t.Fatalf("path %q: merged %v/%v, theirs %v/%v", p, ge, gok, te, tok)
			}
		}
		changed := map[string]bool{}
		for _, p := range ChangedPaths(base, theirs) {
			changed[p] = true
		}
		for p, he := range head {
			if changed[p] {
				continue
			}
			if ge, ok := got[p]; !ok || ge != he {
				t.Fatalf("path %q that theirs did not change lost head's value", p)
			}
		}
		for p := range got {
			forEachDir(p, func(d string) {
				if _, clash := got[d]; clash {
					t.Fatalf("merged tree holds %q as a file and as a directory", d)
				}
			})
		}
	})
}

func TestContestedOffersOnlyPathsBothSidesChanged(t *testing.T) {
	cases := []struct {
		name               string
		base, head, theirs map[string]objects.Entry
		path               string
		want               bool
	}{
		{"both modified differently", tree("a", "1"), tree("a", "2"), tree("a", "3"), "a", true},
		{"both added differently", tree(), tree("n", "x"), tree("n", "y"), "n", true},
		{"head deleted what theirs modified", tree("a", "1"), tree(), tree("a", "3"), "a", true},
		{"only theirs modified", tree("a", "1"), tree("a", "1"), tree("a", "3"), "a", false},
		{"both made the same change", tree("a", "1"), tree("a", "3"), tree("a", "3"), "a", false},
		{"a file where head has a directory (a layout clash)", tree(), tree("d/x", "x"), tree("d", "d"), "d", false},
		{"a path theirs never changed", tree("a", "1"), tree("a", "2"), tree("a", "1"), "a", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ok := New(c.base, c.head, c.theirs).Contested(c.path)
			if ok != c.want {
				t.Fatalf("Contested(%q) = %v; want %v", c.path, ok, c.want)
			}
			if ok && (s.HasHead != (len(c.head) > 0) || !s.HasTheirs || s.Theirs != c.theirs[c.path]) {
				t.Fatalf("sides %+v do not match the trees", s)
			}
		})
	}
}

func TestModeMergesThreeWaysApartFromContent(t *testing.T) {
	const f, x = objects.ModeFile, objects.ModeExec
	cases := []struct {
		name               string
		base, head, theirs objects.Mode
		want               objects.Mode
		ok                 bool
	}{
		{"theirs made it executable", f, f, x, x, true},
		{"head made it executable", f, x, f, x, true},
		{"both made it executable", f, x, x, x, true},
		{"theirs cleared the bit", x, x, f, f, true},
		{"neither changed it", x, x, x, x, true},
		{"both added it alike", 0, x, x, x, true},
		{"both added it with different modes", 0, f, x, f, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Mode(c.base, c.head, c.theirs)
			if got != c.want || ok != c.ok {
				t.Fatalf("Mode(%o, %o, %o) = %o, %v; want %o, %v", c.base, c.head, c.theirs, got, ok, c.want, c.ok)
			}
		})
	}
}
