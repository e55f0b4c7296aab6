//go:build swarmops_canary

package main

import (
	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/server"
)

// This file is compiled only with the swarmops_canary build tag, which
// crashsim --self-test and tests use to build a binary they can weaken
// from outside: SWARMOPS_TEST_CANARY=NAME[,NAME] (the names of
// internal/testknobs, as crashsim --canary takes them) sets those canaries
// on the store's options and, for the server's, on serve's configuration.
// A normal build has no such file, and no reader of the variable.

// canaryEnv names the variable.
const canaryEnv = "SWARMOPS_TEST_CANARY"

func init() { weakenHook = weakenFromEnv }

// weakenFromEnv sets on opts (a *core.Options or *server.Config) the
// canaries canaryEnv names that belong to it. An unknown name is a usage
// error: a canary run that silently ran unweakened would prove nothing.
func weakenFromEnv(getenv func(string) string, opts any) error {
	v := getenv(canaryEnv)
	if v == "" {
		return nil
	}
	w, err := testknobs.Parse(v)
	if err != nil {
		return usagef("%s=%q: %w", canaryEnv, v, err)
	}
	switch o := opts.(type) {
	case *core.Options:
		testknobs.Weaken(o, w&^testknobs.ServerCanaries)
	case *server.Config:
		testknobs.Weaken(o, w&testknobs.ServerCanaries)
	}
	return nil
}
