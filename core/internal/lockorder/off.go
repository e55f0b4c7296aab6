//go:build !lockorder

package lockorder

import (
	"sync"

	"github.com/swarmops/swarmops/core/vfs"
)

// Enabled reports whether this build checks the lock order.
const Enabled = false

// Mutex is a sync.Mutex of rank R in the lock order (checked only in a
// lockorder build; here it is the plain mutex).
type Mutex[R Ranker] struct{ sync.Mutex }

// RWMutex is a sync.RWMutex of rank R in the lock order.
type RWMutex[R Ranker] struct{ sync.RWMutex }

// WrapFS returns fsys, whose file locks a lockorder build checks.
func WrapFS(fsys vfs.FS) vfs.FS { return fsys }

// Checked returns how many acquisitions were checked (0 in this build).
func Checked() int64 { return 0 }
