package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/faultfs"
)

// The server part of the subprocess sweep crashes `swarmops serve` while
// clients commit through it. The server runs with SWARMOPS_TEST_CRASH_AT=N,
// so it dies at its Nth filesystem call as under SIGKILL (its open store's
// calls are the ones counted; the clients run with SWARMOPS_SERVER=required,
// so every commit is the server's). serveAgents clients run at once, each
// committing serveCommits times with --advance onto its own ref: their
// commits share the server's commit pipeline and its group sync. After
// each crash (process model, real OS):
//
//   - every commit a client was told succeeded is present (C1), and its
//     agent's ref names it or that agent's later commit;
//   - each agent's ref is absent (nothing acknowledged) or names one of its
//     agent's commits, whose tree reads back whole (C2);
//   - no other ref exists, and a deep verify is clean (C6).
//
// A client is told a commit succeeded when it exits 0, as a script would
// take it; the id its output names, when it names one, must exist.

const (
	serveAgents  = 3
	serveCommits = 2
)

// serveContent is what commit j (1-based) of agent i writes to its file.
func serveContent(i, j int) string { return fmt.Sprintf("agent %d commit %d\n", i, j) }

// serveSweep makes an empty store under tmp, crashes the server at every
// stride-th call, and returns the points crashed and the violations.
func (e *cliEnv) serveSweep(ctx context.Context, tmp string, stride, workers int64) (int, []string, error) {
	base := filepath.Join(tmp, "serve-base")
	if r, err := e.run(ctx, filepath.Join(base, "store"), 0, "", "init"); err != nil || !r.env.OK {
		return 0, nil, fmt.Errorf("server sweep setup: init: %v %s", err, r.outOr())
	}
	vs, fin, err := e.servePoint(ctx, tmp, base, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("server sweep: the uncrashed run: %w", err)
	}
	if len(vs) > 0 || !fin {
		for i, v := range vs {
			vs[i] = "VIOLATION: `swarmops serve` uncrashed: " + v
		}
		return 0, vs, nil
	}
	part := "the server part"
	for _, v := range e.serveEnv {
		if name, ok := strings.CutPrefix(v, canaryEnv+"="); ok {
			part += ", with --canary " + name
		}
	}
	return crashEveryCall(ctx, stride, workers, "serve", "`swarmops serve` with clients committing through it", part,
		func(at int64) ([]string, bool, error) { return e.servePoint(ctx, tmp, base, at) })
}

// servePoint copies the base store, serves it crashing at call at (0:
// never), commits through it from the clients, and checks what is left.
// fin is true when the server ran to its stop without reaching call at.
func (e *cliEnv) servePoint(ctx context.Context, tmp, base string, at int64) ([]string, bool, error) {
	work, err := os.MkdirTemp(tmp, "serve-point-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(work)
	store := filepath.Join(work, "store")
	if err := crashsweep.CopyTree(filepath.Join(base, "store"), store); err != nil {
		return nil, false, err
	}
	srv := exec.CommandContext(ctx, e.bin, "--store", store, "serve", "--grace", "5s")
	srv.Env = append(append(os.Environ(), faultfs.CrashAtEnv+"="), e.serveEnv...)
	if at > 0 {
		srv.Env = append(srv.Env, fmt.Sprintf("%s=%d", faultfs.CrashAtEnv, at))
	}
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	if err := srv.Start(); err != nil {
		return nil, false, err
	}
	exited := make(chan int, 1)
	go func() {
		err := srv.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			exited <- ee.ExitCode()
			return
		}
		exited <- 0
	}()
	var acks [serveAgents][]string
	if up := waitSocket(filepath.Join(store, "serve.sock"), exited); up {
		var wg sync.WaitGroup
		for i := range serveAgents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				acks[i] = e.serveClient(ctx, store, i+1)
			}()
		}
		wg.Wait()
		srv.Process.Signal(syscall.SIGTERM)
	}
	var code int
	select {
	case code = <-exited:
	case <-time.After(30 * time.Second):
		srv.Process.Kill()
		return nil, false, fmt.Errorf("the server did not stop")
	}
	acked := 0
	for _, a := range acks {
		acked += len(a)
	}
	switch {
	case code == 0 && acked == serveAgents*serveCommits:
		return nil, true, nil
	case code == 0:
		return []string{fmt.Sprintf("the server stopped uncrashed, but only %d of %d commits through it succeeded", acked, serveAgents*serveCommits)}, false, nil
	case code != faultfs.CrashExitStatus:
		return []string{fmt.Sprintf("the server exited %d instead of crashing", code)}, false, nil
	}
	return serveOracle(store, acks), false, nil
}

// waitSocket waits until the server's socket exists (true) or the server
// exited (false: it crashed while opening the store).
func waitSocket(sock string, exited chan int) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		select {
		case code := <-exited:
			exited <- code
			return false
		default:
		}
		if _, err := os.Stat(sock); err == nil {
			return true
		}
	}
	return false
}

// serveClient commits agent i's commits through the server, in turn, and
// returns the ids of those it was told succeeded (exit 0; "" when the
// output names no id); it stops at the first that did not.
func (e *cliEnv) serveClient(ctx context.Context, store string, i int) []string {
	var ids []string
	for j := 1; j <= serveCommits; j++ {
		stdin := fmt.Sprintf("put a%d.txt = %q\n", i, serveContent(i, j))
		r, err := e.runEnv(ctx, store, []string{"SWARMOPS_SERVER=required", faultfs.CrashAtEnv + "="}, stdin,
			"commit", "-F", "-", "--advance", fmt.Sprintf("agent-%d", i), "--agent", fmt.Sprintf("agent-%d", i))
		if err != nil || r.code != 0 {
			return ids
		}
		var d struct{ ID string }
		if r.env.OK && jsonData(r, &d) != nil {
			d.ID = ""
		}
		ids = append(ids, d.ID)
	}
	return ids
}

// serveOracle checks the store a crashed server left against what its
// clients were told (acks[i]: agent i+1's acknowledged commits, in order).
func serveOracle(store string, acks [serveAgents][]string) []string {
	return inCrashedStore(store, "C1: the store does not open after the crash: ", func(s *core.Store, sn *core.Snapshot) []string {
		return serveChecks(s, sn, acks)
	})
}

// serveChecks are serveOracle's checks of the store and a snapshot of it.
func serveChecks(s *core.Store, sn *core.Snapshot, acks [serveAgents][]string) []string {
	var vs []string
	for i, ids := range acks {
		for _, id := range ids {
			if id == "" {
				continue // serveRefCheck checks it by its content
			}
			cid, err := objects.ParseID(id)
			if err == nil {
				_, err = sn.Changeset(cid)
			}
			if err != nil {
				vs = append(vs, fmt.Sprintf("C1: agent %d's acknowledged commit %s is lost: %v", i+1, id, err))
			}
		}
		if v := serveRefCheck(sn, i+1, ids); v != "" {
			vs = append(vs, v)
		}
	}
	refs, err := sn.Refs()
	if err != nil {
		return append(vs, err.Error())
	}
	for _, r := range refs {
		if !strings.HasPrefix(r.Name, "agent-") {
			vs = append(vs, fmt.Sprintf("C2: ref %s, which no client moved, exists", r.Name))
		}
	}
	rep, err := s.Verify(true, nil)
	switch {
	case err != nil:
		vs = append(vs, "C6: verify --deep: "+err.Error())
	case len(rep.Problems) > 0:
		vs = append(vs, fmt.Sprintf("C6: verify --deep found %d problems, the first: %v", len(rep.Problems), rep.Problems[0]))
	}
	return vs
}

// serveRefCheck checks agent i's ref: absent only when nothing was
// acknowledged; else one of the agent's commits, no older than its last
// acknowledged one (that one itself when the contents say so), whose tree
// holds exactly the agent's file with that commit's content.
func serveRefCheck(sn *core.Snapshot, i int, ids []string) string {
	name := fmt.Sprintf("agent-%d", i)
	id, err := sn.Ref(name)
	if errors.Is(err, core.ErrNotFound) {
		if len(ids) > 0 {
			return fmt.Sprintf("C1: %s is absent, but %d of its commits were acknowledged", name, len(ids))
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("C2: %s: %v", name, err)
	}
	flat, err := sn.Flatten(id)
	if err != nil {
		return fmt.Sprintf("C2: %s names %s, whose tree does not read back: %v", name, id, err)
	}
	file := fmt.Sprintf("a%d.txt", i)
	e, ok := flat[file]
	if len(flat) != 1 || !ok {
		return fmt.Sprintf("C2: %s names %s, whose tree holds %d paths, not just %s", name, id, len(flat), file)
	}
	data, err := sn.Blob(e.ID)
	if err != nil {
		return fmt.Sprintf("C2: %s's %s does not read back: %v", name, file, err)
	}
	for j := 1; j <= serveCommits; j++ {
		if string(data) != serveContent(i, j) {
			continue
		}
		switch {
		case j < len(ids):
			return fmt.Sprintf("C1: %s names its commit %d, but its commit %d was acknowledged", name, j, len(ids))
		case j == len(ids) && ids[j-1] != "" && id.String() != ids[j-1]:
			return fmt.Sprintf("C1: %s names %s, not its acknowledged commit %d %s", name, id, j, ids[j-1])
		}
		return ""
	}
	return fmt.Sprintf("C2: %s names %s, whose %s holds %q, no commit's content", name, id, file, data)
}
