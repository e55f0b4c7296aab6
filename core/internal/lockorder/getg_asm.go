//go:build lockorder && (amd64 || arm64)

package lockorder

// getg returns the address of the calling goroutine's runtime descriptor.
func getg() uintptr

// gid identifies the calling goroutine among the live ones. A descriptor
// is reused once its goroutine exits, which is why no lock that outlives
// the goroutine that took it (a queue ticket kept for a retry) is recorded
// as held.
func gid() int64 { return int64(getg()) }
