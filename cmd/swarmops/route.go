package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/server"
)

// serverModeEnv chooses whether commands go through a running server.
const serverModeEnv = "SWARMOPS_SERVER"

// Server modes.
const (
	modeAuto     = "auto"     // use a running server, else run here
	modeOff      = "off"      // always run here
	modeRequired = "required" // fail with E_UNAVAILABLE when no server runs
)

// forwardedEnv lists the environment variables a command reads that a
// server must see as the client's.
var forwardedEnv = []string{"SWARMOPS_JSON", "SWARMOPS_STORE", agentEnv, dirRecordsEnv, worktreesEnv}

// localOnly names the commands that always run in the invoking process:
// serve is the server, init makes the store a server would live in, and
// help and the MCP bridge need no store of their own.
var localOnly = map[string]bool{"serve": true, "init": true, "help": true, "mcp": true, "": true}

// dispatch runs a command line, through the store's server when one runs
// and SWARMOPS_SERVER allows it, and in this process otherwise. Output,
// codes and exit statuses are the same either way: the server runs the
// same code (server package doc).
func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, start: time.Now()}
	mode, err := serverMode(getenv)
	if err != nil || mode == modeOff || !routable(args, getenv) {
		if err != nil {
			a.jsonOut = prescanJSON(args, getenv)
			return a.finish(err)
		}
		return a.run(args)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return a.run(args)
	}
	req := &server.Request{Args: args, Cwd: cwd, Env: map[string]string{},
		StdoutTTY: isTerminal(stdout), StderrTTY: isTerminal(stderr)}
	for _, k := range forwardedEnv {
		if v := getenv(k); v != "" {
			req.Env[k] = v
		}
	}
	dir := storeArg(args, getenv, cwd)
	// The server's output is held until the command ends, so a server
	// that dies after writing part of it leaves only the client's own
	// error: one envelope, never a command's output and then an error.
	// Past holdLimit (a large cat) and for streams (watch) it flows as it
	// comes, as a killed process's would.
	if commandName(args) == "watch" {
		defer exitOnSignal()()
	}
	limit := holdLimit
	if streaming[commandName(args)] {
		limit = 0
	}
	out, errw := &holdWriter{w: stdout, limit: limit}, &holdWriter{w: stderr, limit: limit}
	status, err := server.Run(dir, req, stdin, out, errw)
	if err == nil || !out.flushed {
		out.done(err == nil)
		errw.done(err == nil)
	}
	switch {
	case err == nil:
		return status
	case server.NotRun(err) && (mode == modeAuto || !isStore(dir)):
		// Where there is no store there can be no server: the command
		// itself says what is wrong with the directory.
		return a.run(args)
	}
	a.jsonOut = prescanJSON(args, getenv)
	if server.NotRun(err) && errors.Is(err, syscall.EACCES) {
		// The server serves its owner only: waiting will not change that.
		return a.finish(&cliError{kind: kindUsage, err: err,
			msg:  fmt.Sprintf("the store's server refuses this user (%s=%s): %v", serverModeEnv, mode, err),
			hint: "run as the server's owner, or with " + serverModeEnv + "=auto or off to run in this process"})
	}
	if server.NotRun(err) {
		return a.finish(&cliError{kind: kindGone, err: err,
			msg:  fmt.Sprintf("no server runs for the store (%s=%s): %v", serverModeEnv, mode, err),
			hint: "start one with 'swarmops serve', or unset " + serverModeEnv})
	}
	return a.finish(&cliError{kind: kindGone, err: err,
		msg: fmt.Sprintf("the store's server went away during the command, which may or may not have taken effect: %v", err)})
}

// holdLimit is how much of a command's output the client holds back until
// the command ends (see dispatch).
const holdLimit = 8 << 20

// streaming names the commands whose output is a stream, never held.
var streaming = map[string]bool{"watch": true}

// holdWriter holds what is written until done, or passes it on once more
// than limit bytes came.
type holdWriter struct {
	w       io.Writer
	limit   int
	buf     []byte
	flushed bool
}

func (h *holdWriter) Write(b []byte) (int, error) {
	if !h.flushed && len(h.buf)+len(b) <= h.limit {
		h.buf = append(h.buf, b...)
		return len(b), nil
	}
	if !h.flushed {
		h.flushed = true
		if _, err := h.w.Write(h.buf); err != nil {
			return 0, err
		}
		h.buf = nil
	}
	return h.w.Write(b)
}

// done passes the held output on (keep) or drops it.
func (h *holdWriter) done(keep bool) {
	if keep && !h.flushed {
		h.w.Write(h.buf)
	}
	h.buf, h.flushed = nil, true
}

// serverMode reads SWARMOPS_SERVER; a malformed value is a usage error,
// never a silent default.
func serverMode(getenv func(string) string) (string, error) {
	switch v := getenv(serverModeEnv); v {
	case "", modeAuto:
		return modeAuto, nil
	case modeOff, modeRequired:
		return v, nil
	default:
		return "", usagef("%s=%q: want auto, off or required", serverModeEnv, v)
	}
}

// routable reports whether a command line may go to a server: not a
// local-only command, no test hook that must act in this process, and
// arguments a request can carry (a command line may hold bytes that are
// not UTF-8, which JSON cannot).
func routable(args []string, getenv func(string) string) bool {
	if getenv(faultfs.CrashAtEnv) != "" || getenv("SWARMOPS_TEST_LAND_PAUSE") != "" {
		return false
	}
	for _, a := range args {
		if !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
			return false
		}
	}
	return !localOnly[commandName(args)]
}

// isStore reports whether dir looks like a store (it has a checkpoint).
func isStore(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "checkpoint"))
	return err == nil
}

// commandName returns the first argument that is not a flag or a global
// flag's value: the command.
func commandName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case a == "--store" || a == "--lock-timeout":
			i++ // its value follows
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// storeArg finds the store directory the command names, the way the
// parsed flags will: --store, else SWARMOPS_STORE, else ./.swarmops.
func storeArg(args []string, getenv func(string) string, cwd string) string {
	dir := ""
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if args[i] == "--store" && i+1 < len(args) {
			dir = args[i+1]
			i++
		} else if v, ok := strings.CutPrefix(args[i], "--store="); ok {
			dir = v
		}
	}
	if dir == "" {
		dir = getenv("SWARMOPS_STORE")
	}
	if dir == "" {
		dir = treeStore(cwd)
	}
	if dir == "" {
		dir = ".swarmops"
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cwd, dir)
	}
	return dir
}

// prescanJSON says whether the failure of a command that never ran must be
// reported as JSON.
func prescanJSON(args []string, getenv func(string) string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" || a == "--json=1" {
			return true
		}
	}
	v := getenv("SWARMOPS_JSON")
	return v == "1" || strings.EqualFold(v, "true")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// sameStore refuses a command a server received for another store: the
// client found the server through the store's own socket, so this is a
// guard against a moved or replaced directory, not a path a user takes.
func (a *app) sameStore() error {
	if now, err := os.Stat(a.sharedDir); a.sharedInfo != nil && (err != nil || !os.SameFile(a.sharedInfo, now)) {
		// The server's store was moved away (its socket with it) or
		// removed: what the server would read by path is another store's.
		return &cliError{kind: kindGone, err: errors.New("store moved"),
			msg:  fmt.Sprintf("this server's store %s was moved or removed while it ran; the server stops", a.sharedDir),
			hint: "run the command again: it opens whatever its store path names now"}
	}
	got, err := os.Stat(a.storeDir())
	if a.sharedInfo == nil || err != nil || !os.SameFile(a.sharedInfo, got) {
		return &cliError{kind: kindUsage, err: errors.New("wrong store"),
			msg: fmt.Sprintf("this server serves %s, not %s", a.sharedDir, a.storeDir())}
	}
	return nil
}
