package worktree

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/vfs"
)

// TestPrefetchListsEveryDirectoryOnceInWalkOrder walks a real tree of 300
// directories through the prefetcher, the workers listing ahead with only
// 3 listings held at once, and expanding into directories the walk skips
// (whose listings are never taken). Every listing the walk takes matches
// the os package's, and the walk finishes: a held slot never blocks it.
func TestPrefetchListsEveryDirectoryOnceInWalkOrder(t *testing.T) {
	defer func(m int) { maxHeld = m }(maxHeld)
	maxHeld = 3
	dir := t.TempDir()
	for i := range 300 {
		d := filepath.Join(dir, fmt.Sprintf("a%d", i%7), fmt.Sprintf("b%d", i%11), fmt.Sprintf("c%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range i % 4 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	expand := func(d string, fis []fs.FileInfo) []dirJob {
		var subs []dirJob
		for _, fi := range fis {
			if fi.IsDir() {
				subs = append(subs, dirJob{dir: strings.TrimPrefix(d+"/"+fi.Name(), "./")})
			}
		}
		return subs
	}
	job := func(d string, _ fs.FileInfo) dirJob { return dirJob{dir: d} }
	for round := range 3 {
		root, err := vfs.OpenRoot(vfs.OS(), dir)
		if err != nil {
			t.Fatal(err)
		}
		pf := newPrefetcher(vfs.OS(), dir, expand, job)
		if !pf.on {
			t.Fatal("no workers on the real OS")
		}
		var walked []string
		var walk func(d string)
		walk = func(d string) {
			walked = append(walked, d)
			_, fis, err := pf.list(root, d, func() dirJob { return dirJob{dir: d} })
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			var got []string
			for _, fi := range fis {
				got = append(got, fi.Name())
			}
			want, err := os.ReadDir(filepath.Join(dir, d))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range want {
				names = append(names, e.Name())
			}
			if !slices.Equal(got, names) {
				t.Fatalf("round %d: %s listed %v, want %v", round, d, got, names)
			}
			for _, fi := range fis {
				p := strings.TrimPrefix(d+"/"+fi.Name(), "./")
				// The walk skips every b3 (the workers list them anyway)
				// and, in round 1, asks nothing ahead itself.
				if !fi.IsDir() || fi.Name() == "b3" {
					continue
				}
				if round != 1 {
					pf.ahead(p, fi)
				}
				walk(p)
			}
		}
		walk(".")
		pf.stop()
		root.Close()
		if len(walked) < 200 || !slices.IsSortedFunc(walked[1:], func(a, b string) int {
			return strings.Compare(strings.ReplaceAll(a, "/", "\x00"), strings.ReplaceAll(b, "/", "\x00"))
		}) {
			t.Fatalf("round %d: walked %d directories, out of walk order", round, len(walked))
		}
	}
}
