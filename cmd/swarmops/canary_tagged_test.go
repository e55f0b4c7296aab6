//go:build swarmops_canary

package main

const canaryBuild = true
