package main

import (
	"strconv"

	"github.com/swarmops/swarmops/core/vfs"
)

// crashExitStatus is the exit status of a simulated crash. It must equal
// faultfs.CrashExitStatus, whose wrapper ends the process itself.
const crashExitStatus = 197

// crashFS returns the filesystem the store should use: nil (the OS) unless
// SWARMOPS_TEST_CRASH_AT=N asks for the OS wrapped to crash at its Nth
// call. A malformed value is a usage error naming the variable, never a
// silent run without the crash.
func crashFS(getenv func(string) string) (vfs.FS, error) {
	v := getenv("SWARMOPS_TEST_CRASH_AT")
	if v == "" {
		return nil, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
		return nil, usagef("SWARMOPS_TEST_CRASH_AT=%q: want a positive call number (1-based)", v)
	}
	return wrapCrash()
}
