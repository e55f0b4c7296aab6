package gitx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/faultfs"
)

// requireGit skips a test that needs the git executable when there is
// none.
func requireGit(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("git is not on PATH: export and import drive git itself")
	}
}

// memStore returns a store on a memory filesystem: the tests read it
// through snapshots, and its syncs cost nothing.
func memStore(tb testing.TB) *core.Store {
	tb.Helper()
	s, err := core.Create("/s", core.Options{FS: faultfs.NewMem()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// snap returns a fresh snapshot of s.
func snap(tb testing.TB, s *core.Store) *core.Snapshot {
	tb.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	return sn
}

// testGitEnv shuts out every configuration file and fixes the identity
// and dates of commits the tests make with git.
func testGitEnv(tb testing.TB) []string {
	home := tb.TempDir()
	return append(gitEnv(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Ada Lovelace", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Charles Babbage", "GIT_COMMITTER_EMAIL=cb@example.com")
}

// git runs git in dir with stdin and returns its standard output, failing
// the test if it fails.
func git(tb testing.TB, env []string, dir string, stdin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, errOut.String())
	}
	return out.String()
}

// history is a generated store history and what the generator knows of
// it.
type history struct {
	s      *core.Store
	count  int // changesets committed
	merges int
}

// genHistory commits n changesets to s through the public API: a tree
// seeded from Go's own strings package, edits, new files in new
// directories, deletions, executable bits switched on and off, symbolic
// links, files replacing directories, five agents (one empty, one with
// characters git refuses in a name), refs main and side/N, and a
// two-parent merge of a side line into main every 40 changesets. The
// history is the same for the same seed.
func genHistory(tb testing.TB, s *core.Store, n int, seed uint64) *history {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	h := &history{s: s}
	agents := []string{"agent-1", "agent-2", "", "Bob <bob@example>", "ağent\tthree"}
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	commit := func(parents []core.ID, changes []core.Change, advance string) core.ID {
		h.count++
		id, err := s.Commit(core.CommitRequest{Parents: parents, Changes: changes, Advance: advance,
			Agent:   agents[rng.IntN(len(agents))],
			Message: fmt.Sprintf("change %d\n\nbody line with \"quotes\" and ünïcode\n", h.count),
			Time:    base.Add(time.Duration(h.count)*time.Second + time.Duration(rng.IntN(1e9)))})
		if err != nil {
			tb.Fatalf("commit %d: %v", h.count, err)
		}
		return id
	}
	files := seedFiles(tb)
	var first []core.Change
	for _, p := range sortedKeys(files) {
		first = append(first, core.Change{Path: "strings/" + p, Data: files[p]})
	}
	first = append(first,
		core.Change{Path: "bin/run.sh", Data: []byte("#!/bin/sh\necho run\n"), Mode: objects.ModeExec},
		core.Change{Path: "link-to-readme", Data: []byte("strings/strings.go"), Mode: objects.ModeSymlink},
		core.Change{Path: "dir with space/quote\"d\\name", Data: []byte("odd names\n")})
	main := commit(nil, first, "main")
	live := []string{"bin/run.sh", "dir with space/quote\"d\\name"}
	for _, p := range sortedKeys(files) {
		live = append(live, "strings/"+p)
	}
	step := func(tip core.ID, ref string, i int) core.ID {
		var ch []core.Change
		switch k := rng.IntN(10); {
		case k < 5: // edit a file
			p := live[rng.IntN(len(live))]
			ch = append(ch, core.Change{Path: p, Data: fmt.Appendf(nil, "// edit %d of %s\n%s", i, ref, files[filepath.Base(p)])})
		case k < 6: // a new file in a new directory, possibly where a file was
			p := fmt.Sprintf("gen/d%d/f%d.txt", i%7, i)
			ch = append(ch, core.Change{Path: p, Data: fmt.Appendf(nil, "file %d\n", i)})
			live = append(live, p)
		case k < 7: // switch the executable bit
			p := live[rng.IntN(len(live))]
			mode := objects.ModeExec
			if rng.IntN(2) == 0 {
				mode = objects.ModeFile
			}
			data, _, err := snap(tb, s).ReadPath(tip, p)
			if err != nil {
				data = []byte("recreated\n")
			}
			ch = append(ch, core.Change{Path: p, Data: data, Mode: mode})
		case k < 8: // a symbolic link, to a file or dangling
			ch = append(ch, core.Change{Path: fmt.Sprintf("links/l%d", i%11),
				Data: fmt.Appendf(nil, "../%s", live[rng.IntN(len(live))]), Mode: objects.ModeSymlink})
		case k < 9 && len(live) > 40: // delete a file
			j := rng.IntN(len(live))
			p := live[j]
			if _, _, err := snap(tb, s).ReadPath(tip, p); err == nil {
				ch = append(ch, core.Change{Path: p, Delete: true})
			}
			live = append(live[:j], live[j+1:]...)
		default: // a file becomes a directory
			p := fmt.Sprintf("swap/x%d", i%5)
			if _, e, err := snap(tb, s).ReadPath(tip, p); err == nil && e.Mode != objects.ModeDir {
				ch = append(ch, core.Change{Path: p, Delete: true}, core.Change{Path: p + "/inner", Data: []byte("was a file\n")})
			} else if errors.Is(err, core.ErrNotFound) {
				ch = append(ch, core.Change{Path: p, Data: []byte("a file\n")})
			}
		}
		if len(ch) == 0 {
			ch = []core.Change{{Path: "counter", Data: fmt.Appendf(nil, "%d\n", i)}}
		}
		return commit([]core.ID{tip}, ch, ref)
	}
	for h.count < n {
		if h.count%40 == 39 && h.count+6 <= n {
			// A side line from main~2, then a two-parent merge into main
			// carrying the side's files.
			from, err := snap(tb, s).Resolve("main~2")
			if err != nil {
				from = main
			}
			ref := fmt.Sprintf("side/%d", h.merges)
			side := from
			if err := s.UpdateRefs(core.RefUpdate{Name: ref, New: from}); err != nil {
				tb.Fatal(err)
			}
			var carried []core.Change
			for j := 0; j < 3; j++ {
				p := fmt.Sprintf("side/%d/f%d", h.merges, j)
				carried = append(carried, core.Change{Path: p, Data: fmt.Appendf(nil, "side %d %d\n", h.merges, j)})
				side = commit([]core.ID{side}, carried[len(carried)-1:], ref)
			}
			main = commit([]core.ID{main, side}, carried, "main")
			h.merges++
			continue
		}
		main = step(main, "main", h.count)
	}
	return h
}

// seedFiles returns the files of Go's strings package (the real tree the
// generated history starts from), by base name.
func seedFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	dir := filepath.Join(runtime.GOROOT(), "src", "strings")
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Skipf("Go's source is not at %s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out[e.Name()] = data
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// gitTree lists the files of a git tree-ish: path -> mode and content,
// read with git ls-tree -r -z and one git cat-file --batch.
func gitTree(tb testing.TB, gitDir, treeish string) map[string]fileVal {
	tb.Helper()
	env := testGitEnv(tb)
	out := git(tb, env, gitDir, "", "--git-dir="+gitDir, "ls-tree", "-r", "-z", "--full-tree", treeish)
	type rec struct{ path, mode, sha string }
	var recs []rec
	var in strings.Builder
	for _, r := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
		if r == "" {
			continue
		}
		meta, path, _ := strings.Cut(r, "\t")
		f := strings.Fields(meta)
		recs = append(recs, rec{path, f[0], f[2]})
		in.WriteString(f[2] + "\n")
	}
	cmd := exec.Command("git", "--git-dir="+gitDir, "cat-file", "--batch")
	cmd.Env = env
	cmd.Stdin = strings.NewReader(in.String())
	raw, err := cmd.Output()
	if err != nil {
		tb.Fatalf("cat-file: %v", err)
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	files := map[string]fileVal{}
	for _, r := range recs {
		head, err := br.ReadString('\n')
		if err != nil {
			tb.Fatal(err)
		}
		size, _ := strconv.Atoi(strings.Fields(head)[2])
		data := make([]byte, size+1)
		if _, err := io.ReadFull(br, data); err != nil {
			tb.Fatal(err)
		}
		files[r.path] = fileVal{mode: r.mode, data: string(data[:size])}
	}
	return files
}

// fileVal is one file of a tree: its git mode and content.
type fileVal struct {
	mode string
	data string
}

// storeTree lists the files of changeset cs like gitTree does.
func storeTree(tb testing.TB, sn *core.Snapshot, cs core.ID) map[string]fileVal {
	tb.Helper()
	flat, err := sn.Flatten(cs)
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string]fileVal{}
	for p, e := range flat {
		data, err := sn.Blob(e.ID)
		if err != nil {
			tb.Fatal(err)
		}
		files[p] = fileVal{mode: fmt.Sprintf("%06o", uint32(e.Mode)), data: string(data)}
	}
	return files
}

// diffTrees describes how two file maps differ ("" if they do not).
func diffTrees(want, got map[string]fileVal) string {
	var b strings.Builder
	for _, p := range sortedKeys(want) {
		g, ok := got[p]
		switch {
		case !ok:
			fmt.Fprintf(&b, "missing %q\n", p)
		case g.mode != want[p].mode:
			fmt.Fprintf(&b, "%q: mode %s, want %s\n", p, g.mode, want[p].mode)
		case g.data != want[p].data:
			fmt.Fprintf(&b, "%q: content differs (%d bytes, want %d)\n", p, len(g.data), len(want[p].data))
		}
	}
	for _, p := range sortedKeys(got) {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, "extra %q\n", p)
		}
	}
	return b.String()
}
