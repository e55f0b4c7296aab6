package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/swarmops/swarmops/bench/internal/envelope"
)

// cmdSpec is one process to run: its binary, arguments, working directory,
// environment (added to the harness's base environment) and stdin.
type cmdSpec struct {
	bin   string
	args  []string
	dir   string
	env   []string
	stdin []byte
}

// proc is what one finished process cost and said.
type proc struct {
	ms     float64 // wall time from start to reaped, start-up included
	rssKiB int64   // peak resident set (wait4's ru_maxrss; a waited-for child's counts too)
	exit   int
	stdout []byte
	stderr []byte
}

// String is the command line as a user would type it (without the base
// environment), for the report.
func (c cmdSpec) String() string {
	var b strings.Builder
	for _, e := range c.env {
		b.WriteString(e + " ")
	}
	b.WriteString(baseName(c.bin))
	for _, a := range c.args {
		if strings.ContainsAny(a, " \"'") || a == "" {
			a = fmt.Sprintf("%q", a)
		}
		b.WriteString(" " + a)
	}
	return b.String()
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// execute runs c to completion through a spawner and measures it. Only a
// process that could not be started is an error; a non-zero exit is
// reported in proc.exit.
func (b *bench) execute(c cmdSpec) (proc, error) {
	return b.spawn.run(c, append(append([]string(nil), b.baseEnv...), c.env...))
}

// failure describes a process that exited non-zero: the error code of a
// swarmops JSON envelope when there is one, else the first line of stderr.
func (p proc) failure() string {
	if p.exit == 0 {
		return ""
	}
	var env envelope.Envelope
	if json.Unmarshal(p.stdout, &env) == nil && env.Error != nil {
		return fmt.Sprintf("exit %d: %s: %s", p.exit, env.Error.Code, firstLine(env.Error.Message))
	}
	msg := firstLine(string(p.stderr))
	if msg == "" {
		msg = firstLine(string(p.stdout))
	}
	return fmt.Sprintf("exit %d: %s", p.exit, msg)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 160
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// data decodes the data of a successful swarmops --json run into v.
func (p proc) data(v any) error {
	var env envelope.Envelope
	if err := json.Unmarshal(p.stdout, &env); err != nil {
		return fmt.Errorf("not a JSON envelope (%v): %s", err, firstLine(string(p.stdout)))
	}
	if !env.OK {
		return errors.New(p.failure())
	}
	return json.Unmarshal(env.Data, v)
}

// baseEnvironment is the harness's environment for its children: without
// any SWARMOPS_ or GIT_ variable of the caller's, with a HOME of its own
// and no system git config (so git runs at its defaults, not the
// machine's), a fixed identity and no pager.
func baseEnvironment(home string) []string {
	var env []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "SWARMOPS_") || strings.HasPrefix(k, "GIT_") || k == "HOME" || k == "XDG_CONFIG_HOME" || k == "PAGER" {
			continue
		}
		env = append(env, e)
	}
	return append(env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_PAGER=cat", "PAGER=cat",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid",
		"SWARMOPS_SERVER=off")
}

// tagVar marks every git process of one system and run, so the harness can
// wait for what a command left running in the background (git commit
// starts a detached `git gc --auto` after a large import).
const tagVar = "WORKFLOWBENCH_TAG"

// tagged returns the ids of running processes whose environment holds
// tagVar=tag.
func tagged(tag string) []int {
	want := []byte("\x00" + tagVar + "=" + tag + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append(append([]byte{0}, env...), 0), want) {
			out = append(out, pid)
		}
	}
	return out
}

// settle waits until no process tagged tag runs, up to limit, and returns
// how long it waited: zero when none ran.
func settle(tag string, limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if len(tagged(tag)) == 0 {
		return 0, nil
	}
	for len(tagged(tag)) > 0 {
		if time.Since(t0) > limit {
			return time.Since(t0), fmt.Errorf("processes tagged %s still running after %v: %v", tag, limit, tagged(tag))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0), nil
}
