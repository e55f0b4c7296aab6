package contention

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FdatasyncProbe measures the disk under dir the way the performance notes
// quote it: n overwrites of 128 bytes in pre-zeroed, already synced space,
// each followed by fdatasync, and returns the median. Overwriting allocated
// space is the journal's steady state, so this is the floor a commit's one
// data sync cannot go below.
func FdatasyncProbe(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fdatasync-probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const span = 1 << 20
	if _, err := f.Write(make([]byte, span)); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	rec := make([]byte, 128)
	ds := make([]time.Duration, n)
	for i := range ds {
		copy(rec, fmt.Sprintf("probe %d", i))
		start := time.Now()
		if _, err := f.WriteAt(rec, int64(i*4096)%span); err != nil {
			return 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, fmt.Errorf("fdatasync %s: %w", filepath.Base(f.Name()), err)
		}
		ds[i] = time.Since(start)
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a] < ds[b] })
	return ds[n/2], nil
}

// LoadAvg returns the 1, 5 and 15 minute load averages as /proc/loadavg
// prints them, or the error text (the figure is context, not a check).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
