package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/swarmops/swarmops/internal/testknobs"
)

// The server's canaries live in the swarmops binary, not in a store the
// sweep opens: a binary built with the swarmops_canary tag reads
// SWARMOPS_TEST_CANARY and weakens its server with them
// (cmd/swarmops/canary.go); a normal build has no reader of the variable.
// The self-test builds one into a temporary directory and runs the server
// part of the subprocess sweep with each server canary.

// canaryTag is the build tag of a weakenable swarmops binary.
const canaryTag = "swarmops_canary"

// canaryEnv is the variable a canary build reads.
const canaryEnv = "SWARMOPS_TEST_CANARY"

// serveCanaryStride is the stride of the self-test's server crashes:
// about a dozen of the part's hundred-odd calls, enough for the points
// after a reply, at a few seconds.
const serveCanaryStride = 9

// serverCanaries are the canaries the server part must catch.
var serverCanaries = []struct{ name, why string }{
	{"server-early-reply", "the server acknowledges a request once it has read its stdin, before the command returns"},
}

// canaryBinary builds a swarmops binary with the canary tag into dir.
func canaryBinary(ctx context.Context, dir string, stderr io.Writer) (string, error) {
	bin := filepath.Join(dir, "swarmops-canary")
	build := exec.CommandContext(ctx, "go", "build", "-tags", canaryTag, "-o", bin, "./cmd/swarmops")
	build.Stderr = stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build -tags %s ./cmd/swarmops (run crashsim from the module root): %w", canaryTag, err)
	}
	return bin, nil
}

// serveCanaryResult says whether a server canary was caught, and by what.
type serveCanaryResult struct {
	name, why string
	caught    bool
	at        int64  // the crash point (0: the uncrashed run)
	detail    string // the violation
	points    int
}

// serveCanaries runs the server part with each server canary on a canary
// build, at every serveCanaryStride-th call, and counts a canary caught
// by a point whose violation the correct binary, crashed at the same
// call, does not have.
func serveCanaries(ctx context.Context, stderr io.Writer) ([]serveCanaryResult, error) {
	tmp, err := os.MkdirTemp("", "crashsim-serve-canary-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	weak, err := canaryBinary(ctx, tmp, stderr)
	if err != nil {
		return nil, err
	}
	good, err := cliBinary(ctx, tmp, "", stderr)
	if err != nil {
		return nil, err
	}
	var res []serveCanaryResult
	for _, c := range serverCanaries {
		r, err := serveCanary(ctx, tmp, weak, good, c.name)
		if err != nil {
			return nil, fmt.Errorf("server canary %s: %w", c.name, err)
		}
		r.name, r.why = c.name, c.why
		res = append(res, r)
	}
	return res, nil
}

// serveCanary runs the server part on the canary build with canary set,
// until a batch of points finds a violation, then the correct binary at
// those points, until one of them is clean there.
func serveCanary(ctx context.Context, tmp, weak, good, canary string) (serveCanaryResult, error) {
	var r serveCanaryResult
	dir, err := os.MkdirTemp(tmp, canary+"-")
	if err != nil {
		return r, err
	}
	base := filepath.Join(dir, "serve-base")
	e := &cliEnv{bin: weak, labels: map[string]string{}, serveEnv: []string{canaryEnv + "=" + canary}}
	var mu sync.Mutex
	found := map[int64][]string{}
	point := func(at int64) ([]string, bool, error) {
		vs, fin, err := e.servePoint(ctx, dir, base, at)
		mu.Lock()
		defer mu.Unlock()
		if len(vs) > 0 {
			found[at] = vs
		}
		// The first batch of points with a violation ends the sweep:
		// the correct binary is tried at those.
		return vs, fin || len(found) > 0, err
	}
	if rr, err := e.run(ctx, filepath.Join(base, "store"), 0, "", "init"); err != nil || !rr.env.OK {
		return r, fmt.Errorf("init: %v %s", err, rr.outOr())
	}
	if _, _, err := point(0); err != nil {
		return r, err
	}
	if len(found) == 0 {
		if r.points, _, err = crashEveryCall(ctx, serveCanaryStride, 4, "serve", "`swarmops serve` (canary "+canary+")", "the server part",
			point); err != nil {
			return r, err
		}
	}
	points := slices.Sorted(maps.Keys(found))
	ok := &cliEnv{bin: good, labels: map[string]string{}}
	for _, at := range points {
		vs, _, err := ok.servePoint(ctx, dir, base, at)
		if err != nil {
			return r, err
		}
		if len(vs) == 0 {
			r.caught, r.at, r.detail = true, at, found[at][0]
			return r, nil
		}
	}
	return r, nil
}

// serveCanaryRepro is the line that reproduces a server canary's catch.
func serveCanaryRepro(name string) string {
	return fmt.Sprintf("%s --subprocess --canary %s", reproPrefix, name)
}

// printServeCanaries prints one self-test line per server canary and
// returns how many were missed.
func printServeCanaries(w io.Writer, res []serveCanaryResult, took time.Duration) int {
	missed := 0
	for _, r := range res {
		if !r.caught {
			missed++
			fmt.Fprintf(w, "canary %-16s NOT CAUGHT (%s): %d server crash points checked and every claim held\n", r.name, r.why, r.points)
			continue
		}
		where := fmt.Sprintf("point %d", r.at)
		if r.at == 0 {
			where = "uncrashed run"
		}
		fmt.Fprintf(w, "canary %-16s caught by %-4s in subprocess serve (%s, model process, %.1f s)\n    %s\n    reproduce: %s\n",
			r.name, claimOf(r.detail), where, took.Seconds(), r.detail, serveCanaryRepro(r.name))
	}
	return missed
}

// serverCanary reports whether name is a server canary (one the
// subprocess sweep's server part catches, on a canary build).
func serverCanary(name string) bool {
	w, err := testknobs.Parse(name)
	return err == nil && w&^testknobs.ServerCanaries == 0
}

// serverCanaryNames lists the server canaries' names.
func serverCanaryNames() []string {
	var ns []string
	for _, c := range serverCanaries {
		ns = append(ns, c.name)
	}
	return ns
}

// selfTestServer runs the self-test's server canaries, prints a line for
// each, and returns their --json results and how many were missed.
func selfTestServer(ctx context.Context, stdout, stderr io.Writer) ([]jsonResult, int, error) {
	start := time.Now()
	res, err := serveCanaries(ctx, stderr)
	if err != nil {
		return nil, 0, err
	}
	missed := printServeCanaries(stdout, res, time.Since(start))
	var out []jsonResult
	for _, r := range res {
		jr := jsonResult{Canary: r.name, Caught: r.caught}
		if r.caught {
			jr.Claim, jr.Repro = claimOf(r.detail), serveCanaryRepro(r.name)
		}
		out = append(out, jr)
	}
	return out, missed, nil
}

// claimOf returns the claim a server-part violation names ("C1: …"), or
// "" for one that names none (an uncrashed run's).
func claimOf(detail string) string {
	c, _, ok := strings.Cut(detail, ":")
	if !ok || len(c) < 2 || len(c) > 3 || c[0] != 'C' {
		return ""
	}
	return c
}
