package main

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The MCP bridge as an agent framework starts it: the built binary over
// stdio, driven by the SDK's own client.
var _ = Describe("swarmops mcp over stdio", func() {
	It("lists its tools, commits, and reports a lost compare-and-swap with the CLI's code", func() {
		e := newStoreEnv()
		ctx, cs := stdioMCP(e, "a7", nil)
		tools, err := cs.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(tools.Tools)).To(BeNumerically(">=", 12))

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "commit",
			Arguments: map[string]any{"changes": "put x = \"1\"\n", "advance": "main"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeFalse(), "%v", res.Content)
		id := res.StructuredContent.(map[string]any)["data"].(map[string]any)["id"].(string)

		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ref_set",
			Arguments: map[string]any{"name": "main", "new": id, "expect": id[:8] + "0000"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IsError).To(BeTrue())
		er := res.StructuredContent.(map[string]any)["error"].(map[string]any)
		Expect(er["code"]).To(BeElementOf("E_CONFLICT", "E_NOT_FOUND"))
		Expect(er).To(HaveKey("retryable"))

		logs := e.ok("", "log", "-n", "1").([]any)
		Expect(logs[0].(map[string]any)["agent"]).To(Equal("a7"))
	})
})

// stdioMCP starts `swarmops mcp --agent AGENT` in e's workspace and
// connects the SDK's client (configured by opts, nil for none) to it over
// stdio; the session closes, and its context (a minute long) ends, when
// the spec does.
func stdioMCP(e *env, agent string, opts *mcp.ClientOptions) (context.Context, *mcp.ClientSession) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	DeferCleanup(cancel)
	c := e.cmd("", "mcp", "--agent", agent)
	c.Stdin = nil // the transport owns the child's stdin and stdout
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "spec"}, opts).Connect(ctx, &mcp.CommandTransport{Command: c}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { cs.Close() }) // as a deferred Close, its error is not the spec's
	return ctx, cs
}
