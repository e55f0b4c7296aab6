package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSession connects the SDK's own client to the MCP server in process,
// over a store in a temp dir.
func mcpSession(t *testing.T) (*mcp.ClientSession, string) {
	t.Helper()
	return mcpSessionWith(t, nil)
}

// mcpSessionWith is mcpSession with a client configured by opts.
func mcpSessionWith(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, string) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "store")
	getenv := inProcessEnv(store, true)
	if code := run([]string{"init"}, strings.NewReader(""), io.Discard, io.Discard, getenv); code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	runCmd := func(args []string, stdin string) []byte {
		var out strings.Builder
		run(args, strings.NewReader(stdin), &out, io.Discard, getenv)
		return []byte(out.String())
	}
	ct, st := mcp.NewInMemoryTransports()
	srv := newMCPServer(runCmd, "mcp-agent", nil)
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, store
}

// callTool calls a tool and returns its envelope.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	env, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("%s: structured content %T: %v", name, res.StructuredContent, res.Content)
	}
	if (env["ok"] == true) == res.IsError {
		t.Fatalf("%s: isError %v disagrees with the envelope %v", name, res.IsError, env)
	}
	return env, !res.IsError
}

// commitTool calls the commit tool with args, which must succeed, and
// returns the new changeset's id.
func commitTool(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	env, ok := callTool(t, cs, "commit", args)
	if !ok {
		t.Fatalf("commit: %v", env)
	}
	return env["data"].(map[string]any)["id"].(string)
}

func TestMCPToolsCommitLandAndReportConflictsLikeTheCLI(t *testing.T) {
	cs, _ := mcpSession(t)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tl.Name)
		}
	}
	sort.Strings(names)
	want := "cat checkout commit diff land log ls op_log ref_get ref_list ref_set resolve show status undo update watch"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("tools: %s, want %s", got, want)
	}

	base := commitTool(t, cs, map[string]any{"changes": "put f.txt = \"base\\n\"\n", "advance": "main", "message": "base"})
	// Two agents change f.txt from the same base; the first lands, the
	// second conflicts with the path named, as the CLI reports it.
	a := commitTool(t, cs, map[string]any{"changes": "put f.txt = \"one\\n\"\n", "parents": []any{base}})
	b := commitTool(t, cs, map[string]any{"changes": "put f.txt = \"two\\n\"\n", "parents": []any{base}})
	if env, ok := callTool(t, cs, "land", map[string]any{"change": a, "onto": "main"}); !ok {
		t.Fatalf("land a: %v", env)
	}
	env, ok := callTool(t, cs, "land", map[string]any{"change": b, "onto": "main"})
	if ok {
		t.Fatalf("land b succeeded: %v", env)
	}
	e := env["error"].(map[string]any)
	if e["code"] != "E_CONFLICT" || e["retryable"] != false {
		t.Fatalf("land b: %v, want E_CONFLICT, not retryable", e)
	}
	if paths, _ := e["paths"].([]any); len(paths) != 1 || paths[0] != "f.txt" {
		t.Fatalf("land b: paths %v, want [f.txt]", e["paths"])
	}
	// The agent given to the server is recorded when a call names none.
	env, _ = callTool(t, cs, "log", map[string]any{"n": 1, "rev": base})
	if got := env["data"].([]any)[0].(map[string]any)["agent"]; got != "mcp-agent" {
		t.Errorf("agent %v, want mcp-agent", got)
	}
	env, ok = callTool(t, cs, "cat", map[string]any{"rev": "main", "path": "f.txt"})
	if !ok || env["data"].(map[string]any)["content"] != "one\n" {
		t.Errorf("cat: %v", env)
	}
}

func TestMCPArgumentsAreNeverTakenForFlags(t *testing.T) {
	cs, _ := mcpSession(t)
	env, ok := callTool(t, cs, "show", map[string]any{"rev": "--help"})
	if ok {
		t.Fatalf("show --help as a revision succeeded: %v", env)
	}
	if code := env["error"].(map[string]any)["code"]; code != "E_USAGE" {
		t.Errorf("code %v, want E_USAGE", code)
	}
}

// TestMCPArgumentsTheSchemaRefusesGetTheEnvelope: a call missing a
// required argument, or giving one of the wrong type, is refused by the
// SDK's schema check before the tool runs; it still answers with the
// envelope, E_USAGE, as every other failed call does.
func TestMCPArgumentsTheSchemaRefusesGetTheEnvelope(t *testing.T) {
	cs, _ := mcpSession(t)
	for name, args := range map[string]map[string]any{
		"land":    {"change": "main"},              // no onto
		"ref_set": {"name": "main", "new": "main"}, // no expect
		"log":     {"n": "ten"},
	} {
		env, ok := callTool(t, cs, name, args)
		if ok {
			t.Fatalf("%s %v succeeded: %v", name, args, env)
		}
		e := env["error"].(map[string]any)
		if e["code"] != "E_USAGE" || e["retryable"] != false || !strings.Contains(e["message"].(string), "arguments") {
			t.Errorf("%s %v: %v, want E_USAGE naming the arguments", name, args, e)
		}
	}
}

// TestMCPUpdateAndResolveTools: a work tree behind main is updated by the
// update tool, which reports the conflict; resolve refuses the file while
// its markers are there, and takes it once edited; the commit goes through.
func TestMCPUpdateAndResolveTools(t *testing.T) {
	cs, store := mcpSession(t)
	if env, ok := callTool(t, cs, "commit", map[string]any{"changes": "put f.txt = \"base\\n\"\n", "advance": "main"}); !ok {
		t.Fatalf("commit: %v", env)
	}
	wt := filepath.Join(filepath.Dir(store), "wt")
	if env, ok := callTool(t, cs, "checkout", map[string]any{"rev": "main", "dir": wt}); !ok {
		t.Fatalf("checkout: %v", env)
	}
	if env, ok := callTool(t, cs, "commit", map[string]any{"changes": "put f.txt = \"theirs\\n\"\n", "advance": "main"}); !ok {
		t.Fatalf("commit on main: %v", env)
	}
	if err := os.WriteFile(filepath.Join(wt, "f.txt"), []byte("ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, ok := callTool(t, cs, "update", map[string]any{"dir": wt})
	if e, _ := env["error"].(map[string]any); ok || e["code"] != "E_UNRESOLVED" || len(e["conflicts"].([]any)) != 1 {
		t.Fatalf("update: %v, want E_UNRESOLVED with one conflict", env)
	}
	env, ok = callTool(t, cs, "resolve", map[string]any{"dir": wt, "paths": []any{"f.txt"}})
	if ok || env["error"].(map[string]any)["code"] != "E_UNRESOLVED" {
		t.Fatalf("resolve with markers left: %v, want E_UNRESOLVED", env)
	}
	if env, ok := callTool(t, cs, "commit", map[string]any{"dir": wt}); ok || env["error"].(map[string]any)["code"] != "E_UNRESOLVED" {
		t.Fatalf("commit of a conflicted tree: %v, want E_UNRESOLVED", env)
	}
	if err := os.WriteFile(filepath.Join(wt, "f.txt"), []byte("both\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if env, ok := callTool(t, cs, "resolve", map[string]any{"dir": wt, "all": true}); !ok {
		t.Fatalf("resolve --all: %v", env)
	}
	if env, ok := callTool(t, cs, "commit", map[string]any{"dir": wt, "advance": "main"}); !ok {
		t.Fatalf("commit after resolving: %v", env)
	}
}

func TestMCPLandWithACheckEjectsWhatFailsIt(t *testing.T) {
	cs, _ := mcpSession(t)
	base := commitTool(t, cs, map[string]any{"changes": "put f.txt = \"base\\n\"\n", "advance": "main", "message": "base"})
	good := commitTool(t, cs, map[string]any{"changes": "put g.txt = \"good\\n\"\n", "parents": []any{base}})
	bad := commitTool(t, cs, map[string]any{"changes": "put BAD = \"bad\\n\"\n", "parents": []any{base}})
	check := "if test -e BAD; then echo found BAD; exit 4; fi"
	env, ok := callTool(t, cs, "land", map[string]any{"change": good, "onto": "main", "check": check, "check_timeout": "1m"})
	if !ok || env["data"].(map[string]any)["checks"] != float64(1) {
		t.Fatalf("land good: %v", env)
	}
	env, ok = callTool(t, cs, "land", map[string]any{"change": bad, "onto": "main", "check": check})
	if ok {
		t.Fatalf("land bad succeeded: %v", env)
	}
	e := env["error"].(map[string]any)
	if e["code"] != "E_CHECK_FAILED" || e["exit_status"] != float64(4) || e["output"] != "found BAD\n" {
		t.Fatalf("land bad: %v, want E_CHECK_FAILED with exit status 4 and the output", e)
	}
}

// TestAppendNumAddsOnlyAPositiveValue: a tool's count or position goes on
// the command line only when above zero, where zero means the command's
// default.
func TestAppendNumAddsOnlyAPositiveValue(t *testing.T) {
	for _, c := range []struct {
		got, want []string
	}{
		{appendNum(nil, "-n", 0), nil},
		{appendNum(nil, "-n", -2), nil},
		{appendNum(nil, "-n", 1), []string{"-n", "1"}},
		{appendNum([]string{"--agent", "a"}, "-n", 3), []string{"--agent", "a", "-n", "3"}},
		{appendNum(nil, "--from", uint64(0)), nil},
		{appendNum(nil, "--from", uint64(1)<<40), []string{"--from", "1099511627776"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestMCPAnswersAMalformedLineAndGoesOn: a line that is not JSON gets a
// JSON-RPC parse error (id null) and the session carries on, answering the
// requests on either side of it.
func TestMCPAnswersAMalformedLineAndGoesOn(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	seedStore(t, store)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"broken`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	// The input stays open until three answers are out, as a client's
	// does: at its end the session stops, with requests still in flight.
	pr, pw := io.Pipe()
	var out, errb syncBuffer
	go func() {
		io.WriteString(pw, in)
		for i := 0; i < 500 && strings.Count(out.String(), "\n") < 3; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		pw.Close()
	}()
	st := run([]string{"mcp"}, pr, &out, &errb, storeEnv(store))
	if st != 0 {
		t.Fatalf("status %d, stderr %s", st, errb.String())
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     json.RawMessage     `json:"id"`
			Error  *struct{ Code int } `json:"error"`
			Result json.RawMessage     `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		switch {
		case m.Error != nil && m.Error.Code == -32700 && string(m.ID) == "null":
			got["parse error"] = true
		case string(m.ID) == "1" && m.Result != nil:
			got["initialize"] = true
		case string(m.ID) == "2" && bytes.Contains(m.Result, []byte(`"tools"`)):
			got["tools/list"] = true
		}
	}
	for _, want := range []string{"initialize", "parse error", "tools/list"} {
		if !got[want] {
			t.Errorf("no %s answer in:\n%s", want, out.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMCPAnswersAScriptThatClosesItsInput: a client that writes its
// requests and closes its end at once (a script's pipe) still gets every
// answer, the tool call's too, before the session ends.
func TestMCPAnswersAScriptThatClosesItsInput(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	seedStore(t, store)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","arguments":{"rev":"main","n":1}}}`,
	}, "\n") + "\n"
	var out, errb bytes.Buffer
	st := run([]string{"mcp"}, strings.NewReader(in), &out, &errb, storeEnv(store))
	if st != 0 {
		t.Fatalf("status %d, stderr %s", st, errb.String())
	}
	if !strings.Contains(out.String(), `"id":1`) || !strings.Contains(out.String(), `"id":2`) {
		t.Fatalf("not every request answered:\n%s", out.String())
	}
}
