package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/swarmops/swarmops/bench/internal/hostenv"
)

// The systems of the workflow steps, in their forward order. swarmops runs
// embedded (SWARMOPS_SERVER=off); its steps through `swarmops serve` are
// recorded as "swarmops-serve" within its turn.
const (
	sysSwarmOps = "swarmops"
	sysServe    = "swarmops-serve"
	sysGit      = "git"
	sysGitFsync = "git-fsync"
)

var workflowSystems = []string{sysSwarmOps, sysGit, sysGitFsync}

// gitFsync are the options of git's durable mode: every file it writes
// (objects, packs, refs, the index) fsynced, with fsync(2) itself.
var gitFsync = []string{"-c", "core.fsync=all", "-c", "core.fsyncMethod=fsync"}

// Report is the JSON document of one run of the harness.
type Report struct {
	Date     string          `json:"date"`
	Command  string          `json:"command"`
	Seconds  float64         `json:"seconds"`
	Config   *Config         `json:"config"`
	Machine  hostenv.Machine `json:"machine"`
	Git      string          `json:"git_version"`
	SwarmOps string          `json:"swarmops_version"`
	Tree     TreeInfo        `json:"tree"`
	Envs     []RunEnv        `json:"envs"`
	Samples  []Sample        `json:"samples"`
	Notes    []string        `json:"notes,omitempty"`
}

// RunEnv is the environment recorded before one system's turn in a run.
type RunEnv struct {
	Run    int         `json:"run"`
	System string      `json:"system"`
	Env    hostenv.Env `json:"env"`
}

// Sample is one measured process (or, for size and agents, one figure) of
// one system in one run. Error says why a step could not be measured; the
// table shows it as n/a.
type Sample struct {
	Run     int                `json:"run"`
	System  string             `json:"system"`
	Step    string             `json:"step"`
	Ms      float64            `json:"ms,omitempty"`
	RSSKiB  int64              `json:"maxrss_kib,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Command string             `json:"command,omitempty"`
	Error   string             `json:"error,omitempty"`
	Note    string             `json:"note,omitempty"`
}

type bench struct {
	c       *Config
	rep     *Report
	work    string // the work directory
	tree    string // the copy every system imports
	sw      string // the swarmops binary
	baseEnv []string
	files   []string // the tree's regular files
	spawn   *spawners
}

// newBench prepares the work directory, the binary and the tree.
func newBench(c *Config) (*bench, func(), error) {
	b := &bench{c: c, rep: &Report{Config: c}}
	cleanup := func() {}
	if c.Dir != "" {
		b.work = c.Dir
		if err := os.MkdirAll(b.work, 0o755); err != nil {
			return nil, cleanup, err
		}
	} else {
		var err error
		if b.work, err = os.MkdirTemp("", "workflow-"); err != nil {
			return nil, cleanup, err
		}
		if !c.Keep {
			cleanup = func() { os.RemoveAll(b.work) }
		}
	}
	if free, err := hostenv.FreeGiB(b.work); err != nil || free < c.MinFreeGiB {
		return nil, cleanup, fmt.Errorf("free space %.1f GiB under %s is below --min-free-gib=%.1f (%v); refusing to run", free, b.work, c.MinFreeGiB, err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, cleanup, err
	}
	b.spawn = &spawners{self: self, dir: filepath.Join(b.work, "spawn")}
	removeWork := cleanup
	cleanup = func() {
		b.spawn.close()
		removeWork()
	}
	home := filepath.Join(b.work, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, cleanup, err
	}
	b.baseEnv = baseEnvironment(home)
	b.rep.Machine = hostenv.Describe(b.work)
	if err := b.tools(); err != nil {
		return nil, cleanup, err
	}
	if err := b.prepareTree(); err != nil {
		return nil, cleanup, err
	}
	return b, cleanup, nil
}

// tools finds git and builds swarmops (unless --swarmops names a binary),
// recording both versions.
func (b *bench) tools() error {
	out, err := exec.Command(b.c.Git, "--version").Output()
	if err != nil {
		return fmt.Errorf("--git=%s: %v", b.c.Git, err)
	}
	b.rep.Git = strings.TrimSpace(string(out))
	if b.c.SwarmOps != "" {
		b.sw, err = filepath.Abs(b.c.SwarmOps)
		b.rep.SwarmOps = "the binary --swarmops names"
		if b.c.Label != "" {
			b.rep.SwarmOps += " (" + b.c.Label + ")"
		}
		return err
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/swarmops/swarmops").Output()
	if err != nil {
		return fmt.Errorf("finding the swarmops module (run from bench/, or pass --swarmops BIN): %v", err)
	}
	dir := strings.TrimSpace(string(root))
	b.sw = filepath.Join(b.work, "bin", "swarmops")
	// Built as the guide installs it: static, without cgo.
	build := exec.Command("go", "build", "-o", b.sw, "./cmd/swarmops")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/swarmops in %s: %v: %s", dir, err, out)
	}
	rev, _ := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	dirty, _ := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	b.rep.SwarmOps = "built from commit " + strings.TrimSpace(string(rev))
	if len(strings.TrimSpace(string(dirty))) > 0 {
		b.rep.SwarmOps += " with uncommitted changes"
	}
	return nil
}

// prepareTree copies the tree, plants links if it has none, and picks the
// paths the steps use.
func (b *bench) prepareTree() error {
	src := b.c.Tree
	if src == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return fmt.Errorf("go env GOROOT (or pass --tree): %v", err)
		}
		src = filepath.Join(strings.TrimSpace(string(out)), "src")
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return fmt.Errorf("--tree=%s: not a directory (%v)", src, err)
	}
	b.tree = filepath.Join(b.work, "tree")
	if err := os.RemoveAll(b.tree); err != nil {
		return err
	}
	logf("copying %s", src)
	if err := copyTree(src, b.tree); err != nil {
		return err
	}
	t := &b.rep.Tree
	t.Source = src
	files, links, _, err := scanTree(b.tree)
	if err != nil {
		return err
	}
	if t.CatPath, t.EditPath, t.TenPaths, err = pickPaths(files); err != nil {
		return err
	}
	if links == 0 && b.c.Symlinks {
		if t.Added, err = addLinks(b.tree, t.CatPath); err != nil {
			return err
		}
	}
	b.files, t.Links, t.Bytes, err = scanTree(b.tree)
	t.Files = len(b.files)
	logf("tree: %d files, %d symlinks, %.1f MB", t.Files, t.Links, float64(t.Bytes)/1e6)
	return err
}

// measure runs the workflow steps, the systems alternating order from run
// to run, then the agents step.
func (b *bench) measure() error {
	workflow := false
	for _, s := range b.c.Steps {
		workflow = workflow || (s != "agents" && s != "history")
	}
	for r := 0; workflow && r < b.c.Runs; r++ {
		for _, sys := range order(workflowSystems, r) {
			b.rep.Envs = append(b.rep.Envs, RunEnv{r, sys, turnEnv(b.work)})
			logf("run %d: %s", r, sys)
			var err error
			if sys == sysSwarmOps {
				err = b.swarmopsTurn(r)
			} else {
				err = b.gitTurn(r, sys)
			}
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r, sys, err)
			}
		}
	}
	for r := 0; b.c.has("history") && r < b.c.Runs; r++ {
		b.rep.Envs = append(b.rep.Envs, RunEnv{r, "history", turnEnv(b.work)})
		logf("run %d: history", r)
		if err := b.history(r); err != nil {
			return fmt.Errorf("run %d, history: %w", r, err)
		}
	}
	if b.c.has("agents") {
		return b.agents()
	}
	return nil
}

// turnEnv starts a system's turn: it writes back every dirty page (so no
// turn pays for the previous one's writes) and records the environment.
func turnEnv(dir string) hostenv.Env {
	syscall.Sync()
	return hostenv.Measure(dir, "workflow")
}

// order is systems in run r: forward on even runs, reversed on odd ones,
// so two runs give A B C C B A.
func order[T any](systems []T, r int) []T {
	out := append([]T(nil), systems...)
	if r%2 == 1 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// fresh returns an empty directory for one system's turn in run r.
func (b *bench) fresh(r int, sys string) (string, error) {
	d := filepath.Join(b.work, fmt.Sprintf("run%d-%s", r, sys))
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	return d, os.MkdirAll(d, 0o755)
}

// record keeps a sample, and logs it. The work directory's path is
// written $WORK in its texts, so a report names no machine path.
func (b *bench) record(s Sample) {
	s.Error = strings.ReplaceAll(s.Error, b.work, "$WORK")
	s.Note = strings.ReplaceAll(s.Note, b.work, "$WORK")
	s.Command = strings.ReplaceAll(s.Command, b.work, "$WORK")
	if s.Error != "" {
		logf("  %-14s %-10s n/a: %s", s.System, s.Step, s.Error)
	} else {
		logf("  %-14s %-10s %9.1f ms %6.1f MB %v", s.System, s.Step, s.Ms, float64(s.RSSKiB)/1024, s.Metrics)
	}
	b.rep.Samples = append(b.rep.Samples, s)
}

// skip records chosen steps that could not run, with the reason.
func (b *bench) skip(r int, sys, why string, steps ...string) {
	for _, st := range steps {
		if b.c.has(stepGroup(st)) {
			b.record(Sample{Run: r, System: sys, Step: st, Error: why})
		}
	}
}

// stepGroup maps a recorded step to the --steps name that chooses it.
func stepGroup(step string) string {
	switch step {
	case "log", "cat", "diff":
		return "reads"
	case "edit-dir", "edit-tree":
		return "edit"
	case "size-gc":
		return "size"
	case "import-history", "export", "export-incr", "gc":
		return "history"
	}
	if strings.HasPrefix(step, "agents") {
		return "agents"
	}
	return step
}

// timed runs c as a sample of step and records it when the step was
// chosen. ok is false when the process failed; its failure is recorded.
func (b *bench) timed(r int, sys, step string, c cmdSpec) (proc, bool, error) {
	p, err := b.execute(c)
	if err != nil {
		return p, false, err
	}
	return p, b.keep(r, sys, step, c, p, nil), nil
}

// keep records the finished process p as a sample of step when the step
// was chosen, with extra metrics, and reports whether p succeeded.
func (b *bench) keep(r int, sys, step string, c cmdSpec, p proc, extra map[string]float64) bool {
	s := Sample{Run: r, System: sys, Step: step, Ms: p.ms, RSSKiB: p.rssKiB, Command: c.String(), Error: p.failure()}
	if s.Error == "" {
		s.Metrics = dataNumbers(p.stdout)
		for k, v := range extra {
			if s.Metrics == nil {
				s.Metrics = map[string]float64{}
			}
			s.Metrics[k] = v
		}
	}
	if b.c.has(stepGroup(step)) {
		b.record(s)
	}
	return s.Error == ""
}

// dataNumbers returns the numbers (and the lengths of the lists) in the
// data of a swarmops JSON envelope as metrics "out_KEY", so the counts a
// command reports (files written, changes) are kept whatever their names.
func dataNumbers(stdout []byte) map[string]float64 {
	var env struct {
		Data map[string]any `json:"data"`
	}
	if json.Unmarshal(stdout, &env) != nil || env.Data == nil {
		return nil
	}
	m := map[string]float64{}
	for k, v := range env.Data {
		switch v := v.(type) {
		case float64:
			m["out_"+k] = v
		case []any:
			m["out_"+k] = float64(len(v))
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
