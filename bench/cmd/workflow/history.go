package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// historyCommits is the length of the history step's git history: the
// tree's import and then one-line commits.
const historyCommits = 1000

// history is the history step of run r. It makes a git history of
// historyCommits commits over the tree (the tree, then one-line commits by
// git fast-import), and times, each as a whole process:
//
//   - import-history: `swarmops import --git SRC main --history`;
//   - export: `swarmops export --git DST main` of the whole history;
//   - export-incr: the same again after one new changeset;
//   - gc: `swarmops gc` on the store, and `git gc` on the exported
//     repository (the same history), side by side.
//
// Two checks go with the samples as metrics: `git fsck --strict` of the
// export (fsck_ok), and the exported tip's parent having the tree id of
// the source's tip (same_tree): an import and an export of a git branch
// give back git's own tree ids.
func (b *bench) history(r int) error {
	d, err := b.fresh(r, "history")
	if err != nil {
		return err
	}
	if !b.c.Keep {
		defer os.RemoveAll(d)
	}
	h := &histTurn{b: b, r: r, src: filepath.Join(d, "src.git"), dst: filepath.Join(d, "dst.git"),
		store: filepath.Join(d, "store"), scratch: d}
	steps := []string{"import-history", "export", "export-incr", "gc"}
	if err := h.sourceHistory(); err != nil {
		return err
	}
	p, err := b.execute(h.sw("init"))
	if err != nil {
		return err
	}
	if f := p.failure(); f != "" {
		b.skip(r, sysSwarmOps, "init failed: "+f, steps...)
		return nil
	}
	p, ok, err := b.timed(r, sysSwarmOps, "import-history", h.sw("--json", "import", "--git", h.src, "main", "--history"))
	if err != nil || !ok {
		b.skip(r, sysSwarmOps, "import --history failed: "+p.failure(), steps[1:]...)
		return err
	}
	if ok, err := h.exports(); err != nil || !ok {
		return err
	}
	if _, _, err := b.timed(r, sysSwarmOps, "gc", h.sw("--json", "gc")); err != nil {
		return err
	}
	g := cmdSpec{bin: b.c.Git, args: []string{"--git-dir", h.dst, "gc", "-q"}}
	_, _, err = b.timed(r, sysGit, "gc", g)
	return err
}

// histTurn is the state of one history step.
type histTurn struct {
	b               *bench
	r               int
	src, dst, store string
	scratch         string
	srcTree         string // the tree id of the source's tip
}

// sw is a swarmops command on the step's store.
func (h *histTurn) sw(args ...string) cmdSpec {
	return cmdSpec{bin: h.b.sw, args: append([]string{"--store", h.store}, args...)}
}

// git runs a set-up git command and returns its output.
func (h *histTurn) git(stdin []byte, args ...string) ([]byte, error) {
	c := cmdSpec{bin: h.b.c.Git, args: args, stdin: stdin}
	p, err := h.b.execute(c)
	if err == nil && p.exit != 0 {
		err = fmt.Errorf("%s: %s", c, p.failure())
	}
	return p.stdout, err
}

// sourceHistory makes the source repository: the tree as the first
// commit, then historyCommits-1 commits that each append a line to one of
// 16 files, in one fast-import stream.
func (h *histTurn) sourceHistory() error {
	gd := []string{"--git-dir", h.src}
	if _, err := h.git(nil, "init", "-q", "--bare", "-b", "main", h.src); err != nil {
		return err
	}
	wt := append(gd, "--work-tree", h.b.tree)
	if _, err := h.git(nil, append(wt, "add", "-A")...); err != nil {
		return err
	}
	if _, err := h.git(nil, append(wt, "commit", "-q", "-m", "import")...); err != nil {
		return err
	}
	var s bytes.Buffer
	lines := map[int]string{}
	for i := 1; i < historyCommits; i++ {
		f := i % 16
		lines[f] += fmt.Sprintf("line %d\n", i)
		msg := fmt.Sprintf("history %d", i)
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter agent-%d <agent-%d@swarmops> %d +0000\ndata %d\n%s\n", f, f, 1_700_000_000+i, len(msg), msg)
		if i == 1 {
			s.WriteString("from refs/heads/main^0\n")
		}
		fmt.Fprintf(&s, "M 100644 inline workflow-history/f%02d.txt\ndata %d\n%s\n", f, len(lines[f]), lines[f])
	}
	if _, err := h.git(s.Bytes(), append(gd, "fast-import", "--quiet")...); err != nil {
		return err
	}
	out, err := h.git(nil, append(gd, "rev-parse", "main^{tree}")...)
	h.srcTree = strings.TrimSpace(string(out))
	return err
}

// exports times the whole export and, after one new changeset, the
// incremental one, checking the result with fsck and the tree ids.
func (h *histTurn) exports() (bool, error) {
	b, r := h.b, h.r
	p, ok, err := b.timed(r, sysSwarmOps, "export", h.sw("--json", "export", "--git", h.dst, "main"))
	if err != nil || !ok {
		b.skip(r, sysSwarmOps, "export failed: "+p.failure(), "export-incr", "gc")
		return false, err
	}
	list := filepath.Join(h.scratch, "one.list")
	if err := os.WriteFile(list, []byte("put workflow-history/one.txt = \"one more\"\n"), 0o644); err != nil {
		return false, err
	}
	if p, err = b.execute(h.sw("--json", "commit", "-F", list, "--advance", "main", "-m", "one more")); err != nil {
		return false, err
	}
	if f := p.failure(); f != "" {
		b.skip(r, sysSwarmOps, "the new changeset failed: "+f, "export-incr", "gc")
		return false, nil
	}
	c := h.sw("--json", "export", "--git", h.dst, "main")
	if p, err = b.execute(c); err != nil {
		return false, err
	}
	extra := map[string]float64{"fsck_ok": 0, "same_tree": 0}
	if p.exit == 0 {
		if _, err := h.git(nil, "--git-dir", h.dst, "fsck", "--strict", "--no-progress"); err == nil {
			extra["fsck_ok"] = 1
		}
		out, err := h.git(nil, "--git-dir", h.dst, "rev-parse", "refs/heads/swarm/main~1^{tree}")
		if err == nil && strings.TrimSpace(string(out)) == h.srcTree {
			extra["same_tree"] = 1
		}
	}
	return b.keep(r, sysSwarmOps, "export-incr", c, p, extra), nil
}

// historyTable prints the history step: the import of the git history,
// the whole and the incremental export, their checks, and gc beside
// `git gc` on the exported repository.
func (w *mdWriter) historyTable() {
	rows := []row{{sysSwarmOps, "import-history", "swarmops `import --git SRC main --history`"},
		{sysSwarmOps, "export", "swarmops `export --git DST main`, whole history"},
		{sysSwarmOps, "export-incr", "swarmops `export`, one new changeset"},
		{sysSwarmOps, "gc", "swarmops `gc`"}, {sysGit, "gc", "`git gc` of the exported repository"}}
	if !w.any(rows) {
		return
	}
	w.p("#### A history of %d commits: import, export, gc\n\n", historyCommits)
	w.p("A git history of the tree and %d one-line commits (git fast-import) is imported into a fresh store with its history, exported into a fresh bare repository, exported again after one new changeset, and collected. The incremental export's notes give `commits_written`, whether `git fsck --strict` passed, and whether the exported tip's parent has the source tip's tree id.\n\n", historyCommits-1)
	w.p("| step | ms | peak RSS MB | notes |\n|---|---|---|---|\n")
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) == 0 {
			continue
		}
		var n string
		if rw.step == "export-incr" {
			n = fmt.Sprintf("commits written %s; fsck --strict passed %s; same tree %s", w.x.cell(rw.sys, rw.step, metric("out_commits_written")),
				w.x.cell(rw.sys, rw.step, metric("fsck_ok")), w.x.cell(rw.sys, rw.step, metric("same_tree")))
		}
		if rw.step == "export" {
			n = "commits written " + w.x.cell(rw.sys, rw.step, metric("out_commits_written"))
		}
		w.p("| %s | %s | %s | %s |\n", rw.label, w.x.cell(rw.sys, rw.step, wall), w.x.cell(rw.sys, rw.step, rssMB), n)
	}
	w.p("\n")
}
