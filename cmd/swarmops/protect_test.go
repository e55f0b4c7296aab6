package main

import (
	"io"
	"strings"
	"testing"
)

// TestMCPToolsRefuseToMoveAProtectedRefLikeTheCLI: with main protected
// (from the command line: the MCP server has no tool to protect or
// unprotect), commit with advance and ref_set on main fail with
// E_PROTECTED and a hint to land, and land moves it.
func TestMCPToolsRefuseToMoveAProtectedRefLikeTheCLI(t *testing.T) {
	cs, store := mcpSession(t)
	base := commitTool(t, cs, map[string]any{"changes": "put f.txt = \"base\\n\"\n", "advance": "main"})
	getenv := inProcessEnv(store, false)
	if code := run([]string{"ref", "protect", "main"}, strings.NewReader(""), io.Discard, io.Discard, getenv); code != 0 {
		t.Fatalf("ref protect main: exit %d", code)
	}
	refused := func(what string, env map[string]any, ok bool) {
		t.Helper()
		if ok {
			t.Fatalf("%s moved protected main: %v", what, env)
		}
		e := env["error"].(map[string]any)
		if e["code"] != "E_PROTECTED" || e["ref"] != "main" || e["pattern"] != "main" || !strings.Contains(e["hint"].(string), "land") {
			t.Fatalf("%s: %v, want E_PROTECTED for main with a hint to land", what, e)
		}
	}
	env, ok := callTool(t, cs, "commit", map[string]any{"changes": "put f.txt = \"two\\n\"\n", "parents": []any{base}, "advance": "main"})
	refused("commit with advance", env, ok)
	sid := commitTool(t, cs, map[string]any{"changes": "put g.txt = \"g\\n\"\n", "parents": []any{base}})
	env, ok = callTool(t, cs, "ref_set", map[string]any{"name": "main", "new": sid, "expect": base})
	refused("ref_set", env, ok)
	if env, ok := callTool(t, cs, "land", map[string]any{"change": sid, "onto": "main"}); !ok {
		t.Fatalf("land onto protected main: %v", env)
	}
}
