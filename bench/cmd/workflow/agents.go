package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/swarmops/swarmops/bench/internal/envelope"
	"github.com/swarmops/swarmops/bench/internal/stats"
)

// agentSystem is one way the agents commit: its system and step names, and
// for agent i's change k, what to do before the commit and the commit.
type agentSystem struct {
	system, step string
	serve        bool   // with `swarmops serve` running
	na           string // why it cannot run, if it cannot
	prepare      func(i, k int) error
	commit       func(i, k int) cmdSpec
}

// agentFarm is the agents step's shared set-up: one store and one git
// repository, each holding the tree, and the agents' refs, branches and
// work trees.
type agentFarm struct {
	b                *bench
	dir, store, repo string
	paths            []string // agent i's file
	content          [][]byte // agent i's file as its change list last put it
	swErr, dirErr    string   // why the store, or the agents' work trees, could not be set up
	gitErr           string
	systems          []*agentSystem
}

// agents runs the agents step: set-up once, then in each run every agent
// system in counterbalanced order, each agent making --changes commits
// one process each.
func (b *bench) agents() error {
	// The agents' work trees (gigabytes) go with the work directory, after
	// the reports are written: removing them takes minutes.
	f := &agentFarm{b: b, dir: filepath.Join(b.work, "agents")}
	var err error
	if f.paths, err = agentPaths(b.files, &b.rep.Tree, b.c.Agents); err != nil {
		return err
	}
	if err := f.setUp(); err != nil {
		return err
	}
	for r := 0; r < b.c.Runs; r++ {
		for _, as := range order(f.systems, r) {
			b.rep.Envs = append(b.rep.Envs, RunEnv{r, as.system + "/" + as.step, turnEnv(b.work)})
			logf("agents run %d: %s %s", r, as.system, as.step)
			if err := f.swarm(r, as); err != nil {
				return err
			}
		}
	}
	return nil
}

// setUp imports the tree into a store and a git repository (not timed),
// and gives each agent its ref or branch and, where the flavour needs one,
// its work tree.
func (f *agentFarm) setUp() error {
	b := f.b
	if err := os.RemoveAll(f.dir); err != nil {
		return err
	}
	f.store, f.repo = filepath.Join(f.dir, "store"), filepath.Join(f.dir, "repo")
	logf("agents: set-up of %d agents", b.c.Agents)
	if err := f.setUpSwarmOps(); err != nil {
		return err
	}
	if err := f.setUpGit(); err != nil {
		return err
	}
	f.defineSystems()
	return nil
}

// setUpSwarmOps makes the store, each agent's refs (list/aNN, dir/aNN at
// main) and, for the dir flavour, each agent's work tree.
func (f *agentFarm) setUpSwarmOps() error {
	b := f.b
	sw := func(args ...string) cmdSpec {
		return cmdSpec{bin: b.sw, args: append([]string{"--store", f.store}, args...)}
	}
	steps := [][]string{{"init"}, {"--json", "commit", "--dir", b.tree, "--advance", "main", "-m", "import"}}
	for i := range f.paths {
		for _, fl := range b.c.Flavours {
			steps = append(steps, []string{"ref", "create", agentRef(fl, i), "main"})
		}
	}
	for _, args := range steps {
		p, err := b.execute(sw(args...))
		if err != nil {
			return err
		}
		if p.exit != 0 {
			f.swErr = fmt.Sprintf("set-up `%s`: %s", sw(args...), p.failure())
			return b.untrack()
		}
	}
	if err := b.untrack(); err != nil {
		return err
	}
	f.content = make([][]byte, len(f.paths))
	for i, p := range f.paths {
		var err error
		if f.content[i], err = os.ReadFile(filepath.Join(b.tree, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	if !slices.Contains(b.c.Flavours, "dir") {
		return nil
	}
	for i := range f.paths {
		p, err := b.execute(sw("--json", "checkout", "main", f.swTree(i)))
		if err != nil {
			return err
		}
		if p.exit != 0 {
			f.dirErr = "set-up checkout of the agents' work trees: " + p.failure()
			return nil
		}
	}
	return nil
}

// setUpGit makes the repository and a worktree on a branch of its own
// for each agent.
func (f *agentFarm) setUpGit() error {
	b := f.b
	tag := fmt.Sprintf("%d-agents-setup", os.Getpid())
	g := &gitState{b: b, sys: sysGit, repo: f.repo, tag: tag}
	gd := []string{"--git-dir", filepath.Join(f.repo, ".git"), "--work-tree", b.tree}
	steps := []cmdSpec{g.cmd("init", "-q", "-b", "main", f.repo), g.cmd(append(gd, "add", "-A")...), g.cmd(append(gd, "commit", "-q", "-m", "import")...)}
	for i := range f.paths {
		steps = append(steps, g.cmd("-C", f.repo, "worktree", "add", "-q", "-b", fmt.Sprintf("a%02d", i), f.gitTree(i), "main"))
	}
	for _, c := range steps {
		if err := g.must(c); err != nil {
			f.gitErr = err.Error()
			return nil
		}
		if _, err := settle(tag, 10*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

func agentRef(flavour string, i int) string { return fmt.Sprintf("%s/a%02d", flavour, i) }

func (f *agentFarm) swTree(i int) string  { return filepath.Join(f.dir, fmt.Sprintf("sw-a%02d", i)) }
func (f *agentFarm) gitTree(i int) string { return filepath.Join(f.dir, fmt.Sprintf("git-a%02d", i)) }

// changeLine is the line agent i's change k appends to its file.
func changeLine(i, k int) string { return fmt.Sprintf("// agent %02d change %d", i, k) }

// defineSystems lists the agent systems: each swarmops flavour embedded
// and (with --serve) through a server, then git at its defaults and with
// core.fsync=all.
func (f *agentFarm) defineSystems() {
	b := f.b
	for _, fl := range b.c.Flavours {
		for _, serve := range []bool{false, true} {
			if serve && !b.c.Serve {
				continue
			}
			as := &agentSystem{system: sysSwarmOps, step: "agents-" + fl, serve: serve, na: f.swErr}
			var env []string
			if serve {
				as.system, env = sysServe, []string{"SWARMOPS_SERVER=required"}
			}
			if fl == "list" {
				as.prepare, as.commit = f.listFlavour(env)
			} else {
				as.prepare, as.commit = f.dirFlavour(env)
				if as.na == "" {
					as.na = f.dirErr
				}
			}
			f.systems = append(f.systems, as)
		}
	}
	for _, sys := range []string{sysGit, sysGitFsync} {
		g := &gitState{b: b, sys: sys, tag: fmt.Sprintf("%d-agents-%s", os.Getpid(), sys)}
		if sys == sysGitFsync {
			g.opts = gitFsync
		}
		f.systems = append(f.systems, &agentSystem{system: sys, step: "agents", na: f.gitErr,
			prepare: func(i, k int) error { return appendLine(f.gitTree(i), f.paths[i], changeLine(i, k)) },
			commit:  func(i, k int) cmdSpec { return g.cmd("-C", f.gitTree(i), "commit", "-a", "-q", "-m", "change") }})
	}
}

// listFlavour: agent i keeps its file's content, appends its line, writes
// it to a scratch file and commits a one-line change list on stdin.
func (f *agentFarm) listFlavour(env []string) (func(i, k int) error, func(i, k int) cmdSpec) {
	src := func(i int) string { return filepath.Join(f.dir, fmt.Sprintf("list-a%02d", i)) }
	prepare := func(i, k int) error {
		f.content[i] = append(f.content[i], changeLine(i, k)+"\n"...)
		return os.WriteFile(src(i), f.content[i], 0o644)
	}
	commit := func(i, k int) cmdSpec {
		return cmdSpec{bin: f.b.sw, env: env, stdin: []byte(fmt.Sprintf("put %s < %s\n", quote(f.paths[i]), quote(src(i)))),
			args: []string{"--store", f.store, "--json", "commit", "-F", "-", "--advance", agentRef("list", i), "-m", "change"}}
	}
	return prepare, commit
}

// dirFlavour: agent i appends its line in its work tree and commits the
// tree with commit --dir.
func (f *agentFarm) dirFlavour(env []string) (func(i, k int) error, func(i, k int) cmdSpec) {
	prepare := func(i, k int) error { return appendLine(f.swTree(i), f.paths[i], changeLine(i, k)) }
	commit := func(i, k int) cmdSpec {
		return cmdSpec{bin: f.b.sw, env: env,
			args: []string{"--store", f.store, "--json", "commit", "--dir", f.swTree(i), "--advance", agentRef("dir", i), "-m", "change"}}
	}
	return prepare, commit
}

// agentResult is what one agent saw.
type agentResult struct {
	done, busy, failed int
	firstErr           string
	finish             time.Duration
	ms                 []float64
	rss                int64
}

// maxAttempts bounds the retries of one change after retryable failures.
const maxAttempts = 50

// swarm runs the agents of one system once: each, released together,
// makes its changes one process at a time, retrying a retryable failure.
func (f *agentFarm) swarm(r int, as *agentSystem) error {
	b := f.b
	if as.na != "" {
		b.record(Sample{Run: r, System: as.system, Step: as.step, Error: as.na})
		return nil
	}
	var srv *server
	if as.serve {
		var err error
		if srv, err = startServer(b, f.store); err != nil {
			b.record(Sample{Run: r, System: as.system, Step: as.step, Error: "swarmops serve: " + err.Error()})
			return nil
		}
	}
	res := make([]agentResult, b.c.Agents)
	var wg sync.WaitGroup
	start := make(chan struct{})
	var t0 time.Time
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i] = f.agent(i, r, as)
			res[i].finish = time.Since(t0)
		}()
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)
	s := summarizeAgents(res, wall)
	s.Run, s.System, s.Step, s.Command = r, as.system, as.step, as.commit(0, 0).String()
	if srv != nil {
		rss, err := srv.stop()
		if err != nil {
			return fmt.Errorf("swarmops serve: %w", err)
		}
		s.Metrics["server_maxrss_kib"] = float64(rss)
	}
	b.record(s)
	return nil
}

// agent makes agent i's changes in run r.
func (f *agentFarm) agent(i, r int, as *agentSystem) agentResult {
	var a agentResult
	for k := 0; k < f.b.c.Changes; k++ {
		if err := as.prepare(i, r*f.b.c.Changes+k); err != nil {
			a.failed++
			a.firstErr = err.Error()
			return a
		}
		for attempt := 1; ; attempt++ {
			p, err := f.b.execute(as.commit(i, k))
			if err == nil && p.exit == 0 {
				a.done++
				a.ms = append(a.ms, p.ms)
				a.rss = max(a.rss, p.rssKiB)
				break
			}
			why := p.failure()
			if err != nil {
				why = err.Error()
			}
			if err == nil && retryable(p) && attempt < maxAttempts {
				a.busy++
				continue
			}
			a.failed++
			if a.firstErr == "" {
				a.firstErr = why
			}
			break
		}
	}
	return a
}

// retryable is a failure an agent runs again: swarmops's retryable codes
// (E_BUSY, E_UNAVAILABLE), or a lock git could not take.
func retryable(p proc) bool {
	var env envelope.Envelope
	if json.Unmarshal(p.stdout, &env) == nil && env.Error != nil {
		return env.Error.Retryable
	}
	return strings.Contains(string(p.stderr), ".lock")
}

// summarizeAgents turns the agents' results into one sample: commits per
// second over the whole run, the spread of the agents' finishing times,
// the retried failures (E_BUSY and the like) and the failures.
func summarizeAgents(res []agentResult, wall time.Duration) Sample {
	var done, busy, failed int
	var fin, ms []float64
	var rss int64
	var firstErr string
	for _, a := range res {
		done, busy, failed = done+a.done, busy+a.busy, failed+a.failed
		fin = append(fin, a.finish.Seconds())
		ms = append(ms, a.ms...)
		rss = max(rss, a.rss)
		if firstErr == "" {
			firstErr = a.firstErr
		}
	}
	lo, hi := stats.MinMax(fin)
	s := Sample{Ms: float64(wall.Nanoseconds()) / 1e6, RSSKiB: rss, Metrics: map[string]float64{
		"commits": float64(done), "commits_per_s": float64(done) / wall.Seconds(), "spread": hi / lo,
		"busy": float64(busy), "failed": float64(failed),
		"p50_ms": stats.Pct(append([]float64(nil), ms...), 50), "max_ms": stats.Pct(ms, 100)}}
	if done == 0 {
		s.Error = firstErr
	} else if failed > 0 {
		s.Note = "first failure: " + firstErr
	}
	return s
}
