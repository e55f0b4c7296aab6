package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// mcpCmd is `swarmops mcp`: the store's operations as Model Context
// Protocol tools, over stdio, for agents that never shell out.
func (a *app) mcpCmd() *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "mcp [--agent NAME]",
		Short: "Serve the store's operations as MCP tools over stdin/stdout",
		Long: `Speak the Model Context Protocol on stdin and stdout: every tool is one
swarmops command (commit, land, status, update, resolve, log, show, diff,
cat, ls, checkout, ref_get, ref_set, ref_list, op_log, undo, watch), with a
JSON schema for its input, and answers with the command's JSON envelope as structured content; a
failure is a tool error carrying the same code and "retryable" as the CLI.
Each call runs through the store's server when one runs (swarmops serve),
else in this process. --agent names the agent recorded by commit, land and
undo when a call names none. Paths are relative to this process's working
directory.

Ref events: the resources swarmops://moves (every ref move) and
swarmops://refs/REF (one ref's moves) can be subscribed to; each durable
move then brings a notifications/resources/updated whose _meta.move is the
move as op_log prints it. The watch tool is the same stream as a long poll.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			srv := newMCPServer(a.mcpRunner(), agent, a.globalArgs())
			out := &syncWriter{w: a.stdout}
			err := srv.Run(cmd.Context(), &mcp.IOTransport{Reader: io.NopCloser(newMCPLines(a.stdin, out)), Writer: out})
			if err != nil && err != context.Canceled && !strings.Contains(err.Error(), "EOF") {
				return fmt.Errorf("mcp: %w", err)
			}
			a.flushed = true // the protocol owns stdout: no envelope after it
			return nil
		}),
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent name for commit, land and undo calls that give none")
	return cmd
}

// runner runs one swarmops command line with stdin and returns its stdout:
// the MCP server's only way into the store, so a tool does exactly what
// the command does.
type runner func(args []string, stdin string) []byte

// call is a command line a tool builds: the command's words, its flags,
// and its positional arguments, which go after "--" so that no value an
// agent sends is ever taken for a flag.
type call struct {
	cmd, flags, pos []string
	stdin           string
}

func (c call) args(global []string) []string {
	out := append(append(append([]string{}, c.cmd...), c.flags...), global...)
	return append(append(out, "--"), c.pos...)
}

// mcpRunner runs commands as this process would run them from its shell:
// through the store's server when one runs, with JSON output.
func (a *app) mcpRunner() runner {
	getenv := a.jsonEnv()
	return func(args []string, stdin string) []byte {
		var out bytes.Buffer
		dispatch(args, strings.NewReader(stdin), &out, io.Discard, getenv)
		return out.Bytes()
	}
}

// globalArgs repeats this invocation's global flags for the commands it
// runs.
func (a *app) globalArgs() []string {
	var g []string
	if a.storeFlag != "" {
		g = append(g, "--store", a.path(a.storeFlag))
	}
	g = append(g, "--lock-timeout", a.lockTimeout.String())
	return g
}

// The tools' inputs. Field names are the JSON names agents send.
type (
	commitIn struct {
		Changes    string   `json:"changes,omitempty" jsonschema:"a change list (put PATH = \"TEXT\", exec, link, delete PATH; one a line), or leave empty and give dir"`
		Dir        string   `json:"dir,omitempty" jsonschema:"a work tree (or plain directory) to record instead of a change list"`
		Parents    []string `json:"parents,omitempty" jsonschema:"parent revisions; the first is the base"`
		Advance    string   `json:"advance,omitempty" jsonschema:"ref to move to the new changeset: by compare-and-swap from the first parent, or a fast-forward when the ref is an ancestor of a parent"`
		Create     bool     `json:"create,omitempty" jsonschema:"create the advanced ref if missing"`
		AllowEmpty bool     `json:"allow_empty,omitempty" jsonschema:"record a changeset that changes nothing"`
		Agent      string   `json:"agent,omitempty" jsonschema:"agent name recorded in the changeset"`
		Message    string   `json:"message,omitempty" jsonschema:"changeset message"`
	}
	landIn struct {
		Change       string `json:"change" jsonschema:"the changeset (or ref) to land"`
		Onto         string `json:"onto" jsonschema:"the ref to land it on"`
		MaxAttempts  int    `json:"max_attempts,omitempty" jsonschema:"re-merge attempts after lost races"`
		Agent        string `json:"agent,omitempty"`
		Message      string `json:"message,omitempty"`
		Check        string `json:"check,omitempty" jsonschema:"land through the ref's merge queue: the ref moves only to a tree this command (sh -c, in a scratch work tree) passes on; a change that fails it is E_CHECK_FAILED with the output"`
		CheckTimeout string `json:"check_timeout,omitempty" jsonschema:"bound on each run of the check, a Go duration (default 10m, 0: none)"`
	}
	dirIn struct {
		Dir string `json:"dir,omitempty" jsonschema:"the work tree (default: the one around the working directory)"`
	}
	logIn struct {
		Rev string `json:"rev,omitempty" jsonschema:"revision to start from (default main)"`
		N   int    `json:"n,omitempty" jsonschema:"how many changesets (0: all)"`
	}
	revIn struct {
		Rev string `json:"rev" jsonschema:"a revision: id, id prefix, ref, with ~N"`
	}
	diffIn struct {
		A string `json:"a" jsonschema:"from revision"`
		B string `json:"b" jsonschema:"to revision"`
	}
	pathIn struct {
		Rev  string `json:"rev" jsonschema:"a revision"`
		Path string `json:"path,omitempty" jsonschema:"a path in its tree"`
	}
	checkoutIn struct {
		Rev   string `json:"rev" jsonschema:"the revision to check out"`
		Dir   string `json:"dir" jsonschema:"the directory to make a work tree of, or the work tree to switch"`
		Force bool   `json:"force,omitempty" jsonschema:"overwrite local changes or write into a non-empty directory"`
	}
	updateIn struct {
		Dir  string `json:"dir,omitempty" jsonschema:"the work tree (default: the one around the working directory)"`
		Onto string `json:"onto,omitempty" jsonschema:"the revision to bring it onto (default: the ref the tree follows)"`
	}
	resolveIn struct {
		Dir   string   `json:"dir,omitempty" jsonschema:"the work tree's root directory (default: the tree around the working directory)"`
		Paths []string `json:"paths,omitempty" jsonschema:"the conflicted paths, relative to dir (its root), or to the working directory without dir"`
		All   bool     `json:"all,omitempty" jsonschema:"resolve every conflicted path"`
		Force bool     `json:"force,omitempty" jsonschema:"resolve files that still hold conflict markers"`
	}
	refGetIn struct {
		Name string `json:"name" jsonschema:"the ref"`
	}
	refSetIn struct {
		Name   string `json:"name" jsonschema:"the ref"`
		New    string `json:"new" jsonschema:"the revision to move it to"`
		Expect string `json:"expect" jsonschema:"the value it must have now (compare-and-swap)"`
	}
	noIn struct{}
)

// newMCPServer builds the tools over run; global flags go on every
// command line.
func newMCPServer(run runner, agent string, global []string) *mcp.Server {
	ev := &refEvents{run: run, global: global}
	s := mcp.NewServer(&mcp.Implementation{Name: "swarmops", Version: "1"}, ev.options())
	s.AddReceivingMiddleware(argumentErrors)
	ev.srv = s
	orAgent := func(a string) string {
		if a == "" {
			return agent
		}
		return a
	}
	tool(s, run, global, "commit", "Record a changeset from a change list or a work tree; answers its id", func(in commitIn) call {
		c := call{cmd: []string{"commit"}}
		if in.Changes != "" {
			c.flags, c.stdin = append(c.flags, "-F", "-"), in.Changes
		} else if in.Dir != "" {
			c.flags = append(c.flags, "--dir", in.Dir)
		}
		for _, p := range in.Parents {
			c.flags = append(c.flags, "--parent", p)
		}
		c.flags = appendIf(c.flags, "--advance", in.Advance)
		c.flags = appendIf(c.flags, "--agent", orAgent(in.Agent))
		c.flags = appendIf(c.flags, "-m", in.Message)
		c.flags = appendFlag(c.flags, "--create", in.Create)
		c.flags = appendFlag(c.flags, "--allow-empty", in.AllowEmpty)
		return c
	})
	tool(s, run, global, "land", "Land a changeset's changes onto a ref (three-way merge; re-merges after a lost race); text files merge by lines; E_CONFLICT lists the paths and their conflicting hunks; with check, only a tree the check passes on is published (merge queue, batched with concurrent lands)", func(in landIn) call {
		c := call{cmd: []string{"land"}, flags: []string{"--onto", in.Onto}, pos: []string{in.Change}}
		c.flags = appendNum(c.flags, "--max-attempts", in.MaxAttempts)
		c.flags = appendIf(c.flags, "--agent", orAgent(in.Agent))
		c.flags = appendIf(c.flags, "-m", in.Message)
		c.flags = appendIf(c.flags, "--check", in.Check)
		c.flags = appendIf(c.flags, "--check-timeout", in.CheckTimeout)
		return c
	})
	tool(s, run, global, "status", "What changed in a work tree against its base", func(in dirIn) call {
		return call{cmd: []string{"status"}, pos: appendArg(nil, in.Dir)}
	})
	addReadTools(s, run, global)
	tool(s, run, global, "checkout", "Make a directory a work tree of a revision, or switch a work tree to it", func(in checkoutIn) call {
		return call{cmd: []string{"checkout"}, flags: appendFlag(nil, "--force", in.Force), pos: []string{in.Rev, in.Dir}}
	})
	tool(s, run, global, "update", "Bring a work tree onto a newer revision, keeping its own changes (three-way merge); conflicts get diff3 markers and are listed", func(in updateIn) call {
		return call{cmd: []string{"update"}, flags: appendIf(nil, "--onto", in.Onto), pos: appendArg(nil, in.Dir)}
	})
	tool(s, run, global, "resolve", "Mark conflicted paths of a work tree resolved after editing them (refused while a file holds conflict markers, unless force)", func(in resolveIn) call {
		c := call{cmd: []string{"resolve"}, flags: appendFlag(appendFlag(nil, "--all", in.All), "--force", in.Force)}
		c.pos = append(appendArg(nil, in.Dir), in.Paths...)
		return c
	})
	tool(s, run, global, "ref_get", "A ref's value", func(in refGetIn) call {
		return call{cmd: []string{"ref", "get"}, pos: []string{in.Name}}
	})
	tool(s, run, global, "ref_set", "Move a ref by compare-and-swap; E_CONFLICT gives the current value", func(in refSetIn) call {
		return call{cmd: []string{"ref", "set"}, flags: []string{"--expect", in.Expect}, pos: []string{in.Name, in.New}}
	})
	tool(s, run, global, "ref_list", "Every ref and its value", func(noIn) call {
		return call{cmd: []string{"ref", "list"}}
	})
	addOpLogTools(s, run, global, orAgent, ev)
	return s
}

// addReadTools adds the tools that read a revision: log, show, diff, cat
// and ls.
func addReadTools(s *mcp.Server, run runner, global []string) {
	tool(s, run, global, "log", "First-parent history from a revision (default main)", func(in logIn) call {
		return call{cmd: []string{"log"}, flags: appendNum(nil, "-n", in.N), pos: appendArg(nil, in.Rev)}
	})
	tool(s, run, global, "show", "A changeset and its changes against its first parent", func(in revIn) call {
		return call{cmd: []string{"show"}, pos: []string{in.Rev}}
	})
	tool(s, run, global, "diff", "The path changes from revision a to revision b", func(in diffIn) call {
		return call{cmd: []string{"diff"}, pos: []string{in.A, in.B}}
	})
	tool(s, run, global, "cat", "A file's content at a revision", func(in pathIn) call {
		return call{cmd: []string{"cat"}, pos: []string{in.Rev + ":" + in.Path}}
	})
	tool(s, run, global, "ls", "A directory's entries at a revision (root by default)", func(in pathIn) call {
		if in.Path == "" {
			return call{cmd: []string{"ls"}, pos: []string{in.Rev}}
		}
		return call{cmd: []string{"ls"}, pos: []string{in.Rev + ":" + in.Path}}
	})
}

// tool adds one tool whose call runs the command line build makes of its
// input, and answers with the command's envelope.
func tool[In any](s *mcp.Server, run runner, global []string, name, desc string, build func(In) call) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
		func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			c := build(in)
			return envelopeResult(run(c.args(global), c.stdin)), nil, nil
		})
}

// envelopeResult turns a command's JSON envelope into a tool result: the
// envelope is the structured content and the text, and a failed envelope
// is a tool error (its code and retryable are in it).
func envelopeResult(out []byte) *mcp.CallToolResult {
	var env struct {
		OK bool `json:"ok"`
	}
	var structured map[string]any
	if err := json.Unmarshal(out, &structured); err != nil || json.Unmarshal(out, &env) != nil {
		r := &mcp.CallToolResult{}
		r.SetError(fmt.Errorf("E_INTERNAL: the command printed no JSON envelope: %q", out))
		return r
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: strings.TrimSpace(string(out))}},
		StructuredContent: structured,
		IsError:           !env.OK,
	}
}

func appendIf(args []string, flag, v string) []string {
	if v == "" {
		return args
	}
	return append(args, flag, v)
}

func appendFlag(args []string, flag string, on bool) []string {
	if on {
		return append(args, flag)
	}
	return args
}

// appendNum adds flag with v when v is above zero (zero: the command's
// default).
func appendNum[N int | uint64](args []string, flag string, v N) []string {
	if v <= 0 {
		return args
	}
	return append(args, flag, fmt.Sprint(v))
}

func appendArg(args []string, v string) []string {
	if v == "" {
		return args
	}
	return append(args, v)
}
