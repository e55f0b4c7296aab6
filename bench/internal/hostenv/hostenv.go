// Package hostenv describes the machine a benchmark runs on and the state
// of its disk and load at each measurement, so that every figure a
// benchmark in this module prints carries what it was measured under. It
// is shared by peerbench and workflow, which must record the same
// environment the same way for their figures to be read side by side.
package hostenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/swarmops/swarmops/bench/internal/stats"
)

// Machine describes the host once per report.
type Machine struct {
	NumCPU   int    `json:"nproc"`
	CPU      string `json:"cpu"`
	Kernel   string `json:"kernel"`
	FS       string `json:"filesystem"`
	MemTotal string `json:"mem_total"`
	Go       string `json:"go"`
	Strace   string `json:"strace"`
}

// Env is recorded with each measurement.
type Env struct {
	Time    string     `json:"time"`
	Load    [3]float64 `json:"loadavg"`
	ProbeUs float64    `json:"fdatasync_probe_us"` // median raw fdatasync of a 4 KiB overwrite
	FreeGiB float64    `json:"free_gib"`
}

// Describe returns the machine, with the filesystem that holds dir.
func Describe(dir string) Machine {
	m := Machine{NumCPU: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPU = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotal = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"))
	}
	m.FS = FSType(dir)
	if p, err := exec.LookPath("strace"); err == nil {
		m.Strace = p
	} else {
		m.Strace = "strace not found"
	}
	return m
}

// FSType names the filesystem holding dir from /proc/mounts (longest
// matching mount point).
func FSType(dir string) string {
	abs, _ := filepath.Abs(dir)
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, typ, dev := "", "unknown", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mp := fs[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best, typ, dev = mp, fs[2], fs[0]
		}
	}
	return fmt.Sprintf("%s on %s (%s)", typ, dev, best)
}

// Load returns the 1-, 5- and 15-minute load averages (zeros when
// /proc/loadavg cannot be read).
func Load() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	fs := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(fs); i++ {
		l[i], _ = strconv.ParseFloat(fs[i], 64)
	}
	return l
}

// FreeGiB returns the space available to an unprivileged user under dir.
func FreeGiB(dir string) (float64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return float64(st.Bavail) * float64(st.Bsize) / (1 << 30), nil
}

// Probe measures a raw fdatasync: a 4 KiB overwrite in pre-zeroed,
// already-synced space, then fdatasync, n times; the median in µs. It is the
// floor for one durable commit on this disk.
func Probe(dir string, n int) (float64, error) {
	p := filepath.Join(dir, "fdatasync-probe")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer os.Remove(p)
	defer f.Close()
	const span = 1 << 20
	if _, err := f.Write(make([]byte, span)); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	buf := bytes.Repeat([]byte{0xa5}, 4096)
	us := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%(span/4096))*4096); err != nil {
			return 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return stats.Median(us), nil
}

// Measure returns the environment of a measurement about to be taken in
// dir: the time, the load, a probe of 40 syncs and the free space. A probe
// that fails is reported on stderr and recorded as 0, so a measurement is
// never refused for want of it.
func Measure(dir, who string) Env {
	e := Env{Time: time.Now().UTC().Format(time.RFC3339), Load: Load()}
	if p, err := Probe(dir, 40); err == nil {
		e.ProbeUs = p
	} else {
		fmt.Fprintf(os.Stderr, "%s: fdatasync probe: %v\n", who, err)
	}
	e.FreeGiB, _ = FreeGiB(dir)
	return e
}

// DiskBytes sums the allocated size (st_blocks × 512, as du counts) of
// every file under dir. A file with several links is counted once, as du
// counts it.
func DiskBytes(dir string) (int64, error) {
	var total int64
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id := fileID{uint64(st.Dev), st.Ino}
			if st.Nlink > 1 && seen[id] {
				return nil
			}
			seen[id] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}
