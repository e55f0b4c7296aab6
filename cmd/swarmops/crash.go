package main

import (
	"strconv"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// crashExitStatus is the exit status of a simulated crash: the faultfs
// wrapper ends the process itself with it, at the chosen call, as a SIGKILL
// would.
const crashExitStatus = faultfs.CrashExitStatus

// crashFS returns the filesystem the store should use: nil (the OS) unless
// SWARMOPS_TEST_CRASH_AT=N asks for the OS wrapped to end the process at its
// Nth call. A malformed value is a usage error naming the variable, never a
// silent run without the crash.
func crashFS(getenv func(string) string) (vfs.FS, error) {
	v := getenv(faultfs.CrashAtEnv)
	if v == "" {
		return nil, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
		return nil, usagef("%s=%q: want a positive call number (1-based)", faultfs.CrashAtEnv, v)
	}
	fsys, err := faultfs.CrashAtFromEnv(vfs.OS())
	if err != nil {
		return nil, usagef("%w", err)
	}
	return fsys, nil
}
