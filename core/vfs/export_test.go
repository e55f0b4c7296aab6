package vfs

import (
	"time"

	"golang.org/x/sys/unix"
)

// SetNoOpenat2 makes every Root resolve as it does where openat2 is
// missing, and returns a function restoring the previous setting.
func SetNoOpenat2(v bool) (restore func()) {
	old := noOpenat2.Swap(v)
	return func() { noOpenat2.Store(old) }
}

// LockPolls returns how many lock-wait rounds ended on their timer, not on
// a close of the file.
func LockPolls() int64 { return lockPolls.Load() }

// SetLockPoll makes each lock-wait round last d and returns a function
// restoring the previous length. A test that asserts that no wait ended on
// the poll sets it long: on a loaded machine a holder's few milliseconds
// can outlast the default round without any close going unreported.
func SetLockPoll(d time.Duration) (restore func()) {
	old := lockPoll
	lockPoll = d
	return func() { lockPoll = old }
}

// SetNoInotify makes every lock wait block in flock, as where inotify is
// missing, and returns a function restoring the previous setting.
func SetNoInotify(v bool) (restore func()) {
	old := noInotify.Swap(v)
	return func() { noInotify.Store(old) }
}

// SetUnreportedCloses makes the lock waits' watch report no close, with
// poll rounds of d, as on a filesystem whose closes inotify does not see,
// and returns a function restoring the previous settings and clearing the
// fallback the misses set.
func SetUnreportedCloses(d time.Duration) (restore func()) {
	oldMask, oldPoll := watchMask, lockPoll
	watchMask, lockPoll = unix.IN_DELETE_SELF, d
	return func() {
		watchMask, lockPoll = oldMask, oldPoll
		noInotify.Store(false)
		misses.Store(0)
	}
}

// InotifyOff reports whether lock waits have fallen back to flock.
func InotifyOff() bool { return noInotify.Load() }
