package main

import "github.com/swarmops/swarmops/core/vfs"

// wrapCrash is replaced by faultfs.CrashAtFromEnv(vfs.OS()) once both exist.
func wrapCrash() (vfs.FS, error) {
	return nil, usagef("SWARMOPS_TEST_CRASH_AT: this build has no crash wrapper yet")
}
