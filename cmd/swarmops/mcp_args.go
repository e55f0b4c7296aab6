package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// argumentErrors is the middleware that gives a tool call whose arguments
// fail the tool's input schema (checked by the SDK before the tool runs)
// the envelope every other failed call has: E_USAGE, with code and
// retryable, and the SDK's reason as the message. Without it the agent
// got the reason as bare text, with no code to decide on.
func argumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || method != "tools/call" || !r.IsError || r.StructuredContent != nil || len(r.Content) != 1 {
			return res, err
		}
		text, ok := r.Content[0].(*mcp.TextContent)
		if !ok || !strings.HasPrefix(text.Text, `validating "arguments"`) {
			return res, err
		}
		ce := &cliError{kind: kindUsage, msg: text.Text,
			hint: "the tool's input schema (tools/list) says which arguments it takes"}
		out, merr := json.Marshal(errEnvelope{OK: false, Error: errorBody(ce)})
		if merr != nil {
			return res, err
		}
		return envelopeResult(out), nil
	}
}
