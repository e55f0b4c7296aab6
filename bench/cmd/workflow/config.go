package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Steps are the measurements --steps can choose, in the order they run.
var Steps = []string{"import", "size", "checkout", "reads", "switch", "status", "edit", "agents", "history"}

// Flavours are the ways a swarmops agent commits in the agents step: a
// change list on stdin (no work tree), or a snapshot of its own work tree.
var Flavours = []string{"list", "dir"}

// Config is the command line of a run. A malformed or out-of-range value is
// an error, never a silent default.
type Config struct {
	Tree       string   `json:"tree"`         // the tree to copy ("" = $(go env GOROOT)/src)
	Symlinks   bool     `json:"symlinks"`     // add a few symbolic links when the tree has none
	Runs       int      `json:"runs"`         // runs; the systems alternate order
	Steps      []string `json:"steps"`        // which measurements
	Reads      int      `json:"reads"`        // samples of each read command and of status per run
	Edits      int      `json:"edits"`        // one-file commits per variant per run
	Switches   int      `json:"switches"`     // switches between the two commits per run
	Agents     int      `json:"agents"`       // agents in the agents step
	Changes    int      `json:"changes"`      // commits per agent
	Flavours   []string `json:"flavours"`     // swarmops agent flavours
	Serve      bool     `json:"serve"`        // also measure through `swarmops serve`
	SwarmOps   string   `json:"swarmops"`     // the binary ("" = build it from this repository)
	Label      string   `json:"label"`        // what the binary is, for the report (with --swarmops)
	Git        string   `json:"git"`          // the git binary
	Dir        string   `json:"dir"`          // work directory ("" = a new temporary one)
	Keep       bool     `json:"keep"`         // keep the work directory
	MinFreeGiB float64  `json:"min_free_gib"` // refuse to start with less free space
	JSON       string   `json:"-"`
	MD         string   `json:"-"`
	Render     string   `json:"-"`
}

// parseConfig parses and checks the flags.
func parseConfig(args []string) (*Config, error) {
	c := &Config{}
	fl := flag.NewFlagSet("workflow", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var steps, flavours string
	fl.StringVar(&c.Tree, "tree", "", "tree to copy and measure on (default: $(go env GOROOT)/src)")
	fl.BoolVar(&c.Symlinks, "symlinks", true, "add a few symbolic links (relative, to a directory, absolute, dangling) when the tree has none")
	fl.IntVar(&c.Runs, "runs", 3, "runs; the systems alternate order (A B C C B A)")
	fl.StringVar(&steps, "steps", strings.Join(Steps, ","), "measurements, comma-separated: "+strings.Join(Steps, ","))
	fl.IntVar(&c.Reads, "reads", 5, "samples of log, cat, diff and status per run")
	fl.IntVar(&c.Edits, "edits", 3, "one-file commits per variant per run")
	fl.IntVar(&c.Switches, "switches", 4, "switches between the two commits per run")
	fl.IntVar(&c.Agents, "agents", 32, "agents in the agents step")
	fl.IntVar(&c.Changes, "changes", 10, "commits per agent in the agents step (one process each)")
	fl.StringVar(&flavours, "flavours", strings.Join(Flavours, ","), "swarmops agent flavours, comma-separated: list (commit -F -), dir (commit --dir of the agent's work tree)")
	fl.BoolVar(&c.Serve, "serve", true, "also measure reads, status, one-file commits and agents through `swarmops serve`")
	fl.StringVar(&c.SwarmOps, "swarmops", "", "swarmops binary (default: build ./cmd/swarmops of this repository)")
	fl.StringVar(&c.Label, "swarmops-label", "", "what the --swarmops binary is (its version or commit), for the report")
	fl.StringVar(&c.Git, "git", "git", "git binary")
	fl.StringVar(&c.Dir, "dir", "", "work directory (default: a new temporary directory, removed at the end)")
	fl.BoolVar(&c.Keep, "keep", false, "keep the work directory")
	fl.Float64Var(&c.MinFreeGiB, "min-free-gib", 16, "refuse to start with less free space in the work directory")
	fl.StringVar(&c.JSON, "json", "workflow.json", "JSON results file")
	fl.StringVar(&c.MD, "md", "workflow.md", "Markdown tables file")
	fl.StringVar(&c.Render, "render", "", "re-render the Markdown of an existing JSON results file and exit")
	if err := fl.Parse(args); err != nil {
		return nil, err
	}
	if fl.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (every knob is a flag)", fl.Arg(0))
	}
	var err error
	if c.Steps, err = parseList("--steps", steps, Steps); err != nil {
		return nil, err
	}
	if c.Flavours, err = parseList("--flavours", flavours, Flavours); err != nil {
		return nil, err
	}
	return c, c.check()
}

// check refuses counts out of range.
func (c *Config) check() error {
	for _, k := range []struct {
		name string
		v    int
	}{{"--runs", c.Runs}, {"--reads", c.Reads}, {"--edits", c.Edits}, {"--switches", c.Switches}, {"--agents", c.Agents}, {"--changes", c.Changes}} {
		if k.v < 1 {
			return fmt.Errorf("%s=%d: must be at least 1", k.name, k.v)
		}
	}
	if c.MinFreeGiB < 0 {
		return fmt.Errorf("--min-free-gib=%v: must not be negative", c.MinFreeGiB)
	}
	if c.Git == "" {
		return errors.New("--git: empty")
	}
	if c.Label != "" && c.SwarmOps == "" {
		return errors.New("--swarmops-label describes a --swarmops binary; without one the binary is built and described by its commit")
	}
	return nil
}

// parseList splits a comma-separated list of names from known, refusing
// unknown, repeated and empty names and an empty list.
func parseList(flagName, s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			return nil, fmt.Errorf("%s=%q: empty name (choose from %s)", flagName, s, strings.Join(known, ","))
		case !slices.Contains(known, f):
			return nil, fmt.Errorf("%s: unknown name %q (choose from %s)", flagName, f, strings.Join(known, ","))
		case slices.Contains(out, f):
			return nil, fmt.Errorf("%s: %q named twice", flagName, f)
		}
		out = append(out, f)
	}
	return out, nil
}

// has reports whether step was chosen.
func (c *Config) has(step string) bool { return slices.Contains(c.Steps, step) }
