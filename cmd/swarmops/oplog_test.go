package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the operation log", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put a = \"1\"\n", "--advance", "main", "--create", "--agent", "ann")
		e.commit("put a = \"2\"\n", "--advance", "main", "--agent", "bob")
	})

	It("prints op log and undo as golden JSON", func() {
		e.extra = append(e.extra, "SWARMOPS_AGENT=cy")
		e.ok("", "ref", "create", "topic", "main~1")
		expectGolden("op-log", e.run("", "op", "log", "--json"), e.root)
		last := e.ok("", "op", "log", "-n", "1").([]any)[0].(map[string]any)
		expectGolden("undo", e.run("", "undo", last["id"].(string), "--json"), e.root)
	})

	It("lists every move newest first, with agent and operation, filtered by agent, ref and count", func() {
		e.ok("", "ref", "create", "topic", "main~1", "--agent", "cy")
		e.ok("", "ref", "delete", "topic")
		all := e.ok("", "op", "log").([]any)
		Expect(all).To(HaveLen(4))
		ops := []string{}
		for _, m := range all {
			mm := m.(map[string]any)
			ops = append(ops, fmt.Sprintf("%s %s %s", mm["op"], mm["agent"], mm["ref"]))
		}
		Expect(ops).To(Equal([]string{"ref-delete  topic", "ref-create cy topic", "commit bob main", "commit ann main"}))
		Expect(e.ok("", "op", "log", "--agent", "bob")).To(ConsistOf(HaveKeyWithValue("ref", "main")))
		Expect(e.ok("", "op", "log", "--ref", "topic", "-n", "1")).To(ConsistOf(HaveKeyWithValue("op", "ref-delete")))
		rev := e.ok("", "op", "log", "--reverse").([]any)
		Expect(rev[0]).To(HaveKeyWithValue("agent", "ann"))
		first := rev[0].(map[string]any)["seq"].(float64)
		Expect(e.ok("", "op", "log", "--from", fmt.Sprint(first))).To(HaveLen(3))
		text := e.run("", "op", "log", "-n", "1")
		Expect(text.Exit).To(Equal(0), text.Stderr)
		Expect(text.Stdout).To(MatchRegexp(`^\d+ \S+ ref-delete - topic [0-9a-f]{12} -> \(none\)\n$`))
	})

	It("undoes a move by compare-and-swap and refuses once the ref moved", func() {
		log := e.ok("", "op", "log", "--ref", "main").([]any)
		newest, older := log[0].(map[string]any), log[1].(map[string]any)
		before := e.journalState()
		r := e.run("", "undo", older["id"].(string), "--json")
		er := r.Err()
		Expect(er["code"]).To(Equal("E_CONFLICT"))
		Expect(er["current"]).To(Equal(newest["new"]))
		Expect(e.journalState()).To(Equal(before), "a refused undo wrote")

		d := e.ok("", "undo", newest["id"].(string), "--agent", "fixer").(map[string]any)
		Expect(d).To(HaveKeyWithValue("op", "undo"))
		Expect(d).To(HaveKeyWithValue("undoes", newest["id"].(string)+":main"))
		Expect(d).To(HaveKeyWithValue("agent", "fixer"))
		Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", newest["old"]))
		// The undo is an operation too, and undoing it restores main.
		e.ok("", "undo", fmt.Sprint(d["id"]))
		Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", newest["new"]))

		Expect(e.run("", "undo", "main", "--json").Err()["code"]).To(Equal("E_USAGE"))
		Expect(e.run("", "undo", "999", "--json").Err()["code"]).To(Equal("E_NOT_FOUND"))
	})

	It("streams moves with watch --json, one envelope a line, and stops on SIGINT with status 0", func() {
		w := startWatch(e, "--json")
		e.commit("put a = \"3\"\n", "--advance", "main", "--agent", "dan")
		e.ok("", "ref", "create", "other", "main")
		got := w.waitFor(2)
		Expect(got[0]).To(HaveKeyWithValue("ref", "main"))
		Expect(got[0]).To(HaveKeyWithValue("agent", "dan"))
		Expect(got[1]).To(HaveKeyWithValue("op", "ref-create"))
		// Only moves of the refs named, when some are.
		w2 := startWatch(e, "--json", "--from", "0", "other")
		Expect(w2.waitFor(1)[0]).To(HaveKeyWithValue("ref", "other"))
		Expect(w.stop()).To(Equal(0))
		Expect(w2.stop()).To(Equal(0))
		Expect(w.lines).To(HaveLen(2), "a clean stop adds nothing to the stream")
	})

	It("answers watch --once with the moves after --from, waiting for the first", func() {
		d := e.ok("", "watch", "--once").(map[string]any)
		Expect(d["moves"]).To(BeEmpty())
		seq := fmt.Sprint(d["seq"])
		done := make(chan any, 1)
		go func() {
			defer GinkgoRecover()
			done <- e.ok("", "watch", "--once", "--from", seq, "--wait", "20s")
		}()
		time.Sleep(200 * time.Millisecond)
		e.commit("put a = \"4\"\n", "--advance", "main", "--agent", "eve")
		var got any
		Eventually(done, 20*time.Second).Should(Receive(&got))
		moves := got.(map[string]any)["moves"].([]any)
		Expect(moves).To(HaveLen(1))
		Expect(moves[0]).To(HaveKeyWithValue("agent", "eve"))
	})

	It("refuses a watch --from past the store's last durable frame: it was never this store's", func() {
		d := e.ok("", "watch", "--once").(map[string]any)
		seq := uint64(d["seq"].(float64))
		er := e.run("", "--json", "watch", "--once", "--from", fmt.Sprint(seq+1)).Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(e.ok("", "watch", "--once", "--from", fmt.Sprint(seq))).To(HaveKeyWithValue("moves", BeEmpty()))
	})
})

// watcher is a running `swarmops watch` whose stdout lines are collected.
type watcher struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
	done  chan struct{}
}

// startWatch starts `swarmops watch ARGS` in e.
func startWatch(e *env, args ...string) *watcher {
	GinkgoHelper()
	return startWatchWith(e, nil, args...)
}

// startWatchWith is startWatch with more environment variables.
func startWatchWith(e *env, environ []string, args ...string) *watcher {
	GinkgoHelper()
	w := &watcher{cmd: e.cmd("", append([]string{"watch"}, args...)...), done: make(chan struct{})}
	w.cmd.Env = append(w.cmd.Env, environ...)
	out, err := w.cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(w.cmd.Start()).To(Succeed())
	go func() {
		defer close(w.done)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				w.add(line)
			}
			if err != nil {
				io.Copy(io.Discard, r)
				return
			}
		}
	}()
	// The watch reads its start before it prints: give it the moment it
	// needs, or a move made at once would predate its "now".
	time.Sleep(300 * time.Millisecond)
	return w
}

func (w *watcher) add(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.raw = append(w.raw, line)
	var env struct {
		OK   bool           `json:"ok"`
		Data map[string]any `json:"data"`
	}
	if json.Unmarshal([]byte(line), &env) == nil && env.OK {
		w.lines = append(w.lines, env.Data)
	}
}

// waitFor waits until n moves arrived and returns them.
func (w *watcher) waitFor(n int) []map[string]any {
	GinkgoHelper()
	var got []map[string]any
	Eventually(func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		got = append([]map[string]any(nil), w.lines...)
		return len(got)
	}, 20*time.Second, 10*time.Millisecond).Should(BeNumerically(">=", n), "watch printed %v", w.raw)
	return got
}

// stop sends SIGINT and returns the exit status.
func (w *watcher) stop() int {
	GinkgoHelper()
	Expect(w.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	return w.wait()
}

// wait waits for the watch to end and returns its exit status.
func (w *watcher) wait() int {
	GinkgoHelper()
	Eventually(w.done, 20*time.Second).Should(BeClosed())
	err := w.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0
}

// seqRefs renders moves as "seq:ref" strings, the identity of a move.
func seqRefs(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%v:%v", m["seq"], m["ref"])
	}
	return out
}

// opLogOldestFirst is the store's whole op log as seq:ref strings.
func opLogOldestFirst(e *env) []string {
	GinkgoHelper()
	var ms []map[string]any
	for _, m := range e.ok("", "op", "log", "--reverse").([]any) {
		ms = append(ms, m.(map[string]any))
	}
	return seqRefs(ms)
}

// The ref events as an agent framework gets them: the built binary over
// stdio, the SDK's client subscribed to main.
var _ = Describe("swarmops mcp over stdio", func() {
	It("notifies a subscriber of main's move after a commit --advance", func() {
		e := newStoreEnv()
		events := make(chan *mcp.ResourceUpdatedNotificationParams, 16)
		ctx, cs := stdioMCP(e, "a8", &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { events <- req.Params },
		})
		Expect(cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "swarmops://moves"})).To(Succeed())
		// The SDK's Subscribe returns before the server registers the
		// subscription: commit until a notification comes.
		var ev *mcp.ResourceUpdatedNotificationParams
		Eventually(func() bool {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "commit",
				Arguments: map[string]any{"changes": "put x = \"1\"\n", "advance": "main", "allow_empty": true}})
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IsError).To(BeFalse(), "%v", res.Content)
			select {
			case ev = <-events:
				return true
			case <-time.After(time.Second):
				return false
			}
		}, 30*time.Second).Should(BeTrue(), "no ref event within 30s of commits")
		Expect(ev.URI).To(Equal("swarmops://moves"))
		Expect(ev.Meta["move"]).To(And(HaveKeyWithValue("ref", "main"), HaveKeyWithValue("agent", "a8"), HaveKeyWithValue("op", "commit")))
	})
})
