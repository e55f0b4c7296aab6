package vfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/swarmops/swarmops/core/vfs"
)

// probeRegionEnv sets the size in MiB of the region BenchmarkFdatasync
// cycles through (default 16). A malformed value fails the benchmark.
const probeRegionEnv = "SWARMOPS_PROBE_REGION_MB"

func probeRegion(b *testing.B) int64 {
	v := os.Getenv(probeRegionEnv)
	if v == "" {
		return 16 << 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number of MiB", probeRegionEnv, v)
	}
	return int64(n) << 20
}

// BenchmarkFdatasync is the raw durability probe of the disk under TMPDIR:
// one 4 KiB write followed by fdatasync, where the write
//
//   - append:     extends the file, so fdatasync must also commit the new
//     size and block allocation (a journal transaction on ext4/xfs);
//   - overwrite:  lands in space written with zeros and synced beforehand,
//     so only the data block goes to disk;
//   - fallocated: lands in space reserved by fallocate and synced, which
//     ext4/xfs record as unwritten extents, so the first write of each
//     block still converts the extent (metadata).
//
// The difference between the three decides how the journal pre-zeroes its
// segments.
func BenchmarkFdatasync(b *testing.B) {
	region := probeRegion(b)
	block := make([]byte, 4096)
	for i := range block {
		block[i] = byte(i)
	}
	for _, mode := range []string{"append", "overwrite", "fallocated"} {
		b.Run("mode="+mode, func(b *testing.B) {
			dir, err := os.MkdirTemp("", "swarmops-probe-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			fsys := vfs.OS()
			name := filepath.Join(dir, "probe")
			newFile := func() afero.File {
				f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				switch mode {
				case "overwrite":
					zero := make([]byte, 1<<20)
					for off := int64(0); off < region; off += int64(len(zero)) {
						if _, err := f.WriteAt(zero, off); err != nil {
							b.Fatal(err)
						}
					}
				case "fallocated":
					if err := f.(vfs.Allocator).Allocate(0, region); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				return f
			}
			f := newFile()
			b.SetBytes(int64(len(block)))
			b.ResetTimer()
			var off int64
			for i := 0; i < b.N; i++ {
				if off+int64(len(block)) > region {
					// Start a fresh region so every write keeps its mode.
					b.StopTimer()
					f.Close()
					f = newFile()
					off = 0
					b.StartTimer()
				}
				if _, err := f.WriteAt(block, off); err != nil {
					b.Fatal(err)
				}
				if err := vfs.Datasync(f); err != nil {
					b.Fatal(err)
				}
				off += int64(len(block))
			}
			b.StopTimer()
			f.Close()
		})
	}
}

// BenchmarkLock compares an uncontended lock and unlock three ways: the
// vfs.OS Lock (open + flock + close, a fresh open file description per
// call, as the store uses it), and, on one already open descriptor, flock
// against an OFD lock (F_OFD_SETLK), the alternative that was not chosen.
func BenchmarkLock(b *testing.B) {
	dir := b.TempDir()
	name := filepath.Join(dir, "LOCK")
	b.Run("kind=vfs.OS.Lock", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			l, err := vfs.OS().Lock(name, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	b.Run("kind=flock", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
				b.Fatal(err)
			}
			if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kind=ofd", func(b *testing.B) {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		un := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0}
		for i := 0; i < b.N; i++ {
			if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
				b.Fatal(fmt.Errorf("F_OFD_SETLK: %w", err))
			}
			if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &un); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpenClose opens, reads 256 bytes of and closes an existing file:
// what opening an index run costs. kind=os.OpenFile is the standard
// library's open, which offers the descriptor to the runtime's poller (four
// fcntl calls and a failing epoll_ctl, and another epoll_ctl at close);
// vfs.OS opens with open(2) and os.NewFile instead.
func BenchmarkOpenClose(b *testing.B) {
	name := filepath.Join(b.TempDir(), "run")
	if err := os.WriteFile(name, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 256)
	for _, k := range []struct {
		name string
		open func() (afero.File, error)
	}{
		{"vfs.OS", func() (afero.File, error) { return vfs.OS().OpenFile(name, os.O_RDONLY, 0) }},
		{"os.OpenFile", func() (afero.File, error) { return os.OpenFile(name, os.O_RDONLY, 0) }},
	} {
		b.Run("kind="+k.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f, err := k.open()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.ReadAt(buf, 0); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
