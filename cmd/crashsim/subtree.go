package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
)

// The work-tree part of the subprocess sweep crashes `swarmops update` on
// a work tree that has local edits, behind a main that other agents moved:
// a line merge, a conflict written with markers, files taken from main,
// a removal and a new directory. The store and the tree share one call
// count (SWARMOPS_TEST_CRASH_AT), so every call of the command is a crash
// point. After each crash (process model, real OS):
//
//   - each file of the tree holds what it held before the update or what
//     the uncrashed update leaves, never anything else;
//   - status (uncrashed) calls no file clean unless it holds its base's
//     content: every path of the base it does not list reads back as
//     `cat BASE:PATH` gives it.
//
// And the uncrashed update's conflict is listed by status afterwards.

// treeFiles are the files of the sweep's first revision, and the edits
// main and the work tree make to them.
var (
	treeBase = map[string]string{"reg.txt": "1\n2\n3\n4\n5\n6\n", "conf.txt": "a\nb\nc\n",
		"keep.txt": "k\n", "gone.txt": "g\n", "mine.txt": "m\n"}
	treeMain = "put reg.txt = \"1\\n2\\n3\\n4\\n5\\nSIX\\n\"\nput conf.txt = \"a\\ntheirs\\nc\\n\"\n" +
		"put keep.txt = \"K\\n\"\ndelete gone.txt\nput sub/new.txt = \"n\\n\"\n"
	treeEdits = map[string]string{"reg.txt": "ONE\n2\n3\n4\n5\n6\n", "conf.txt": "a\nours\nc\n", "mine.txt": "mine\n", "added.txt": "added\n"}
)

// treeSweep sets the tree up under tmp, crashes the update at every
// stride-th call, and returns the points crashed and the violations.
func (e *cliEnv) treeSweep(ctx context.Context, tmp string, stride, workers int64) (int, []string, error) {
	base, before, err := e.treeSetup(ctx, tmp)
	if err != nil {
		return 0, nil, err
	}
	done := filepath.Join(tmp, "tree-done")
	if err := crashsweep.CopyTree(base, done); err != nil {
		return 0, nil, err
	}
	args := func(root string) []string { return []string{"update", filepath.Join(root, "wt"), "--onto", "main"} }
	// The update leaves conf.txt conflicted, so it ends E_UNRESOLVED (18)
	// once it has done all its work: that, not 0, is its uncrashed end.
	if r, err := e.run(ctx, filepath.Join(done, "store"), 0, "", args(done)...); err != nil || r.code != unresolvedExit {
		return 0, nil, fmt.Errorf("work-tree sweep: the uncrashed update did not end E_UNRESOLVED: %v %s", err, r.outOr())
	}
	after, err := readTree(filepath.Join(done, "wt"))
	if err != nil {
		return 0, nil, err
	}
	var violations []string
	if st, err := e.treeStatus(ctx, done); err != nil || len(st.Conflicts) != 1 {
		violations = append(violations, fmt.Sprintf("VIOLATION: after the uncrashed update, status lists conflicts %v (%v), want conf.txt's", st.conflictPaths(), err))
	}
	points, vs, err := crashEveryCall(ctx, stride, workers, "update", "`swarmops update` of a work tree", "the work-tree part",
		func(at int64) ([]string, bool, error) { return e.treePoint(ctx, tmp, base, before, after, args, at) })
	return points, append(violations, vs...), err
}

// crashEveryCall crashes a command at every stride-th call, workers at a
// time, until a run completes uncrashed: point(at) runs it crashed at call
// at and returns the violations found, or fin when the command completed
// before that call. cmd and long name the command in errors and in each
// violation, part the piece of the subprocess sweep that reproduces it.
func crashEveryCall(ctx context.Context, stride, workers int64, cmd, long, part string,
	point func(at int64) (vs []string, fin bool, err error)) (int, []string, error) {
	var (
		mu         sync.Mutex
		points     int
		completed  bool
		violations []string
	)
	for n := int64(1); !completed; n += workers * stride {
		var wg sync.WaitGroup
		for k := int64(0); k < workers; k++ {
			wg.Add(1)
			go func(at int64) {
				defer wg.Done()
				vs, fin, err := point(at)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					violations = append(violations, fmt.Sprintf("%s at call %d: harness error: %v", cmd, at, err))
				}
				if fin {
					completed = true
					return
				}
				points++
				for _, v := range vs {
					violations = append(violations, fmt.Sprintf("VIOLATION: %s crashed at call %d: %s\n  reproduce: go run ./cmd/crashsim --subprocess (%s)", long, at, v, part))
				}
			}(n + k*stride)
		}
		wg.Wait()
		if ctx.Err() != nil {
			return points, violations, fmt.Errorf("interrupted")
		}
		if n > 100000 {
			return points, violations, fmt.Errorf("%s never completed", cmd)
		}
	}
	return points, violations, nil
}

// unresolvedExit is the exit status of an update that completed and left
// conflicts (E_UNRESOLVED).
const unresolvedExit = 18

// treeSetup makes the store and the work tree the sweep crashes the
// update on, and returns their directory and the tree's files.
func (e *cliEnv) treeSetup(ctx context.Context, tmp string) (string, map[string]string, error) {
	base := filepath.Join(tmp, "tree-base")
	store, wt := filepath.Join(base, "store"), filepath.Join(base, "wt")
	var list strings.Builder
	for p, c := range treeBase {
		fmt.Fprintf(&list, "put %s = %q\n", p, c)
	}
	for _, step := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"init"}},
		{list.String(), []string{"commit", "-F", "-", "--advance", "main"}},
		{"", []string{"checkout", "main", wt}},
		{treeMain, []string{"commit", "-F", "-", "--advance", "main"}},
	} {
		if r, err := e.run(ctx, store, 0, step.stdin, step.args...); err != nil || !r.env.OK {
			return "", nil, fmt.Errorf("work-tree sweep setup %v: %v %s", step.args, err, r.outOr())
		}
	}
	for p, c := range treeEdits {
		if err := os.WriteFile(filepath.Join(wt, p), []byte(c), 0o644); err != nil {
			return "", nil, err
		}
	}
	before, err := readTree(wt)
	return base, before, err
}

// treePoint copies the set-up tree and store, crashes the update at call
// at, and checks what it left.
func (e *cliEnv) treePoint(ctx context.Context, tmp, base string, before, after map[string]string, args func(string) []string, at int64) ([]string, bool, error) {
	work, done, vs, err := e.crashCopy(ctx, tmp, "tree-point-", base, args, at, unresolvedExit)
	defer os.RemoveAll(work)
	if done || vs != nil || err != nil {
		return vs, done, err
	}
	got, err := readTree(filepath.Join(work, "wt"))
	if err != nil {
		return nil, false, err
	}
	for p := range union(before, after) {
		if g := got[p]; g != before[p] && g != after[p] {
			vs = append(vs, fmt.Sprintf("%s holds %q, neither the old %q nor the new %q", p, g, before[p], after[p]))
		}
	}
	st, err := e.treeStatus(ctx, work)
	if err != nil {
		return append(vs, "status after the crash: "+err.Error()), false, nil
	}
	listed := map[string]bool{}
	for _, c := range st.Changes {
		listed[c.Path] = true
	}
	for p, g := range got {
		if listed[p] {
			continue
		}
		r, err := e.run(ctx, filepath.Join(work, "store"), 0, "", "cat", st.Base+":"+p)
		if err != nil {
			return nil, false, err
		}
		var c struct{ Content string }
		json.Unmarshal(r.env.Data, &c)
		if !r.env.OK || c.Content != g {
			vs = append(vs, fmt.Sprintf("status calls %s clean, but it holds %q and the base %q", p, g, c.Content))
		}
	}
	return vs, false, nil
}

// treeState is what status --json reports of a tree.
type treeState struct {
	Base      string
	Changes   []struct{ Path, Kind string }
	Conflicts []struct{ Path string }
}

func (s *treeState) conflictPaths() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, c := range s.Conflicts {
		out = append(out, c.Path)
	}
	return out
}

func (e *cliEnv) treeStatus(ctx context.Context, root string) (*treeState, error) {
	r, err := e.run(ctx, filepath.Join(root, "store"), 0, "", "status", filepath.Join(root, "wt"))
	if err != nil {
		return nil, err
	}
	if !r.env.OK {
		return nil, fmt.Errorf("status failed (exit %d): %s", r.code, r.out)
	}
	var st treeState
	if err := json.Unmarshal(r.env.Data, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// readTree maps every file below dir, the metadata directory left out, to
// its content.
func readTree(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".swarmops-tree" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out, err
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// outOr is a result's output for an error message (nil-safe).
func (r *cliResult) outOr() string {
	if r == nil {
		return ""
	}
	return string(r.out)
}

// crashCopy copies base into a new directory under tmp and runs args there
// crashed at call at: done when the command finished before that call
// (exit status ends, what it ends with uncrashed), a violation when it
// exited otherwise than by the crash. The caller removes work (empty when
// it was never made) and checks what the crash left.
func (e *cliEnv) crashCopy(ctx context.Context, tmp, prefix, base string, args func(string) []string, at int64, ends int) (work string, done bool, vs []string, err error) {
	if work, err = os.MkdirTemp(tmp, prefix); err != nil {
		return "", false, nil, err
	}
	if err := crashsweep.CopyTree(base, work); err != nil {
		return work, false, nil, err
	}
	r, err := e.run(ctx, filepath.Join(work, "store"), at, "", args(work)...)
	switch {
	case err != nil:
		return work, false, nil, err
	case r.code == ends:
		return work, true, nil, nil
	case r.code != faultfs.CrashExitStatus:
		return work, false, []string{fmt.Sprintf("exited %d instead of crashing: %s", r.code, r.out)}, nil
	}
	return work, false, nil, nil
}
