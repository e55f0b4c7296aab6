package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// The subprocess sweep crashes the real swarmops binary. Each CLI write
// command of a fixed workflow is run from a copy of the store the earlier
// commands left, with SWARMOPS_TEST_CRASH_AT=N for N = 1, 2, … until it
// completes; the process dies at call N as under SIGKILL (the page cache
// survives: the process-crash model on the real OS). The oracle is the
// --json output of the uncrashed commands: after each crash the refs must be
// those before the command or those after it (C1, C2), every changeset a ref
// names must exist and read back (C2), and verify --deep must be clean (C6).

// cliStep is one command of the workflow. Args may name ids of earlier
// steps as {LABEL}. Moves says what the command does to refs: NAME → LABEL
// of an earlier step, "new" (this step's own new id), or "" (deleted).
type cliStep struct {
	name  string
	label string // records data.id (or data.changeset) under this label
	args  []string
	stdin string
	moves map[string]string
}

var cliWorkflow = []cliStep{
	{name: "init", args: []string{"init"}},
	{name: "commit --advance", label: "A", args: []string{"commit", "-F", "-", "--advance", "main", "--agent", "a1", "-m", "first"},
		stdin: "put a.txt = \"one\"\nput dir/b.txt = \"b\"\n", moves: map[string]string{"main": "new"}},
	{name: "commit", label: "B", args: []string{"commit", "-F", "-", "--parent", "{A}", "--agent", "a2"},
		stdin: "put a.txt = \"two\"\ndelete dir/b.txt\n"},
	{name: "ref create", args: []string{"ref", "create", "feature", "{B}"}, moves: map[string]string{"feature": "B"}},
	{name: "ref set", args: []string{"ref", "set", "main", "{B}", "--expect", "{A}"}, moves: map[string]string{"main": "B"}},
	{name: "commit --advance (second)", label: "C", args: []string{"commit", "-F", "-", "--advance", "main", "--agent", "a1"},
		stdin: "put c.txt = \"c\"\n", moves: map[string]string{"main": "new"}},
	{name: "ref delete", args: []string{"ref", "delete", "feature", "--expect", "{B}"}, moves: map[string]string{"feature": ""}},
	{name: "commit (branch)", label: "D", args: []string{"commit", "-F", "-", "--parent", "{A}", "--agent", "a3"},
		stdin: "put d.txt = \"d\"\n"},
	{name: "land", label: "M", args: []string{"land", "{D}", "--onto", "main"}, moves: map[string]string{"main": "new"}},
	{name: "recover", args: []string{"recover"}},
}

type cliEnv struct {
	bin    string
	labels map[string]string
	// serveEnv is added to the environment of the server part's server
	// (SWARMOPS_TEST_CANARY, for a canary build).
	serveEnv []string
}

type cliResult struct {
	code int
	out  []byte
	env  struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (e *cliEnv) run(ctx context.Context, store string, crashAt int64, stdin string, args ...string) (*cliResult, error) {
	env := []string{faultfs.CrashAtEnv + "="}
	if crashAt > 0 {
		env = append(env, fmt.Sprintf("%s=%d", faultfs.CrashAtEnv, crashAt))
	}
	return e.runEnv(ctx, store, env, stdin, args...)
}

// runEnv runs swarmops with env added to crashsim's environment.
func (e *cliEnv) runEnv(ctx context.Context, store string, env []string, stdin string, args ...string) (*cliResult, error) {
	full := append([]string{"--store", store, "--json"}, args...)
	cmd := exec.CommandContext(ctx, e.bin, full...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.Discard
	err := cmd.Run()
	r := &cliResult{out: out.Bytes()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		return nil, err
	}
	if r.code != faultfs.CrashExitStatus && len(bytes.TrimSpace(r.out)) > 0 {
		if err := json.Unmarshal(r.out, &r.env); err != nil {
			return nil, fmt.Errorf("swarmops %s: output is not a JSON envelope: %v: %q", strings.Join(args, " "), err, r.out)
		}
	}
	return r, nil
}

func (e *cliEnv) expand(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range e.labels {
			a = strings.ReplaceAll(a, "{"+k+"}", v)
		}
		out[i] = a
	}
	return out
}

// refs reads the refs of a store; ok is false when there is no store.
func (e *cliEnv) refs(ctx context.Context, store string) (map[string]string, bool, error) {
	r, err := e.run(ctx, store, 0, "", "ref", "list")
	if err != nil {
		return nil, false, err
	}
	if !r.env.OK {
		if r.env.Error != nil && (r.env.Error.Code == "E_NOT_STORE" || r.env.Error.Code == "E_NOT_FOUND") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("ref list failed (exit %d): %s", r.code, r.out)
	}
	var list []struct{ Name, ID string }
	if err := json.Unmarshal(r.env.Data, &list); err != nil {
		return nil, false, fmt.Errorf("ref list data: %w: %s", err, r.env.Data)
	}
	m := map[string]string{}
	for _, x := range list {
		m[x.Name] = x.ID
	}
	return m, true, nil
}

// sweepBinary returns the binary the sweep runs and the environment of
// its server part: the CLI as built (or --binary), or with a server
// canary a canary build of it, which the server part runs weakened while
// the commands the sweep checks with stay correct.
func sweepBinary(ctx context.Context, tmp string, o *options, stdout, stderr io.Writer) (string, []string, error) {
	bin, err := cliBinary(ctx, tmp, o.binary, stderr)
	if err != nil || o.canary == "" {
		return bin, nil, err
	}
	weak, err := canaryBinary(ctx, tmp, stderr)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(stdout, "subprocess: the server part runs a %s build with %s=%s\n", canaryTag, canaryEnv, o.canary)
	return weak, []string{canaryEnv + "=" + o.canary}, nil
}

// subprocessSweep crashes the real swarmops binary at every stride-th
// filesystem call of each command of cliWorkflow, on a copy of a base store
// that the uncrashed commands advance, and checks what each crash left.
func subprocessSweep(ctx context.Context, _ []*scenarios.Scenario, o *options, stdout, stderr io.Writer) (int, error) {
	if o.canary != "" && !serverCanary(o.canary) {
		return 0, usagef("--subprocess --canary %q: want a server canary (%s)", o.canary, strings.Join(serverCanaryNames(), ", "))
	}
	start := time.Now()
	tmp, err := os.MkdirTemp("", "crashsim-subprocess-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	bin, serveEnv, err := sweepBinary(ctx, tmp, o, stdout, stderr)
	if err != nil {
		return 0, err
	}
	workers := o.workers
	if workers == 0 {
		// The points wait on real fsyncs and process starts, not on CPU.
		workers = 4
	}
	stride := int64(o.stride)
	if stride < 1 {
		stride = 1
	}
	e := &cliEnv{bin: bin, labels: map[string]string{}}
	base := filepath.Join(tmp, "base")
	var violations []string
	points := 0
	for i, st := range cliWorkflow {
		args := e.expand(st.args)
		before, existed, err := e.refs(ctx, base)
		if err != nil && i > 0 {
			return 0, err
		}
		p := crashPlan{tmp: tmp, base: base, existed: existed, before: before, st: st, args: args, workers: int64(workers), stride: stride}
		steps, vs, err := e.crashEach(ctx, p)
		violations = append(violations, vs...)
		points += steps
		if err != nil {
			return exitViolation, err
		}
		if code, err := e.advance(ctx, base, st, args); err != nil {
			return code, err
		}
		fmt.Fprintf(stdout, "subprocess: %-26s crashed at %d of its calls (stride %d)\n", st.name, steps, stride)
	}
	// The parts run apart from the workflow, each on a copy of its own;
	// only the server part runs the canary build's environment.
	parts := []struct {
		name  string
		serve bool
		run   func(context.Context, string, int64, int64) (int, []string, error)
	}{
		{"update (work tree)", false, e.treeSweep},
		{"land --check (queue)", false, e.queueSweep},
		{"serve (3 clients)", true, e.serveSweep},
	}
	for _, part := range parts {
		if part.serve {
			e.serveEnv = serveEnv
		}
		steps, vs, err := part.run(ctx, tmp, stride, int64(workers))
		violations = append(violations, vs...)
		points += steps
		if err != nil {
			return exitViolation, err
		}
		fmt.Fprintf(stdout, "subprocess: %-26s crashed at %d of its calls (stride %d)\n", part.name, steps, stride)
	}
	for _, v := range violations {
		fmt.Fprintln(stdout, v)
	}
	fmt.Fprintf(stdout, "crashsim --subprocess: %d commands, %d crash points, model process (real OS), %d violations (%.1f s)\n",
		len(cliWorkflow)+3, points, len(violations), time.Since(start).Seconds())
	if len(violations) > 0 {
		return exitViolation, nil
	}
	return exitOK, nil
}

// cliBinary returns the swarmops binary to crash: the one given, else one
// built into tmp from the module.
func cliBinary(ctx context.Context, tmp, given string, stderr io.Writer) (string, error) {
	if given != "" {
		return given, nil
	}
	bin := filepath.Join(tmp, "swarmops")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/swarmops")
	build.Stderr = stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/swarmops (run crashsim from the module root, or give --binary): %w", err)
	}
	return bin, nil
}

// crashPlan is one workflow command to crash at every stride-th call: the
// base store it runs on, and the refs there before it.
type crashPlan struct {
	tmp, base       string
	existed         bool
	before          map[string]string
	st              cliStep
	args            []string
	workers, stride int64
}

// crashEach crashes the command of p at calls 1, 1+stride, ... (workers at
// a time) until one run completes before its crash point. It returns how
// many points crashed and the violations found; an error stops the sweep
// (interrupted, or a command that never completes).
func (e *cliEnv) crashEach(ctx context.Context, p crashPlan) (int, []string, error) {
	var (
		mu         sync.Mutex
		done       bool
		steps      int
		violations []string
	)
	for n := int64(1); !done; n += p.workers * p.stride {
		var wg sync.WaitGroup
		for k := int64(0); k < p.workers; k++ {
			wg.Add(1)
			go func(at int64) {
				defer wg.Done()
				vs, completed, err := e.crashPoint(ctx, p.tmp, p.base, p.existed, p.before, p.st, p.args, at)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					violations = append(violations, fmt.Sprintf("%s at call %d: harness error: %v", p.st.name, at, err))
				}
				if completed {
					done = true
					return
				}
				steps++
				for _, v := range vs {
					violations = append(violations, fmt.Sprintf("VIOLATION %s: command `swarmops %s` crashed at call %d: %s\n  reproduce: copy the store after the earlier commands, then SWARMOPS_TEST_CRASH_AT=%d swarmops --store DIR --json %s",
						v.claim, strings.Join(p.args, " "), at, v.detail, at, strings.Join(p.args, " ")))
				}
			}(n + k*p.stride)
		}
		wg.Wait()
		if ctx.Err() != nil {
			return steps, violations, errors.New("interrupted")
		}
		if n > 100000 {
			return steps, violations, fmt.Errorf("%s never completed", p.st.name)
		}
	}
	return steps, violations, nil
}

// advance runs the command uncrashed on the base store (the oracle the
// next command's crashes are checked against) and records its label.
func (e *cliEnv) advance(ctx context.Context, base string, st cliStep, args []string) (int, error) {
	r, err := e.run(ctx, base, 0, st.stdin, args...)
	if err != nil {
		return 0, err
	}
	if !r.env.OK || r.code != 0 {
		return exitViolation, fmt.Errorf("workflow step %q failed uncrashed (exit %d): %s", st.name, r.code, r.out)
	}
	if st.label != "" {
		var d struct{ ID, Changeset string }
		if err := json.Unmarshal(r.env.Data, &d); err != nil {
			return 0, fmt.Errorf("%s: data: %w", st.name, err)
		}
		e.labels[st.label] = d.ID + d.Changeset
	}
	return 0, nil
}

// crashPoint copies the base store, runs the command crashing at call at,
// and checks what it left. completed is true when the command finished
// before reaching call at.
func (e *cliEnv) crashPoint(ctx context.Context, tmp, base string, existed bool, before map[string]string, st cliStep, args []string, at int64) ([]subViolation, bool, error) {
	work, err := os.MkdirTemp(tmp, "point-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(work)
	store := filepath.Join(work, "store")
	if existed {
		if err := crashsweep.CopyTree(base, store); err != nil {
			return nil, false, err
		}
	}
	r, err := e.run(ctx, store, at, st.stdin, args...)
	if err != nil {
		return nil, false, err
	}
	if r.code == 0 {
		return nil, true, nil
	}
	if r.code != faultfs.CrashExitStatus {
		return []subViolation{{"C9", fmt.Sprintf("exited %d instead of crashing: %s", r.code, r.out)}}, false, nil
	}
	return e.check(ctx, store, existed, before, st)
}

type subViolation struct{ claim, detail string }

func (e *cliEnv) check(ctx context.Context, store string, existed bool, before map[string]string, st cliStep) ([]subViolation, bool, error) {
	got, ok, err := e.refs(ctx, store)
	if err != nil {
		return []subViolation{{"C1", "the store does not open after the crash: " + err.Error()}}, false, nil
	}
	if !ok {
		if existed {
			return []subViolation{{"C1", "the store is gone after the crash"}}, false, nil
		}
		// A crash during init: init again must work.
		r, err := e.run(ctx, store, 0, "", "init")
		if err != nil {
			return nil, false, err
		}
		if !r.env.OK {
			return []subViolation{{"C2", fmt.Sprintf("an interrupted init left a directory that neither opens nor can be initialized: %s", r.out)}}, false, nil
		}
		return nil, false, nil
	}
	if !existed {
		before = map[string]string{}
	}
	var vs []subViolation
	after := maps.Clone(before)
	var newRefs []string
	for name, to := range st.moves {
		switch to {
		case "":
			delete(after, name)
		case "new":
			newRefs = append(newRefs, name)
		default:
			after[name] = e.labels[to]
		}
	}
	sort.Strings(newRefs)
	matchesAfter := len(got) >= len(after)
	for name, id := range after {
		if got[name] != id && !slices.Contains(newRefs, name) {
			matchesAfter = false
		}
	}
	for _, name := range newRefs {
		if id, ok := got[name]; !ok || id == before[name] {
			matchesAfter = false
		}
	}
	for name := range got {
		if _, ok := after[name]; !ok && !slices.Contains(newRefs, name) {
			matchesAfter = false
		}
	}
	if !maps.Equal(got, before) && !matchesAfter {
		vs = append(vs, subViolation{"C2", fmt.Sprintf("refs after the crash %v are neither the refs before the command %v nor its full effect", got, before)})
	}
	for name, id := range got {
		r, err := e.run(ctx, store, 0, "", "show", id)
		if err != nil {
			return nil, false, err
		}
		if !r.env.OK {
			vs = append(vs, subViolation{"C2", fmt.Sprintf("ref %s names %s, which does not read back: %s", name, id, r.out)})
		}
	}
	r, err := e.run(ctx, store, 0, "", "verify", "--deep")
	if err != nil {
		return nil, false, err
	}
	if !r.env.OK {
		vs = append(vs, subViolation{"C6", fmt.Sprintf("verify --deep after the crash: %s", r.out)})
	}
	return vs, false, nil
}
