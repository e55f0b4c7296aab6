package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// gitTurn is one git system's turn in run r: `git add -A && git commit`
// into a fresh repository whose work tree is the shared tree, the size of
// .git once the background gc that commit starts has finished (and, at
// defaults, after `git gc`), `git worktree add`, and one-file commits; at
// defaults also the second commit, reads, switches and status. git-fsync
// runs every git command with core.fsync=all and core.fsyncMethod=fsync.
func (b *bench) gitTurn(r int, sys string) error {
	d, err := b.fresh(r, sys)
	if err != nil {
		return err
	}
	if !b.c.Keep {
		defer os.RemoveAll(d)
	}
	g := &gitState{b: b, r: r, sys: sys, repo: filepath.Join(d, "repo"), wt: filepath.Join(d, "wt"),
		tag: fmt.Sprintf("%d-run%d-%s", os.Getpid(), r, sys)}
	if sys == sysGitFsync {
		g.opts = gitFsync
	}
	if err := g.must(g.cmd("init", "-q", "-b", "main", g.repo)); err != nil {
		return err
	}
	ok, err := g.importTree()
	if err != nil || !ok {
		return err
	}
	if ok, err = b.checkout(r, sys, g.wt, g.cmd("-C", g.repo, "worktree", "add", "-q", "--detach", g.wt, "main")); err != nil || !ok {
		b.skip(r, sys, "worktree add failed", "switch", "status", "edit")
		return err
	}
	if sys == sysGit {
		if err := g.inWorkTree(); err != nil {
			return err
		}
	}
	for k := 0; k < b.c.Edits && b.c.has("edit"); k++ {
		if err := appendLine(g.wt, b.rep.Tree.EditPath, fmt.Sprintf("// workflow edit %s %d %d", sys, r, k)); err != nil {
			return err
		}
		if _, _, err := b.timed(r, sys, "edit", g.cmd("-C", g.wt, "commit", "-a", "-q", "-m", "edit")); err != nil {
			return err
		}
		if _, err := settle(g.tag, 10*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

type gitState struct {
	b                  *bench
	r                  int
	sys, repo, wt, tag string
	opts               []string
}

// cmd is a git command of this turn: its options first, and the tag that
// lets settle find what it leaves running.
func (g *gitState) cmd(args ...string) cmdSpec {
	return cmdSpec{bin: g.b.c.Git, args: append(append([]string(nil), g.opts...), args...), env: []string{tagVar + "=" + g.tag}}
}

// must runs c, which is set-up rather than a measurement, and fails the
// run if it fails.
func (g *gitState) must(c cmdSpec) error {
	p, err := g.b.execute(c)
	if err == nil && p.exit != 0 {
		err = fmt.Errorf("%s: %s", c, p.failure())
	}
	return err
}

// importTree times `git add -A` and `git commit` as one step, then waits
// for the background gc commit started (recorded, not timed as import),
// and records the sizes.
func (g *gitState) importTree() (bool, error) {
	b := g.b
	gd := []string{"--git-dir", filepath.Join(g.repo, ".git"), "--work-tree", b.tree}
	add := g.cmd(append(gd, "add", "-A")...)
	commit := g.cmd(append(gd, "commit", "-q", "-m", "import")...)
	pa, err := b.execute(add)
	if err != nil {
		return false, err
	}
	both := pa
	if pa.exit == 0 {
		pc, err := b.execute(commit)
		if err != nil {
			return false, err
		}
		both = proc{ms: pa.ms + pc.ms, rssKiB: max(pa.rssKiB, pc.rssKiB), exit: pc.exit, stdout: pc.stdout, stderr: pc.stderr}
		pa.stdout = nil
	}
	bg, err := settle(g.tag, 10*time.Minute)
	if err != nil {
		return false, err
	}
	c := add
	c.args = append(append([]string(nil), g.opts...), "add", "-A", "&&", "git")
	c.args = append(append(c.args, g.opts...), "commit", "-q", "-m", "import")
	ls, _ := b.execute(g.cmd(append(gd, "ls-files", "-z")...))
	extra := map[string]float64{"add_ms": pa.ms, "commit_ms": both.ms - pa.ms, "background_gc_ms": float64(bg.Milliseconds()),
		"entries": float64(bytes.Count(ls.stdout, []byte{0}))}
	if !b.keep(g.r, g.sys, "import", c, both, extra) {
		b.skip(g.r, g.sys, "import failed", "size", "checkout", "log", "cat", "diff", "switch", "status", "edit")
		return false, nil
	}
	if err := b.size(g.r, g.sys, "size", filepath.Join(g.repo, ".git"), nil); err != nil || g.sys != sysGit || !b.c.has("size") {
		return true, err
	}
	p, err := b.execute(g.cmd("-C", g.repo, "gc", "-q"))
	if err != nil || p.exit != 0 {
		return false, fmt.Errorf("git gc: %v %s", err, p.failure())
	}
	return true, b.size(g.r, g.sys, "size-gc", filepath.Join(g.repo, ".git"), map[string]float64{"gc_ms": p.ms})
}

// inWorkTree makes the second commit in the work tree, then times the
// reads, the switches and status there.
func (g *gitState) inWorkTree() error {
	b := g.b
	for _, p := range b.rep.Tree.TenPaths {
		if err := appendLine(g.wt, p, tenLine); err != nil {
			return err
		}
	}
	if err := g.must(g.cmd("-C", g.wt, "commit", "-a", "-q", "-m", "ten files")); err != nil {
		return err
	}
	if _, err := settle(g.tag, 10*time.Minute); err != nil {
		return err
	}
	c1, err := g.revParse("HEAD~1")
	if err != nil {
		return err
	}
	c2, err := g.revParse("HEAD")
	if err != nil {
		return err
	}
	for k := 0; k < b.c.Reads && b.c.has("reads"); k++ {
		for _, rd := range []struct{ step, args string }{{"log", "log -n 10"}, {"cat", "show HEAD:" + b.rep.Tree.CatPath}, {"diff", "diff HEAD~1 HEAD"}} {
			if _, _, err := b.timed(g.r, g.sys, rd.step, g.cmd(append([]string{"-C", g.wt}, strings.Fields(rd.args)...)...)); err != nil {
				return err
			}
		}
	}
	cs := func(target string) cmdSpec { return g.cmd("-C", g.wt, "checkout", "-q", "--detach", target) }
	failure, err := b.switches(g.r, g.sys, g.wt, c2, c1, c2, cs)
	if err != nil || failure != "" {
		return fmt.Errorf("git checkout between the two commits: %v%s", err, failure)
	}
	return b.status(g.r, g.sys, g.cmd("-C", g.wt, "status", "--porcelain"))
}

func (g *gitState) revParse(rev string) (string, error) {
	p, err := g.b.execute(g.cmd("-C", g.wt, "rev-parse", rev))
	if err == nil && p.exit != 0 {
		err = fmt.Errorf("git rev-parse %s: %s", rev, p.failure())
	}
	return strings.TrimSpace(string(p.stdout)), err
}
