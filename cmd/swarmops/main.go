// Command swarmops is the command-line interface to a SwarmOps store: the
// tool agents and their orchestrators use for real work, many processes at
// once. Every command prints human text, or with --json (or SWARMOPS_JSON=1)
// exactly one JSON envelope on stdout, errors included (watch, a stream,
// one a line); every failure has a code and exit status from one table
// (errors.go, docs/cli.md).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// app is one invocation: its streams, global flags and result.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	start          time.Time
	// cwd, when set, is the directory relative paths are resolved against:
	// the client's, for a command a server runs (see path).
	cwd string
	// shared, when set, is the server's open store, used instead of
	// opening one; sharedDir is its directory, and sharedInfo that
	// directory as the server found it at its start.
	shared     *core.Store
	sharedDir  string
	sharedInfo os.FileInfo
	// stderrTTY says the client's stderr is a terminal (under a server).
	stderrTTY bool
	// done, when set, is closed when the client of a server goes away or
	// the server stops: a command that runs until told (watch) returns.
	done <-chan struct{}
	// serverStopping, under a server, is closed when the server stops:
	// done then means the server went, which a watch reports.
	serverStopping <-chan struct{}

	// groupCache is core's Options.GroupCache for the store this process
	// opens; 0: core's default.
	groupCache int

	storeFlag   string
	jsonOut     bool // from a pre-scan of the arguments, or SWARMOPS_JSON
	jsonFlag    bool // --json as parsed by cobra
	lockTimeout time.Duration

	data any             // the JSON "data" of a success
	text func(io.Writer) // the human rendering of a success
	fail *cliError       // a command's non-error failure outcome (recover, verify)
	// flushed says the success envelope went out already (flush).
	flushed bool
	// testFS, once testFSSet, is the filesystem SWARMOPS_TEST_CRASH_AT
	// asks for (nil: the OS), shared by the store and the work tree so
	// that one count numbers every call of the command.
	testFS    vfs.FS
	testFSSet bool
}

// run executes one command line in this process and returns the exit
// status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, start: time.Now()}
	return a.run(args)
}

// run executes one command line with a's streams and context: directly
// when runDirect can, else through cobra's Execute on a fresh tree.
func (a *app) run(args []string) int {
	status, _ := a.runLine(args)
	return status
}

// runLine is run; direct says runDirect ran the command.
func (a *app) runLine(args []string) (status int, direct bool) {
	if status, ok := a.prepare(args); !ok {
		return status, false
	}
	root := a.rootCmd(args)
	a.setStreams(root, args)
	if err, ran := runDirect(root, args); ran {
		return a.finish(err), true
	}
	// runDirect may have parsed flags into root before it gave up; a new
	// tree parses the line as if it had never been tried.
	return a.runTree(a.rootCmd(args), args), false
}

// prepare reads --json from the command line before parsing, so that a
// usage error in the same line is already reported as JSON, and
// SWARMOPS_JSON. ok false: the environment is malformed, and status is
// the usage error's.
func (a *app) prepare(args []string) (status int, ok bool) {
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" || arg == "--json=true" || arg == "--json=1" {
			a.jsonOut = true
		}
	}
	if v := a.getenv("SWARMOPS_JSON"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return a.finish(usagef("SWARMOPS_JSON=%q: want 1, 0, true or false", v)), false
		}
		a.jsonOut = a.jsonOut || on
	}
	return 0, true
}

// setStreams gives root the command line and a's streams.
func (a *app) setStreams(root *cobra.Command, args []string) {
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
}

// runTree executes args on the command tree root through cobra's Execute.
func (a *app) runTree(root *cobra.Command, args []string) int {
	if status, ok := a.prepare(args); !ok {
		return status
	}
	a.setStreams(root, args)
	return a.finish(root.Execute())
}

// finish prints the outcome and returns the exit status. Any error that is
// not already in the table came from cobra's parsing (unknown command or
// flag, wrong argument count) and is a usage error.
func (a *app) finish(err error) int {
	a.jsonOut = a.jsonOut || a.jsonFlag
	var ce *cliError
	switch {
	case err != nil:
		if e, ok := err.(*cliError); ok {
			ce = e
		} else {
			ce = &cliError{kind: kindUsage, err: err}
		}
	case a.fail != nil:
		ce = a.fail
	}
	m := meta{ElapsedMS: float64(time.Since(a.start).Microseconds()) / 1000}
	if ce == nil {
		if a.flushed {
			return 0
		}
		if a.jsonOut {
			a.writeJSON(okEnvelope{OK: true, Data: a.data, Meta: m})
		} else if a.text != nil {
			a.text(a.stdout)
		}
		return 0
	}
	if a.jsonOut {
		a.writeJSON(errEnvelope{OK: false, Error: errorBody(ce), Meta: m})
	} else {
		writeTextError(a.stderr, ce)
	}
	return ce.kind.Exit
}

// writeTextError prints a failure for a human: the code and message, the
// extras a human reads, then the hint.
func writeTextError(w io.Writer, ce *cliError) {
	fmt.Fprintf(w, "swarmops: %s: %s\n", ce.kind.Code, ce.message())
	keys := make([]string, 0, len(ce.extra))
	for k := range ce.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, humanValue(ce.extra[k]))
	}
	if ce.hint != "" {
		fmt.Fprintf(w, "hint: %s\n", ce.hint)
	}
	if ce.kind == kindUsage {
		fmt.Fprintln(w, "Run 'swarmops help' for usage.")
	}
}

// The envelopes. Structs, not maps, so "ok" comes first on the wire.
type (
	meta struct {
		ElapsedMS float64 `json:"elapsed_ms"`
	}
	okEnvelope struct {
		OK   bool `json:"ok"`
		Data any  `json:"data"`
		Meta meta `json:"meta"`
	}
	errEnvelope struct {
		OK    bool            `json:"ok"`
		Error json.RawMessage `json:"error"`
		Meta  meta            `json:"meta"`
	}
)

// errorBody renders an error object: code, message and retryable first, then
// the extras, the subject fields and the hint (sorted by key). None of them
// can override the first three.
func errorBody(ce *cliError) json.RawMessage {
	var b strings.Builder
	head, _ := json.Marshal(struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	}{ce.kind.Code, ce.message(), ce.kind.Retryable})
	b.Write(head[:len(head)-1])
	fields := make(map[string]any, len(ce.extra)+len(ce.subject)+1)
	for k, v := range ce.subject {
		fields[k] = v
	}
	for k, v := range ce.extra {
		fields[k] = v
	}
	if ce.hint != "" {
		fields["hint"] = ce.hint
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "code" && k != "message" && k != "retryable" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(fields[k])
		if err != nil {
			vb, _ = json.Marshal(fmt.Sprint(fields[k]))
		}
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// humanValue renders an error extra for a terminal.
func humanValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "(absent)"
	case []string:
		return strings.Join(x, ", ")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.Trim(string(b), `"`)
}

func (a *app) writeJSON(v any) {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(a.stderr, "swarmops: writing JSON: %v\n", err)
	}
}
