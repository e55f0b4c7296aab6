package textmerge

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// gitTB is what the git helpers need from *testing.T and *rapid.T.
type gitTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// gitRunner runs git in a scratch directory with every configuration file
// shut out, so that a user's diff.algorithm or merge.conflictStyle cannot
// change what the tests compare against.
type gitRunner struct {
	git string
	dir string
	env []string
}

// newGit finds git or skips the test: the comparisons need a real git.
func newGit(t *testing.T) *gitRunner {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH; the comparison with git merge-file and git diff needs it")
	}
	dir := t.TempDir()
	env := append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"HOME="+dir,
		"XDG_CONFIG_HOME="+dir,
		"LC_ALL=C",
	)
	return &gitRunner{git: git, dir: dir, env: env}
}

func (g *gitRunner) write(t gitTB, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(g.dir, name), data, 0o644); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
}

// run runs git and returns its stdout and exit code; codes above 127 and
// failures to start are fatal.
func (g *gitRunner) run(t gitTB, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command(g.git, args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	if code > 127 || code < 0 {
		t.Fatalf("git %s: exit %d: %s", strings.Join(args, " "), code, stderr.Bytes())
	}
	return stdout.Bytes(), code
}

// mergeFile runs `git merge-file -p --diff3` with the labels ours, base and
// theirs, and returns the merged text and whether it conflicted.
func (g *gitRunner) mergeFile(t gitTB, base, ours, theirs []byte) ([]byte, bool) {
	t.Helper()
	g.write(t, map[string][]byte{"base": base, "ours": ours, "theirs": theirs})
	out, code := g.run(t, "merge-file", "-p", "--diff3",
		"-L", "ours", "-L", "base", "-L", "theirs", "ours", "base", "theirs")
	return out, code > 0
}

// diff runs `git diff --no-index` from old to new with the given context,
// Myers and no indent heuristic (the settings git merge-file uses), and
// returns its output from the "---" line on.
func (g *gitRunner) diff(t gitTB, old, new []byte, context int) []byte {
	t.Helper()
	g.write(t, map[string][]byte{"old": old, "new": new})
	out, code := g.run(t, "diff", "--no-index", "--no-color", "--no-ext-diff",
		"--no-indent-heuristic", "--diff-algorithm=myers", "--text",
		"-U"+strconv.Itoa(context), "old", "new")
	if code == 0 {
		return nil
	}
	if i := bytes.Index(out, []byte("\n--- ")); i >= 0 {
		return out[i+1:]
	}
	t.Fatalf("git diff printed no --- line:\n%s", out)
	return nil
}

var hunkHeader = regexp.MustCompile(`(?m)^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// script is git's own edit script from old to new, read from its -U0
// hunks: with no context each hunk is exactly one change.
func (g *gitRunner) script(t gitTB, old, new []byte) []change {
	t.Helper()
	var out []change
	for _, m := range hunkHeader.FindAllSubmatch(g.diff(t, old, new, 0), -1) {
		a, del := headerNums(m[1], m[2])
		b, ins := headerNums(m[3], m[4])
		out = append(out, change{a: a, del: del, b: b, ins: ins})
	}
	return out
}

// headerNums turns a header's start and count into a 0-based first line
// and a count.
func headerNums(start, count []byte) (int, int) {
	s, _ := strconv.Atoi(string(start))
	n := 1
	if count != nil {
		n, _ = strconv.Atoi(string(count))
	}
	if n == 0 {
		return s, 0
	}
	return s - 1, n
}

func scriptString(s []change) string {
	var b strings.Builder
	for _, c := range s {
		fmt.Fprintf(&b, "[-%d,%d +%d,%d]", c.a, c.del, c.b, c.ins)
	}
	return b.String()
}
