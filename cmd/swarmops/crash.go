package main

import (
	"strconv"
	"syscall"

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
//
// SWARMOPS_TEST_READ_ONLY=erofs|eacces wraps it (the OS, or the crash
// wrapper) in faultfs.ReadOnly, which refuses every change as a read-only
// mount (EROFS) or another user's store (EACCES) would: tests run as root,
// whom file modes do not stop.
func crashFS(getenv func(string) string) (vfs.FS, error) {
	fsys, err := crashAtFS(getenv)
	if err != nil {
		return nil, err
	}
	switch v := getenv(readOnlyEnv); v {
	case "":
		return fsys, nil
	case "erofs", "eacces":
		if fsys == nil {
			fsys = vfs.OS()
		}
		errno := syscall.EROFS
		if v == "eacces" {
			errno = syscall.EACCES
		}
		return faultfs.NewReadOnly(fsys, errno), nil
	default:
		return nil, usagef("%s=%q: want erofs or eacces", readOnlyEnv, v)
	}
}

// readOnlyEnv names the test knob of crashFS that makes the store
// unwritable.
const readOnlyEnv = "SWARMOPS_TEST_READ_ONLY"

func crashAtFS(getenv func(string) string) (vfs.FS, error) {
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
