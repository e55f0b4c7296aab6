package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
)

// hookCmd is `swarmops hook`: handlers for agent frameworks' work-tree
// hooks, so an orchestrator can hand each agent a SwarmOps work tree
// instead of a git worktree.
func (a *app) hookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook (worktree-create | worktree-remove)",
		Short: "Work-tree hooks for agent frameworks (Claude Code's WorktreeCreate and WorktreeRemove)",
		Long: `Handle an agent framework's work-tree hook: the event arrives as JSON on
stdin, the answer is what the framework expects on stdout.

worktree-create reads {"name", "base_commit" or "base_ref", "cwd"} (the
aliases "worktree_name" and "branch_name" are taken for "name"), checks out
the base (a revision in the store; default main) into
$SWARMOPS_WORKTREES/NAME (default CWD/.claude/worktrees/NAME), creates the
ref agent/NAME at the base if it does not exist, and prints the work tree's
absolute path. A name used before whose agent/NAME holds work the base
lacks (its tree was removed before the work landed) gets a tree of
agent/NAME instead, so the agent finds that work.

worktree-remove reads {"worktree_path"}: any changes left in the tree are
first committed onto agent/NAME (nothing an agent wrote is lost), then the
directory is removed.`,
		Args: noSubcommand,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return usagef("hook: give a subcommand: worktree-create or worktree-remove")
		}),
	}
	cmd.AddCommand(&cobra.Command{
		Use:  "worktree-create",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.hookCreate() }),
	}, &cobra.Command{
		Use:  "worktree-remove",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.hookRemove() }),
	})
	return cmd
}

// hookEvent is the union of the fields the work-tree hooks read.
type hookEvent struct {
	Name         string `json:"name"`
	WorktreeName string `json:"worktree_name"`
	BranchName   string `json:"branch_name"`
	BaseCommit   string `json:"base_commit"`
	BaseRef      string `json:"base_ref"`
	Cwd          string `json:"cwd"`
	WorktreePath string `json:"worktree_path"`
}

func (a *app) readHookEvent() (*hookEvent, error) {
	b, err := io.ReadAll(io.LimitReader(a.stdin, 1<<20))
	if err != nil {
		return nil, usagef("hook: reading the event: %w", err)
	}
	var ev hookEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, usagef("hook: the event on stdin is not a JSON object: %v", err)
	}
	return &ev, nil
}

// sub runs another swarmops command line in this process with JSON
// output, and returns its data or its failure.
func (a *app) sub(stdin string, args ...string) (any, error) {
	var out, errb bytes.Buffer
	c := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: a.jsonEnv(),
		cwd: a.cwd, shared: a.shared, sharedDir: a.sharedDir, sharedInfo: a.sharedInfo, start: a.start}
	c.run(append(args, a.globalArgs()...))
	var env struct {
		OK    bool            `json:"ok"`
		Data  any             `json:"data"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		return nil, fmt.Errorf("swarmops %s: no envelope: %q", strings.Join(args, " "), out.String())
	}
	if !env.OK {
		return nil, &cliError{kind: kindOf(env.Error), err: errors.New(string(env.Error)),
			msg: fmt.Sprintf("swarmops %s: %s", strings.Join(args, " "), messageOf(env.Error))}
	}
	return env.Data, nil
}

// worktreesEnv names the directory the hook makes work trees in.
const worktreesEnv = "SWARMOPS_WORKTREES"

func (a *app) hookCreate() error {
	ev, err := a.readHookEvent()
	if err != nil {
		return err
	}
	name := firstOf(ev.Name, ev.WorktreeName, ev.BranchName)
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return usagef("hook worktree-create: the event needs a plain \"name\" (got %q)", name)
	}
	if err := checkRefName("agent/" + name); err != nil {
		return usagef("hook worktree-create: %q cannot name a ref: %w", name, err)
	}
	base := firstOf(ev.BaseCommit, ev.BaseRef, "main")
	dir := filepath.Join(firstOf(a.getenv(worktreesEnv), filepath.Join(firstOf(ev.Cwd, a.path(".")), ".claude", "worktrees")), name)
	if !filepath.IsAbs(dir) {
		// Relative to the hook's directory, and printed absolute: the
		// agent's tool resolves it from wherever it runs.
		if dir, err = filepath.Abs(a.path(dir)); err != nil {
			return fmt.Errorf("hook worktree-create: %w", err)
		}
	}
	// A name used before may have left work on agent/NAME that base does
	// not hold (its tree was removed before that work landed): the new
	// tree starts from it, so the agent finds its work and the tree's
	// removal can advance the ref.
	from, baseID, follow, err := a.hookStart(base, "agent/"+name)
	if err != nil {
		return err
	}
	sweepRetired(dir)
	// By id, so the tree starts exactly where the ref below does; it
	// follows the base ref, so a plain update brings what landed there.
	co := []string{"checkout", from.String(), dir}
	if follow {
		co = append(co, "--follow", base)
	}
	if _, err := a.sub("", co...); err != nil {
		return err
	}
	// The ref starts where the tree does: base is resolved once, so a
	// land onto it during the checkout does not put the ref ahead of the
	// tree (which made the agent's first commit E_CONFLICT).
	if _, err := a.sub("", "ref", "create", "agent/"+name, baseID.String()); err != nil {
		var ce *cliError
		if !errors.As(err, &ce) || ce.kind != kindConflict {
			return err
		}
	}
	a.flushed = true
	fmt.Fprintln(a.stdout, dir)
	return nil
}

func (a *app) hookRemove() error {
	ev, err := a.readHookEvent()
	if err != nil {
		return err
	}
	dir := ev.WorktreePath
	if dir == "" || !filepath.IsAbs(dir) {
		return usagef("hook worktree-remove: the event needs an absolute \"worktree_path\" (got %q)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ".swarmops-tree")); err != nil {
		return usagef("hook worktree-remove: %q is not a SwarmOps work tree", dir)
	}
	ref := "agent/" + filepath.Base(dir)
	st, err := a.sub("", "status", dir)
	if err != nil {
		return err
	}
	if clean, _ := st.(map[string]any)["clean"].(bool); !clean {
		// The agent is the tree's name unless the environment names one.
		args := []string{"commit", "--dir", dir, "--advance", ref, "--create", "-m", "work left in " + filepath.Base(dir)}
		if a.getenv(agentEnv) == "" {
			args = append(args, "--agent", filepath.Base(dir))
		}
		if _, err := a.sub("", args...); err != nil {
			return err
		}
	}
	if err := removeTree(dir); err != nil {
		return fmt.Errorf("hook worktree-remove: %w", err)
	}
	// The tree's lease held its base from gc for a day: the tree is gone.
	if err := a.withStore(func(s *core.Store, _ *core.Snapshot) error {
		return s.ReleaseLease(treeLeaseName(dir))
	}); err != nil {
		return fmt.Errorf("hook worktree-remove: release the tree's lease: %w", err)
	}
	a.flushed = true
	return nil
}

// retiredMark is in the name a work tree is renamed to before it is
// deleted (removeTree).
const retiredMark = ".removing-"

// removeTree removes the work tree at dir. It first renames it out of the
// way, in one step: a removal cut short (a killed server, a killed hook)
// then leaves no work tree at dir missing some of its files, which the
// next tree of the same name would be (checkout of an existing tree keeps
// what it holds) and whose missing files the agent's next commit would
// record as deletions. What a cut-short removal leaves under the other
// name goes with the next removal or creation of a tree of that name
// (sweepRetired).
func removeTree(dir string) error {
	sweepRetired(dir)
	// A fresh name: made as a directory to reserve it, then given up, since
	// os.Rename does not replace a directory.
	tomb, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+retiredMark)
	if err != nil {
		return err
	}
	os.Remove(tomb)
	if err := os.Rename(dir, tomb); err != nil {
		return err
	}
	return removeAll(tomb)
}

// removeAll is os.RemoveAll; a test cuts it short.
var removeAll = os.RemoveAll

// sweepRetired removes, best effort, what removals of the tree at dir cut
// short left under retired names (the tree of one name is removed by one
// hook at a time).
func sweepRetired(dir string) {
	old, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+retiredMark+"*"))
	for _, d := range old {
		os.RemoveAll(d)
	}
}

// hookStart resolves base, in one snapshot with ref, and returns the
// changeset a new tree for ref starts from: ref's when it exists and holds
// work base lacks (base is not a descendant of it), else base's.
// follow reports whether base names a ref, which the tree then follows.
func (a *app) hookStart(base, ref string) (from, baseID core.ID, follow bool, err error) {
	err = a.withStore(func(_ *core.Store, sn *core.Snapshot) error {
		b, err := resolve(sn, base)
		if err != nil {
			return err
		}
		from, baseID, follow = b, b, hasRef(sn, base)
		v, err := sn.Ref(ref)
		if errors.Is(err, core.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if mb, err := sn.MergeBase(v, b); err != nil {
			return err
		} else if mb != v {
			from = v
		}
		return nil
	})
	return from, baseID, follow, err
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// kindOf finds the table row of an error envelope's code.
func kindOf(raw json.RawMessage) errorKind {
	var e struct {
		Code string `json:"code"`
	}
	json.Unmarshal(raw, &e)
	for _, k := range errorTable() {
		if k.Code == e.Code {
			return k
		}
	}
	return kindInternal
}

func messageOf(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	json.Unmarshal(raw, &e)
	return e.Message
}
