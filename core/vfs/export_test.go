package vfs

// SetNoOpenat2 makes every Root resolve as it does where openat2 is
// missing, and returns a function restoring the previous setting.
func SetNoOpenat2(v bool) (restore func()) {
	old := noOpenat2.Swap(v)
	return func() { noOpenat2.Store(old) }
}
