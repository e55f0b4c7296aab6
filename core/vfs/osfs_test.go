package vfs_test

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs/fstest"
)

// TestOSConformance runs the conformance suite against the real OS in a
// temporary directory.
func TestOSConformance(t *testing.T) {
	fstest.Run(t, func() (vfs.FS, string) { return vfs.OS(), t.TempDir() })
}

// TestOSFilesHaveAbilities checks that files of the real OS offer fdatasync
// and fallocate natively, so vfs.Datasync and vfs.Allocate do not fall back.
func TestOSFilesHaveAbilities(t *testing.T) {
	f, err := vfs.OS().Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(vfs.DataSyncer); !ok {
		t.Errorf("OS file %T is not a vfs.DataSyncer", f)
	}
	if _, ok := f.(vfs.Allocator); !ok {
		t.Errorf("OS file %T is not a vfs.Allocator", f)
	}
	if _, ok := f.(vfs.QuickReader); !ok {
		t.Errorf("OS file %T is not a vfs.QuickReader", f)
	}
}

// TestOSQuickReadAtReadsAsReadAt checks the raw pread against ReadAt: the
// same bytes and counts for whole, short and past-the-end reads, io.EOF
// where ReadAt reports it, and an error on a closed file.
func TestOSQuickReadAtReadsAsReadAt(t *testing.T) {
	f, err := vfs.OS().Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n int64 }{{0, 64}, {512, 64}, {0, 576}, {9990, 64}, {10000, 8}, {20000, 8}, {4090, 4096}, {5, 0}} {
		want := make([]byte, c.n)
		wn, werr := f.ReadAt(want, c.off)
		got := make([]byte, c.n)
		gn, gerr := vfs.QuickReadAt(f, got, c.off)
		if gn != wn || !errors.Is(gerr, werr) && gerr != werr || string(got[:gn]) != string(want[:wn]) {
			t.Errorf("QuickReadAt(%d bytes at %d) = %d, %v; ReadAt gave %d, %v", c.n, c.off, gn, gerr, wn, werr)
		}
	}
	f.Close()
	if _, err := vfs.QuickReadAt(f, make([]byte, 8), 0); err == nil {
		t.Error("QuickReadAt on a closed file succeeded")
	}
}

func TestOSBootIDLooksLikeUUID(t *testing.T) {
	id, err := vfs.OS().BootID()
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Errorf("BootID: got %q, want a UUID", id)
	}
}

// TestOSLockExcludesGoroutines checks that goroutines of one process
// exclude each other (each Lock is a new open file description): a counter
// guarded only by the lock never sees two holders.
func TestOSLockExcludesGoroutines(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	var holders, maxHolders atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				l, err := vfs.OS().Lock(name, 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if h := holders.Add(1); h > maxHolders.Load() {
					maxHolders.Store(h)
				}
				time.Sleep(50 * time.Microsecond)
				holders.Add(-1)
				if err := l.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if m := maxHolders.Load(); m != 1 {
		t.Errorf("max simultaneous holders: got %d, want 1", m)
	}
}

const lockHelperEnv = "SWARMOPS_VFS_LOCK_HELPER"

// TestLockHelperProcess is not a test: it is the child of
// TestOSLockAcrossProcesses, holding a lock until it is killed.
func TestLockHelperProcess(t *testing.T) {
	name := os.Getenv(lockHelperEnv)
	if name == "" {
		t.Skip("helper process only")
	}
	if _, err := vfs.OS().Lock(name, 5*time.Second); err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(2)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	os.Exit(3)
}

// TestOSLockAcrossProcesses checks that a lock held by another process
// excludes this one and that the holder's death releases it.
func TestOSLockAcrossProcesses(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("helper said %q, want \"locked\"", line)
	}
	if _, err := vfs.OS().Lock(name, 20*time.Millisecond); !errors.Is(err, vfs.ErrBusy) {
		t.Fatalf("Lock while another process holds it: got %v, want ErrBusy", err)
	}
	defer vfs.SetLockPoll(time.Minute)()
	polls := vfs.LockPolls()
	var got vfs.Locked
	var lerr error
	done := make(chan struct{})
	go func() {
		got, lerr = vfs.OS().Lock(name, 10*time.Second)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	cmd.Process.Kill() // SIGKILL: the kernel releases the helper's lock
	cmd.Wait()
	<-done
	if lerr != nil {
		t.Fatalf("Lock after the holder died: %v", lerr)
	}
	got.Unlock()
	// The death closed the holder's descriptor, and that close woke the
	// waiter (the flock fallback, where inotify is missing, counts none).
	if n := vfs.LockPolls() - polls; n != 0 {
		t.Errorf("%d lock-wait rounds ended on the poll timer after the holder died", n)
	}
}

func TestOSErrorsWrapErrno(t *testing.T) {
	dir := t.TempDir()
	o := vfs.OS()
	for _, n := range []string{"a", "b"} {
		f, err := o.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	err := o.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrExist) || pe.Path != filepath.Join(dir, "b") {
		t.Errorf("Link onto existing: got %v, want a *fs.PathError on the new name wrapping EEXIST", err)
	}
	err = o.Rename(filepath.Join(dir, "zz"), filepath.Join(dir, "b"))
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rename of missing: got %v, want a *fs.PathError wrapping ENOENT", err)
	}
	_, err = o.OpenFile(filepath.Join(dir, "zz"), os.O_RDONLY, 0)
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) || pe.Op != "open" || pe.Path != filepath.Join(dir, "zz") {
		t.Errorf("OpenFile of missing: got %v, want an open *fs.PathError on the name wrapping ENOENT", err)
	}
	_, err = o.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("OpenFile O_EXCL of existing: got %v, want a *fs.PathError wrapping EEXIST", err)
	}
	_, err = o.Lock(filepath.Join(dir, "nodir", "LOCK"), 0)
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lock in a missing dir: got %v, want a *fs.PathError wrapping ENOENT", err)
	}
}

// TestOSConformanceWithoutOpenat2 runs the suite again with the Root
// resolving component by component, as it does where openat2 is missing.
func TestOSConformanceWithoutOpenat2(t *testing.T) {
	defer vfs.SetNoOpenat2(true)()
	fstest.Run(t, func() (vfs.FS, string) { return vfs.OS(), t.TempDir() })
}
