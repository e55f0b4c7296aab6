package gitx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/swarmops/swarmops/core"
)

// Sentinel errors. Each is also wrapped together with the core sentinel
// that says how a caller should treat it, so errors.Is(err, core.ErrIO)
// (and the CLI's error table) classify them without knowing this package.
var (
	// ErrNoGit: the git executable is not on PATH. Counts as core.ErrIO.
	ErrNoGit = errors.New("gitx: git is not on PATH")
	// ErrGitFailed: a git command exited with an error or could not be
	// talked to; the error carries its standard error. Counts as
	// core.ErrIO.
	ErrGitFailed = errors.New("gitx: git failed")
	// ErrNotRepository: the directory is not a git repository (Import), or
	// is neither a repository nor empty (Export). Counts as
	// core.ErrNotFound for Import and core.ErrInvalid for Export.
	ErrNotRepository = errors.New("gitx: not a git repository")
	// ErrUnrepresentable: a changeset git cannot hold faithfully (Export),
	// or a git path, mode or header the store cannot hold (Import). The
	// error names the changeset or commit and the path. Counts as
	// core.ErrInvalid.
	ErrUnrepresentable = errors.New("gitx: not representable")
)

// stderrLimit bounds how much of a git command's standard error an error
// message quotes.
const stderrLimit = 4 << 10

// repo is a git repository, found by its git directory.
type repo struct {
	gitDir string // absolute; what git commands are given
	// commonDir is the directory a linked work tree shares with the main
	// one (gitDir itself otherwise): the export's mapping and lock live
	// there, beside the refs and objects every work tree sees.
	commonDir string
	// packDir is where the repository's pack files are.
	packDir string
	env     []string
}

// keptGitEnv lists the GIT_* variables a git command still sees: they
// locate git's own programs or trace it, and cannot redirect it to another
// repository.
var keptGitEnv = map[string]bool{"GIT_EXEC_PATH": true, "GIT_TRACE": true, "GIT_TRACE_PACKET": true,
	"GIT_TRACE_PERFORMANCE": true, "GIT_TRACE_SETUP": true, "GIT_TRACE2": true, "GIT_TRACE2_EVENT": true,
	"GIT_TRACE2_PERF": true}

// gitEnv returns the environment git commands run with: the process's,
// without the GIT_* variables that could point git at other objects,
// another index or another repository, plus the ones this package sets.
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") && !keptGitEnv[k] {
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"GIT_NO_REPLACE_OBJECTS=1", "GIT_TERMINAL_PROMPT=0"}, extra...)...)
}

// gitPath returns the git executable, or ErrNoGit.
func gitPath() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", fmt.Errorf("%w: %w: %w", core.ErrIO, ErrNoGit, err)
	}
	return p, nil
}

// command returns a git command on r: git --git-dir=DIR ARGS....
func (r *repo) command(args ...string) (*exec.Cmd, error) {
	git, err := gitPath()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(git, append([]string{"--git-dir=" + r.gitDir}, args...)...)
	cmd.Env = r.env
	cmd.Dir = r.gitDir
	return cmd, nil
}

// run runs a git command with stdin as its input and returns its output.
func (r *repo) run(stdin []byte, args ...string) ([]byte, error) {
	cmd, err := r.command(args...)
	if err != nil {
		return nil, err
	}
	var out, errOut bytes.Buffer
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &out, &limitedBuffer{max: stderrLimit, b: &errOut}
	if err := cmd.Run(); err != nil {
		return nil, gitFailed(args, err, errOut.String())
	}
	return out.Bytes(), nil
}

// gitFailed is the error of a git command that failed: its subcommand, how
// it ended, and what it said.
func gitFailed(args []string, err error, stderr string) error {
	name := "git"
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" {
			i++ // a configuration value, not the subcommand
			continue
		}
		if !strings.HasPrefix(args[i], "-") {
			name = "git " + args[i]
			break
		}
	}
	msg := strings.TrimSpace(stderr)
	kind := core.ErrIO
	if strings.Contains(msg, "No space left on device") {
		kind = core.ErrNoSpace
	}
	if msg == "" {
		return fmt.Errorf("%w: %w: %s: %w", kind, ErrGitFailed, name, err)
	}
	return fmt.Errorf("%w: %w: %s: %w: %s", kind, ErrGitFailed, name, err, msg)
}

// initNames are what git init --bare makes in its directory: all a
// failed init can have left there.
var initNames = []string{"HEAD", "config", "description", "hooks", "info", "objects", "refs", "branches"}

// limitedBuffer keeps the first max bytes written to it and drops the
// rest, so a chatty git cannot grow memory without bound.
type limitedBuffer struct {
	max int
	b   *bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// findRepo returns the repository at dir: a bare repository, or a work
// tree whose .git is there. It never looks in dir's parents, so a
// directory inside some other work tree is not taken for that tree.
func findRepo(dir string) (*repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %q: %w", core.ErrNotFound, ErrNotRepository, dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %w: %q does not exist or is not a directory", core.ErrNotFound, ErrNotRepository, dir)
	}
	git, err := gitPath()
	if err != nil {
		return nil, err
	}
	env := gitEnv()
	cmd := exec.Command(git, "rev-parse", "--absolute-git-dir", "--git-common-dir", "--git-path", "objects/pack")
	cmd.Dir = abs
	cmd.Env = append(env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(abs))
	var errOut bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: stderrLimit, b: &errOut}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%w: %w: %q: %s", core.ErrNotFound, ErrNotRepository, dir, strings.TrimSpace(errOut.String()))
		}
		return nil, gitFailed([]string{"rev-parse"}, err, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 {
		return nil, gitFailed([]string{"rev-parse"}, fmt.Errorf("unexpected output %q", out), errOut.String())
	}
	// The common directory and the pack path may come relative to the
	// directory git ran in.
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(abs, p)
	}
	return &repo{gitDir: lines[0], commonDir: rel(lines[1]), packDir: rel(lines[2]), env: env}, nil
}

// openOrInit returns the repository at dir, creating a bare one there if
// dir does not exist or is an empty directory (created reports which). A
// directory with other content is ErrNotRepository, counted as
// core.ErrInvalid: export never writes into a directory it does not
// recognize.
func openOrInit(dir string) (r *repo, created bool, err error) {
	ents, rerr := os.ReadDir(dir)
	switch {
	case errors.Is(rerr, os.ErrNotExist), rerr == nil && len(ents) == 0:
		git, err := gitPath()
		if err != nil {
			return nil, false, err
		}
		cmd := exec.Command(git, "init", "--bare", "--quiet", "--", dir)
		cmd.Env = gitEnv()
		var errOut bytes.Buffer
		cmd.Stderr = &limitedBuffer{max: stderrLimit, b: &errOut}
		if err := cmd.Run(); err != nil {
			// A half-made repository (a full disk) would make the retry
			// find files but no repository: what init left goes, and dir
			// is as it was, missing or empty.
			for _, name := range initNames {
				os.RemoveAll(filepath.Join(dir, name))
			}
			if rerr != nil {
				os.Remove(dir) // only if nothing else came meanwhile
			}
			return nil, false, gitFailed([]string{"init"}, err, errOut.String())
		}
		created = true
	case rerr != nil && !isNotDir(rerr):
		return nil, false, fmt.Errorf("%w: %q: %w", core.ErrIO, dir, rerr)
	}
	r, err = findRepo(dir)
	if errors.Is(err, ErrNotRepository) {
		return nil, false, fmt.Errorf("%w: %w: %q holds files but no git repository (export creates one only in a missing or empty directory)",
			core.ErrInvalid, ErrNotRepository, dir)
	}
	return r, created, err
}

// isNotDir reports whether err says a path is not a directory.
func isNotDir(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "not a directory")
}

// closeAndWait closes w (a command's stdin) and waits for cmd, returning
// the first error, with the command's stderr.
func closeAndWait(cmd *exec.Cmd, w io.Closer, errOut *bytes.Buffer, args []string) error {
	cerr := w.Close()
	if err := cmd.Wait(); err != nil {
		return gitFailed(args, err, errOut.String())
	}
	if cerr != nil {
		return gitFailed(args, cerr, errOut.String())
	}
	return nil
}
