package core

import "github.com/swarmops/swarmops/core/vfs"

// defaultFS is the filesystem used when Options.FS is nil: the real OS.
func defaultFS() vfs.FS { return vfs.OS() }
