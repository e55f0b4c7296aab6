package main

import "github.com/swarmops/swarmops/bench/engine"

// countingEngine returns e unchanged. (The faultfs.Counting sync count for
// SwarmOps is wired in countingSyncs once faultfs exists.)
func countingEngine(e engine.Engine) engine.Engine { return e }

// countingSyncs counts SwarmOps' syncs through faultfs.Counting; until the
// faultfs package lands, only strace counts them.
func (h *harness) countingSyncs() error { return nil }
