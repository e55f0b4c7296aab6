package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// swarmopsTurn is swarmops's turn in run r: import into a fresh store,
// check out, make the second commit, read, switch, status, one-file
// commits, then the same reads, status and commits through a server. A
// step whose command fails (or does not exist yet) is recorded as n/a
// with the reason, and the steps that need it are skipped with theirs.
func (b *bench) swarmopsTurn(r int) error {
	d, err := b.fresh(r, sysSwarmOps)
	if err != nil {
		return err
	}
	if !b.c.Keep {
		defer os.RemoveAll(d)
	}
	s := &swTurn{b: b, r: r, store: filepath.Join(d, "store"), wt: filepath.Join(d, "wt"), scratch: d}
	rest := []string{"size", "checkout", "log", "cat", "diff", "switch", "status", "edit-dir", "edit-tree"}
	p, err := b.execute(s.cmd("init"))
	if err != nil {
		return err
	}
	if f := p.failure(); f != "" {
		b.skip(r, sysSwarmOps, "init failed: "+f, append([]string{"import"}, rest...)...)
		return nil
	}
	p, ok, err := b.timed(r, sysSwarmOps, "import", s.cmd("--json", "commit", "--dir", b.tree, "--advance", "main", "-m", "import"))
	if err == nil {
		err = b.untrack()
	}
	if err != nil || !ok {
		b.skip(r, sysSwarmOps, "import failed: "+p.failure(), rest...)
		return err
	}
	if err := p.data(&s.c1); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if err := b.size(r, sysSwarmOps, "size", s.store, nil); err != nil {
		return err
	}
	return s.afterImport()
}

// swTurn is the state of one swarmops turn.
type swTurn struct {
	b              *bench
	r              int
	store, wt      string
	scratch        string
	c1, c2         struct{ ID string }
	checkedOut     bool     // the work tree exists
	atMain         bool     // the work tree is at main, so commits from it can advance main
	treeForm       []string // the form of a commit run inside the work tree that works
	treeFormFailed string
}

// cmd is a swarmops command on the turn's store.
func (s *swTurn) cmd(args ...string) cmdSpec {
	return cmdSpec{bin: s.b.sw, args: append([]string{"--store", s.store}, args...)}
}

func (s *swTurn) afterImport() error {
	b, r := s.b, s.r
	ok, err := b.checkout(r, sysSwarmOps, s.wt, s.cmd("--json", "checkout", "main", s.wt))
	if err != nil {
		return err
	}
	s.checkedOut = ok
	if err := s.secondCommit(); err != nil {
		return err
	}
	for k := 0; k < b.c.Reads && b.c.has("reads"); k++ {
		if err := s.reads(sysSwarmOps, nil); err != nil {
			return err
		}
	}
	if !s.checkedOut {
		b.skip(r, sysSwarmOps, "checkout failed", "switch", "status", "edit-dir", "edit-tree")
	} else if err := s.inWorkTree(); err != nil {
		return err
	}
	if b.c.Serve {
		return s.served()
	}
	return nil
}

// secondCommit commits the ten-file change to main through a change list,
// which every version of the CLI takes.
func (s *swTurn) secondCommit() error {
	var list strings.Builder
	for i, p := range s.b.rep.Tree.TenPaths {
		old, err := os.ReadFile(filepath.Join(s.b.tree, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		src := filepath.Join(s.scratch, fmt.Sprintf("ten-%d", i))
		if err := os.WriteFile(src, append(old, tenLine+"\n"...), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&list, "put %s < %s\n", quote(p), quote(src))
	}
	lf := filepath.Join(s.scratch, "ten.list")
	if err := os.WriteFile(lf, []byte(list.String()), 0o644); err != nil {
		return err
	}
	p, err := s.b.execute(s.cmd("--json", "commit", "-F", lf, "--advance", "main", "-m", "ten files"))
	if err != nil {
		return err
	}
	if err := p.data(&s.c2); err != nil {
		return fmt.Errorf("the ten-file commit: %w", err)
	}
	return nil
}

// tenLine is the line the second commit appends to each of its ten files.
const tenLine = "// workflow benchmark: the second commit"

// quote writes a change-list word as a quoted string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// reads runs log, cat and diff once each on main as sys, with env added.
func (s *swTurn) reads(sys string, env []string) error {
	for _, c := range []struct {
		step string
		args []string
	}{
		{"log", []string{"log", "-n", "10"}},
		{"cat", []string{"cat", "main:" + s.b.rep.Tree.CatPath}},
		{"diff", []string{"diff", "main~1", "main"}},
	} {
		cs := s.cmd(c.args...)
		cs.env = env
		if _, _, err := s.b.timed(s.r, sys, c.step, cs); err != nil {
			return err
		}
	}
	return nil
}

// inWorkTree switches the work tree between the two commits, then runs
// status and the one-file commits in it.
func (s *swTurn) inWorkTree() error {
	b := s.b
	cs := func(target string) cmdSpec { return s.cmd("--json", "checkout", target, s.wt) }
	failure, err := b.switches(s.r, sysSwarmOps, s.wt, s.c1.ID, s.c2.ID, s.c2.ID, cs)
	if err != nil {
		return err
	}
	if err := b.status(s.r, sysSwarmOps, s.cmd("status", s.wt)); err != nil {
		return err
	}
	if s.atMain = failure == ""; !s.atMain {
		b.skip(s.r, sysSwarmOps, "the work tree could not be switched to main: "+failure, "edit-dir", "edit-tree")
		return nil
	}
	for k := 0; k < b.c.Edits && b.c.has("edit"); k++ {
		if err := s.editDir(sysSwarmOps, k, nil); err != nil {
			return err
		}
	}
	for k := 0; k < b.c.Edits && b.c.has("edit"); k++ {
		if err := s.editInTree(k); err != nil {
			return err
		}
	}
	return nil
}

// editDir edits one file and commits the work tree with commit --dir.
func (s *swTurn) editDir(sys string, k int, env []string) error {
	if err := appendLine(s.wt, s.b.rep.Tree.EditPath, fmt.Sprintf("// workflow edit %s %d %d", sys, s.r, k)); err != nil {
		return err
	}
	c := s.cmd("--json", "commit", "--dir", s.wt, "--advance", "main", "-m", "edit")
	c.env = env
	_, _, err := s.b.timed(s.r, sys, "edit-dir", c)
	return err
}

// treeForms are the ways of committing from inside a work tree, tried in
// order: a bare commit that finds the tree and its store, then --dir .
// with the store found from the tree.
var treeForms = [][]string{
	{"--json", "commit", "--advance", "main", "-m", "edit"},
	{"--json", "commit", "--dir", ".", "--advance", "main", "-m", "edit"},
}

// editInTree edits one file and runs commit inside the work tree without
// --store. The first edit of a turn finds the form that works; a form
// that fails is noted in the report.
func (s *swTurn) editInTree(k int) error {
	b := s.b
	if err := appendLine(s.wt, b.rep.Tree.EditPath, fmt.Sprintf("// workflow edit in tree %d %d", s.r, k)); err != nil {
		return err
	}
	forms := treeForms
	if s.treeForm != nil {
		forms = [][]string{s.treeForm}
	}
	for i, f := range forms {
		c := cmdSpec{bin: b.sw, args: f, dir: s.wt}
		p, err := b.execute(c)
		if err != nil {
			return err
		}
		if p.exit != 0 && i < len(forms)-1 {
			s.noteForm(c, p.failure())
			continue
		}
		if b.keep(s.r, sysSwarmOps, "edit-tree", c, p, nil) {
			s.treeForm = f
		} else {
			s.noteForm(c, p.failure())
		}
		return nil
	}
	return nil
}

// noteForm records once per report that a form of the in-tree commit
// failed, and why.
func (s *swTurn) noteForm(c cmdSpec, why string) {
	n := strings.ReplaceAll(fmt.Sprintf("`%s` inside the work tree: %s", c, why), s.b.work, "$WORK")
	for _, have := range s.b.rep.Notes {
		if have == n {
			return
		}
	}
	s.b.rep.Notes = append(s.b.rep.Notes, n)
}

// served repeats the reads, status and one-file commits through a server
// (SWARMOPS_SERVER=required).
func (s *swTurn) served() error {
	b := s.b
	srv, err := startServer(b, s.store)
	if err != nil {
		b.skip(s.r, sysServe, "swarmops serve: "+err.Error(), "log", "cat", "diff", "status", "edit-dir")
		return nil
	}
	env := []string{"SWARMOPS_SERVER=required"}
	for k := 0; k < b.c.Reads && b.c.has("reads") && err == nil; k++ {
		err = s.reads(sysServe, env)
	}
	if err == nil && s.checkedOut {
		c := s.cmd("status", s.wt)
		c.env = env
		err = b.status(s.r, sysServe, c)
		for k := 0; k < b.c.Edits && b.c.has("edit") && s.atMain && err == nil; k++ {
			err = s.editDir(sysServe, k, env)
		}
	}
	if rss, serr := srv.stop(); serr != nil {
		logf("  swarmops serve: %v", serr)
	} else if err == nil {
		b.record(Sample{Run: s.r, System: sysServe, Step: "server", RSSKiB: rss})
	}
	return err
}

// server is a running `swarmops serve`.
type server struct {
	cmd  *exec.Cmd
	done chan error
}

// startServer starts `swarmops serve` on store and waits for its ready
// line (at most 30 s).
func startServer(b *bench, store string) (*server, error) {
	cmd := exec.Command(b.sw, "--store", store, "--json", "serve")
	cmd.Env = b.baseEnv
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	srv := &server{cmd: cmd, done: make(chan error, 1)}
	select {
	case line := <-ready:
		if !strings.Contains(line, `"ok":true`) {
			srv.stop()
			return nil, fmt.Errorf("not ready: %s", firstLine(line))
		}
	case <-time.After(30 * time.Second):
		srv.stop()
		return nil, errors.New("no ready line within 30s")
	}
	return srv, nil
}

// stop sends SIGTERM, waits up to 20 s (then kills), and returns the
// server's peak resident set in KiB.
func (s *server) stop() (int64, error) {
	go func() { s.done <- s.cmd.Wait() }()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		err = fmt.Errorf("did not stop within 20s of SIGTERM: %v", <-s.done)
	}
	var rss int64
	if s.cmd.ProcessState != nil {
		if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss
		}
	}
	return rss, err
}
