package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resources whose updates announce ref moves: every move, and one
// ref's.
const (
	movesURI   = "swarmops://moves"
	refURIBase = "swarmops://refs/"
)

// The inputs of the operation-log tools.
type (
	opLogIn struct {
		Agent   string `json:"agent,omitempty" jsonschema:"only moves by this agent"`
		Ref     string `json:"ref,omitempty" jsonschema:"only moves of this ref"`
		N       int    `json:"n,omitempty" jsonschema:"only the newest N moves (0: all)"`
		From    uint64 `json:"from,omitempty" jsonschema:"only moves after this sequence number"`
		Reverse bool   `json:"reverse,omitempty" jsonschema:"oldest first"`
	}
	undoIn struct {
		Op    string `json:"op" jsonschema:"the move to reverse: its id from op_log (SEQ, or SEQ:REF)"`
		Agent string `json:"agent,omitempty" jsonschema:"agent recorded with the undo"`
	}
	watchIn struct {
		From   *uint64  `json:"from,omitempty" jsonschema:"answer the moves after this sequence number (the seq of the previous answer); absent: from now"`
		Refs   []string `json:"refs,omitempty" jsonschema:"only moves of these refs"`
		WaitMS int      `json:"wait_ms,omitempty" jsonschema:"wait up to this many milliseconds for a first move (a long poll); 0: answer at once"`
	}
)

// addOpLogTools adds op_log, undo and watch, and the resources whose
// subscriptions deliver ref events (refEvents).
func addOpLogTools(s *mcp.Server, run runner, global []string, orAgent func(string) string, ev *refEvents) {
	tool(s, run, global, "op_log", "The operation log: ref moves newest first, each with id, agent, operation, old and new values", func(in opLogIn) call {
		c := call{cmd: []string{"op", "log"}}
		c.flags = appendIf(c.flags, "--agent", in.Agent)
		c.flags = appendIf(c.flags, "--ref", in.Ref)
		c.flags = appendNum(c.flags, "-n", in.N)
		c.flags = appendNum(c.flags, "--from", in.From)
		c.flags = appendFlag(c.flags, "--reverse", in.Reverse)
		return c
	})
	tool(s, run, global, "undo", "Reverse one ref move by compare-and-swap; E_CONFLICT (with current) if the ref moved since", func(in undoIn) call {
		c := call{cmd: []string{"undo"}, pos: []string{in.Op}}
		c.flags = appendIf(c.flags, "--agent", orAgent(in.Agent))
		return c
	})
	tool(s, run, global, "watch", `The durable ref moves after "from" (absent: from now), waiting up to wait_ms for the first; answers {"moves":[...],"seq":S}: pass S as the next call's from to miss nothing and see nothing twice`, func(in watchIn) call {
		var wait time.Duration
		if in.WaitMS > 0 {
			wait = time.Duration(in.WaitMS) * time.Millisecond
		}
		c := watchOnce(in.From, wait)
		c.pos = in.Refs
		return c
	})
	s.AddResource(&mcp.Resource{URI: movesURI, Name: "moves", MIMEType: "application/json",
		Description: "The newest 100 ref moves (op log). Subscribe to it for a notification with each move (in _meta.move) as it becomes durable."},
		ev.read(func(string) call { return call{cmd: []string{"op", "log"}, flags: []string{"-n", "100"}} }))
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: refURIBase + "{+ref}", Name: "ref", MIMEType: "application/json",
		Description: "A ref's newest 20 moves (op log --ref), the first holding its value. Subscribe to it for a notification with each of its moves (in _meta.move)."},
		ev.read(func(ref string) call {
			return call{cmd: []string{"op", "log"}, flags: []string{"-n", "20", "--ref", ref}}
		}))
}

// watchOnce is the command line of `watch --once` after from (nil: from
// now), waiting up to wait for a first move, for the watch tool and for
// refEvents' polls alike. A wait of 0 adds no --wait (watch answers at
// once); a negative one is passed on, for watch to refuse.
func watchOnce(from *uint64, wait time.Duration) call {
	c := call{cmd: []string{"watch"}, flags: []string{"--once"}}
	if from != nil {
		c.flags = append(c.flags, "--from", strconv.FormatUint(*from, 10))
	}
	if wait != 0 {
		c.flags = append(c.flags, "--wait", wait.String())
	}
	return c
}

// refEvents turns durable ref moves into resource-updated notifications.
// It watches the store only once a client subscribes, by long polls of
// `watch --once` (through the store's server when one runs, like every
// tool), and stops when no session is left.
type refEvents struct {
	srv    *mcp.Server
	run    runner
	global []string
	mu     sync.Mutex
	// running says the loop runs; from is the sequence number it has
	// notified up to.
	running bool
	from    uint64
}

// options returns the server options that route subscriptions here.
func (ev *refEvents) options() *mcp.ServerOptions {
	return &mcp.ServerOptions{SubscribeHandler: ev.subscribe,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil }}
}

// subscribe accepts a subscription to the moves or a ref, and makes sure
// the loop runs. The first subscription reads where the store is before
// the server registers it, so every move made once it is registered is
// notified. A client of the 2026-07-28 protocol cannot tell when that is
// (the SDK's Subscribe returns before the server has the subscription), so
// notifications are a signal to read, and the watch tool, from the seq a
// client last saw, is the exact stream.
func (ev *refEvents) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if ref, ok := strings.CutPrefix(uri, refURIBase); ok {
		if err := checkRefName(ref); err != nil {
			return fmt.Errorf("subscribe %s: %w", uri, err)
		}
	} else if uri != movesURI {
		return mcp.ResourceNotFoundError(uri)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.running {
		return nil
	}
	w, err := ev.poll(nil, 0)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", uri, err)
	}
	ev.running, ev.from = true, w.Seq
	go ev.loop()
	return nil
}

// watched is the data of a `watch --once` envelope.
type watched struct {
	Moves []map[string]any `json:"moves"`
	Seq   uint64           `json:"seq"`
}

// poll runs `watch --once` after from (nil: from now), waiting up to wait.
func (ev *refEvents) poll(from *uint64, wait time.Duration) (*watched, error) {
	c := watchOnce(from, wait)
	out := ev.run(c.args(ev.global), "")
	var env struct {
		OK    bool            `json:"ok"`
		Data  watched         `json:"data"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("watch printed no envelope: %q", out)
	}
	if !env.OK {
		return nil, fmt.Errorf("watch failed: %s", env.Error)
	}
	return &env.Data, nil
}

// loop notifies each durable move until no session is left: to the
// subscribers of the moves and of the move's ref, with the move (as op log
// prints it) in the notification's _meta.
func (ev *refEvents) loop() {
	for {
		ev.mu.Lock()
		from := ev.from
		live := false
		for range ev.srv.Sessions() {
			live = true
		}
		if !live {
			ev.running = false
			ev.mu.Unlock()
			return
		}
		ev.mu.Unlock()
		w, err := ev.poll(&from, time.Second)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for _, m := range w.Moves {
			meta := mcp.Meta{"move": m}
			ev.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: movesURI, Meta: meta})
			ev.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: refURIBase + fmt.Sprint(m["ref"]), Meta: meta})
		}
		ev.mu.Lock()
		ev.from = max(ev.from, w.Seq)
		ev.mu.Unlock()
	}
}

// read returns a resource handler answering with the envelope of the
// command build(ref) makes; ref is the URI's ref ("" for the moves).
func (ev *refEvents) read(build func(ref string) call) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		ref, isRef := strings.CutPrefix(uri, refURIBase)
		if (!isRef && uri != movesURI) || (isRef && checkRefName(ref) != nil) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		c := build(ref)
		out := ev.run(c.args(ev.global), "")
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: strings.TrimSpace(string(out))}}}, nil
	}
}
