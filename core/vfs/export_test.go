package vfs

// SetNoOpenat2 makes every Root resolve as it does where openat2 is
// missing, and returns a function restoring the previous setting.
func SetNoOpenat2(v bool) (restore func()) {
	old := noOpenat2.Swap(v)
	return func() { noOpenat2.Store(old) }
}

// LockPolls returns how many lock-wait rounds ended on their timer, not on
// a close of the file.
func LockPolls() int64 { return lockPolls.Load() }

// SetNoInotify makes every lock wait block in flock, as where inotify is
// missing, and returns a function restoring the previous setting.
func SetNoInotify(v bool) (restore func()) {
	old := noInotify.Swap(v)
	return func() { noInotify.Store(old) }
}
