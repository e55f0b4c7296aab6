package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpFuzzTools are the tools FuzzMCPArguments calls, by the first byte of
// its input.
var mcpFuzzTools = []string{"cat", "checkout", "commit", "diff", "land", "log", "ls", "op_log",
	"ref_get", "ref_list", "ref_set", "resolve", "show", "status", "undo", "update", "watch"}

// mcpFuzzSeeds are FuzzMCPArguments's seed corpus: a tool (by index in
// mcpFuzzTools) and its arguments.
var mcpFuzzSeeds = []struct {
	tool byte
	args string
}{
	{2, `{"changes":"put a = \"x\"\n","advance":"main","parents":["main"]}`},
	{4, `{"change":"--force","onto":"main","max_attempts":3}`},
	{10, `{"name":"main","new":"abc","expect":"def"}`},
	{11, `{"paths":["a","-x"],"all":true}`},
	{5, `{"rev":"main","n":-1}`},
	{1, `{"rev":"main","dir":"/nonexistent","force":"yes"}`},
	{0, `{"rev":1,"path":null}`},
	{2, `{"parents":"main"}`},
	{7, `{}`}, {9, `null`}, {3, `[]`}, {12, `"x"`}, {6, `{"rev":"\u0000"}`}, {4, `{`}, {8, ``},
}

// FuzzMCPArguments sends arbitrary bytes as the JSON arguments of each MCP
// tool. The server decodes and validates them against the tool's input
// schema: a call must end in a tool result or a typed JSON-RPC error,
// never a panic, and a call that reaches a command line must keep every
// value the agent sent after "--", where no value is taken for a flag.
// The runner is a fake that records the command line, so no input reaches
// a store or the filesystem.
func FuzzMCPArguments(f *testing.F) {
	for _, s := range mcpFuzzSeeds {
		f.Add(s.tool, []byte(s.args))
	}
	var (
		mu   sync.Mutex
		last []string
	)
	fake := func(args []string, stdin string) []byte {
		mu.Lock()
		last = append([]string(nil), args...)
		mu.Unlock()
		return []byte(`{"ok":true,"data":{}}`)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := newMCPServer(fake, "fuzz-agent", []string{"--lock-timeout", "1s"}).Connect(ctx, st, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer cs.Close()
	f.Fuzz(func(t *testing.T, tool byte, args []byte) {
		name := mcpFuzzTools[int(tool)%len(mcpFuzzTools)]
		if name == "watch" {
			return // it subscribes and waits for ref events; its arguments are op_log's
		}
		if !json.Valid(args) {
			// The client refuses to send what is not JSON; the server's
			// transport never sees it.
			return
		}
		mu.Lock()
		last = nil
		mu.Unlock()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("%s %q: untyped error %T: %v", name, args, err, err)
			}
			return
		}
		if res.IsError {
			return
		}
		var obj map[string]any
		if json.Unmarshal(args, &obj) != nil && string(args) != "null" {
			t.Fatalf("%s %q: arguments that are no JSON object were accepted", name, args)
		}
		mu.Lock()
		got := last
		mu.Unlock()
		if got == nil {
			t.Fatalf("%s %q: a successful result without a command line", name, args)
		}
		dash := slices.Index(got, "--")
		if dash < 0 {
			t.Fatalf("%s %q: command line %q has no --", name, args, got)
		}
		for _, a := range got[:dash] {
			if strings.HasPrefix(a, "--") && strings.Contains(a, "\n") {
				t.Fatalf("%s %q: flag word %q", name, args, a)
			}
		}
	})
}
