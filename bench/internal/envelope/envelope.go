// Package envelope holds the JSON answer of a swarmops command run with
// --json, as the harnesses of this module read it: the same shape whether
// the command ran as a process (cmd/workflow) or through a server
// (engine's swarmops-serve).
package envelope

import "encoding/json"

// Envelope is swarmops's --json output: "ok", then "data" on success or
// "error" on failure.
type Envelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *Error          `json:"error"`
}

// Error is the error object of a failed command: the fields the harnesses
// read of it (docs/cli.md lists them all).
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	// Current is an E_CONFLICT's ref value, absent (nil) when the ref is.
	Current *string `json:"current"`
}
