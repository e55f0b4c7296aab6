package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// A spawner is a small helper process (this binary again, with spawnerVar
// set) that starts the measured commands for the harness, one at a time.
//
// It exists because of what Linux reports as a child's peak RSS: at exec
// the kernel records the peak RSS of the memory image being replaced into
// the new program's ru_maxrss. A child started by vfork, as Go starts
// every child, replaces its parent's image, so each child's ru_maxrss is
// at least its parent's peak RSS. The harness grows past 15 MB
// (buffers, the agents' goroutines, the report), which would put a floor
// under every figure, above what git uses. A spawner stays near the Go
// runtime's minimum (about 4 MB), so the floor is under any real
// command's use. It also takes the time itself, from just before the start
// to the reaping, so the harness's scheduling does not count.
//
// The protocol is one JSON line each way per command. The child's stdin,
// stdout and stderr are files the harness names, so the spawner copies no
// output and its memory does not grow with it.
const spawnerVar = "WORKFLOWBENCH_SPAWNER"

// spawnRequest is one command for a spawner.
type spawnRequest struct {
	Bin    string   `json:"bin"`
	Args   []string `json:"args"`
	Dir    string   `json:"dir"`
	Env    []string `json:"env"`
	Stdin  string   `json:"stdin"` // a file, or "" for /dev/null
	Stdout string   `json:"stdout"`
	Stderr string   `json:"stderr"`
}

// spawnReply is what the command cost.
type spawnReply struct {
	Ms     float64 `json:"ms"`
	RSSKiB int64   `json:"maxrss_kib"`
	Exit   int     `json:"exit"`
	Err    string  `json:"err,omitempty"` // the command could not be started
}

// spawnerMain serves requests on stdin until it closes.
func spawnerMain() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<24)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var rq spawnRequest
		if err := json.Unmarshal(in.Bytes(), &rq); err != nil {
			return err
		}
		if err := out.Encode(spawn(rq)); err != nil {
			return err
		}
	}
	return in.Err()
}

// spawn runs one request to completion.
func spawn(rq spawnRequest) spawnReply {
	files := make([]*os.File, 3)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	var err error
	stdin := rq.Stdin
	if stdin == "" {
		stdin = os.DevNull
	}
	if files[0], err = os.Open(stdin); err != nil {
		return spawnReply{Err: err.Error()}
	}
	for i, p := range []string{rq.Stdout, rq.Stderr} {
		if files[i+1], err = os.Create(p); err != nil {
			return spawnReply{Err: err.Error()}
		}
	}
	cmd := exec.Command(rq.Bin, rq.Args...)
	cmd.Dir, cmd.Env = rq.Dir, rq.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return spawnReply{Err: err.Error()}
	}
	err = cmd.Wait()
	r := spawnReply{Ms: float64(time.Since(t0).Nanoseconds()) / 1e6, Exit: cmd.ProcessState.ExitCode()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.RSSKiB = ru.Maxrss // kilobytes on Linux
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.Err = err.Error()
	}
	return r
}

// spawnClient is the harness's end of one spawner.
type spawnClient struct {
	cmd *exec.Cmd
	enc *json.Encoder
	dec *json.Decoder
	io  string // the directory of its stdin, stdout and stderr files
}

// spawners is a pool of spawners: each caller takes one for a command, so
// concurrent commands (the agents) each have their own.
type spawners struct {
	self, dir string
	mu        sync.Mutex
	idle      []*spawnClient
	all       []*spawnClient
}

// get returns an idle spawner, starting one if none is idle.
func (s *spawners) get() (*spawnClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		return c, nil
	}
	c := &spawnClient{io: filepath.Join(s.dir, fmt.Sprintf("spawner%d", len(s.all)))}
	if err := os.MkdirAll(c.io, 0o755); err != nil {
		return nil, err
	}
	c.cmd = exec.Command(s.self)
	c.cmd.Env = append(os.Environ(), spawnerVar+"=1")
	c.cmd.Stderr = os.Stderr
	w, err := c.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a spawner: %w", err)
	}
	c.enc, c.dec = json.NewEncoder(w), json.NewDecoder(r)
	s.all = append(s.all, c)
	return c, nil
}

func (s *spawners) put(c *spawnClient) {
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.mu.Unlock()
}

// close ends every spawner (closing its stdin ends its loop).
func (s *spawners) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.all {
		if wc, ok := c.cmd.Stdin.(interface{ Close() error }); ok {
			wc.Close()
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
	s.all, s.idle = nil, nil
}

// run runs c through one spawner and reads back its output.
func (s *spawners) run(c cmdSpec, env []string) (proc, error) {
	sc, err := s.get()
	if err != nil {
		return proc{}, err
	}
	defer s.put(sc)
	rq := spawnRequest{Bin: c.bin, Args: c.args, Dir: c.dir, Env: env,
		Stdout: filepath.Join(sc.io, "stdout"), Stderr: filepath.Join(sc.io, "stderr")}
	if c.stdin != nil {
		rq.Stdin = filepath.Join(sc.io, "stdin")
		if err := os.WriteFile(rq.Stdin, c.stdin, 0o644); err != nil {
			return proc{}, err
		}
	}
	if err := sc.enc.Encode(rq); err != nil {
		return proc{}, fmt.Errorf("spawner: %w", err)
	}
	var rp spawnReply
	if err := sc.dec.Decode(&rp); err != nil {
		return proc{}, fmt.Errorf("spawner: %w", err)
	}
	if rp.Err != "" {
		return proc{}, fmt.Errorf("%s: %s", c, rp.Err)
	}
	p := proc{ms: rp.Ms, rssKiB: rp.RSSKiB, exit: rp.Exit}
	if p.stdout, err = os.ReadFile(rq.Stdout); err != nil {
		return p, err
	}
	p.stderr, err = os.ReadFile(rq.Stderr)
	return p, err
}
