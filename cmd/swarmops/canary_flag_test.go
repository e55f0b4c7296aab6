//go:build !swarmops_canary

package main

// canaryBuild says whether the test binary was built with the
// swarmops_canary tag (canary.go compiled in).
const canaryBuild = false
