package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPSubscribersReceiveARefEventAfterACommit: a client subscribed to
// main's resource receives, after a commit --advance main through the
// commit tool, a resources/updated notification carrying the move.
func TestMCPSubscribersReceiveARefEventAfterACommit(t *testing.T) {
	events := make(chan *mcp.ResourceUpdatedNotificationParams, 16)
	cs, _ := mcpSessionWith(t, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		events <- req.Params
	}})
	ctx := context.Background()
	if env, ok := callTool(t, cs, "commit", map[string]any{"changes": "put f = \"0\"\n", "advance": "main"}); !ok {
		t.Fatalf("commit: %v", env)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "swarmops://refs/main"}); err != nil {
		t.Fatal(err)
	}
	// The SDK's Subscribe returns before the server registers the
	// subscription (2026-07-28 protocol): commit until a notification
	// comes, and check it is one of the commits' moves.
	ids := map[any]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; ; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no ref event within 30s of commits")
		}
		env, ok := callTool(t, cs, "commit", map[string]any{"changes": fmt.Sprintf("put f = \"%d\"\n", i), "advance": "main", "agent": "a9"})
		if !ok {
			t.Fatalf("commit: %v", env)
		}
		ids[env["data"].(map[string]any)["id"]] = true
		select {
		case ev := <-events:
			m, _ := ev.Meta["move"].(map[string]any)
			if ev.URI != "swarmops://refs/main" || m["ref"] != "main" || !ids[m["new"]] || m["op"] != "commit" || m["agent"] != "a9" {
				t.Fatalf("event %s with move %v; want main's move to one of the commits, by a9", ev.URI, m)
			}
		case <-time.After(time.Second):
			continue
		}
		break
	}
	// The resource reads as main's newest moves.
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "swarmops://refs/main"})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"agent":"a9"`) {
		t.Fatalf("read swarmops://refs/main: %v, %v", res, err)
	}
	// Two commits or more moved main: op_log's n keeps the newest.
	if env, _ := callTool(t, cs, "op_log", map[string]any{"n": 1}); len(env["data"].([]any)) != 1 {
		t.Fatalf("op_log n 1: %v, want one move", env["data"])
	}
}

// TestMCPWatchIsALongPollThatResumesExactly: the watch tool waits for the
// first move after "from", and its seq, passed back, answers only what
// came later.
func TestMCPWatchIsALongPollThatResumesExactly(t *testing.T) {
	cs, _ := mcpSession(t)
	env, ok := callTool(t, cs, "watch", map[string]any{})
	if !ok {
		t.Fatalf("watch: %v", env)
	}
	from := env["data"].(map[string]any)["seq"]
	got := make(chan map[string]any, 1)
	go func() {
		env, _ := callTool(t, cs, "watch", map[string]any{"from": from, "wait_ms": 30000})
		got <- env
	}()
	time.Sleep(200 * time.Millisecond)
	if env, ok := callTool(t, cs, "commit", map[string]any{"changes": "put f = \"1\"\n", "advance": "main", "create": true}); !ok {
		t.Fatalf("commit: %v", env)
	}
	var d map[string]any
	select {
	case env := <-got:
		d = env["data"].(map[string]any)
	case <-time.After(40 * time.Second):
		t.Fatal("the long poll did not answer")
	}
	moves := d["moves"].([]any)
	if len(moves) != 1 || moves[0].(map[string]any)["ref"] != "main" {
		t.Fatalf("long poll answered %v; want main's move", d)
	}
	env, _ = callTool(t, cs, "watch", map[string]any{"from": d["seq"]})
	if again := env["data"].(map[string]any)["moves"].([]any); len(again) != 0 {
		t.Fatalf("watch from the answer's seq repeats %v", again)
	}
	env, _ = callTool(t, cs, "op_log", map[string]any{"n": 1})
	last := env["data"].([]any)[0].(map[string]any)
	if env, ok := callTool(t, cs, "undo", map[string]any{"op": last["id"]}); !ok || env["data"].(map[string]any)["op"] != "undo" {
		t.Fatalf("undo %v: %v", last["id"], env)
	}
}
