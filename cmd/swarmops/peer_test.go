package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/server"
)

// cliAsChildEnv makes the test binary run the CLI (TestMain) instead of
// the tests: a test can then run it as another user.
const cliAsChildEnv = "SWARMOPS_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliAsChildEnv) != "" {
		os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// otherUserFixture makes a store another user may read but not write, and
// a copy of the test binary that user may run as the CLI (cliAsChildEnv).
func otherUserFixture(t *testing.T) (store, bin string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run the CLI as another user")
	}
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	store = filepath.Join(base, "store")
	seedStore(t, store)
	filepath.Walk(store, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, fi.Mode()|0o055)
		}
		return nil
	})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(base, "cli.test")
	if b, err := os.ReadFile(exe); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	return store, bin
}

// TestARequiredServerThatRefusesThisUserIsAUsageError: a store's server
// serves its owner only; another user with SWARMOPS_SERVER=required gets
// E_USAGE (exit 2, not retryable), not an E_UNAVAILABLE a retry loop would
// spin on. Only root can start the other user's process.
func TestARequiredServerThatRefusesThisUserIsAUsageError(t *testing.T) {
	store, bin := otherUserFixture(t)
	s, err := core.Open(store, core.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv, err := server.Start(server.Config{Dir: store, Handler: serveHandler(s, store), Stream: streams})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(5 * time.Second)
	cmd := exec.Command(bin, "--store", store, "--json", "log")
	cmd.Env = append(os.Environ(), cliAsChildEnv+"=1", serverModeEnv+"="+modeRequired)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.Output()
	if cmd.ProcessState.ExitCode() != kindUsage.Exit || !strings.Contains(string(out), `"code":"E_USAGE"`) {
		t.Fatalf("as uid 65534 against root's server: exit %d, %s", cmd.ProcessState.ExitCode(), out)
	}
}

// TestServeOnAStoreThisUserCannotWriteIsReadOnly: serve makes its socket
// in the store directory; as a user who may only read the store it is
// E_READ_ONLY (exit 20), not an I/O error.
func TestServeOnAStoreThisUserCannotWriteIsReadOnly(t *testing.T) {
	store, bin := otherUserFixture(t)
	cmd := exec.Command(bin, "--store", store, "--json", "serve")
	cmd.Env = append(os.Environ(), cliAsChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.Output()
	if cmd.ProcessState.ExitCode() != kindReadOnly.Exit || !strings.Contains(string(out), `"code":"E_READ_ONLY"`) {
		t.Fatalf("serve as uid 65534 on root's store: exit %d, %s", cmd.ProcessState.ExitCode(), out)
	}
}
