//go:build !lockorder

package core

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/swarmops/swarmops/core/internal/lockorder"
)

// TestEveryLockIsTakenInTheDocumentedOrder runs the tests of core and its
// packages again in a lockorder build (go test -tags lockorder
// ./core/...), in which every mutex and file lock of the store is checked,
// per goroutine, against the lock-order table of the package
// documentation, and a lock taken out of order panics. It is how the
// ordinary test run (CI's ginkgo -r) checks the order; -short skips it.
// TestTheLockOrderIsChecked, in that build, fails if the checker is not
// wired in.
func TestEveryLockIsTakenInTheDocumentedOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the lockorder build is not run")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the lockorder tests: %v", err)
	}
	cmd := exec.Command(gobin, "test", "-tags", "lockorder", "-count=1", "./...")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags lockorder ./core/...: %v\n%s", err, out)
	}
}

// TestTheLockTableListsEveryRank: the lock-order table of the package
// documentation names the ranks internal/lockorder checks, in its order,
// so the table a reader sees is the one the checker enforces.
func TestTheLockTableListsEveryRank(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "//"))
		switch {
		case len(f) >= 3 && f[0] == "rank" && f[1] == "lock":
			in = true
		case in && len(f) == 0:
			in = false
		case in && strings.HasPrefix(line, "//\t") && !strings.HasPrefix(line, "//\t ") && len(f) > 0 && f[0][0] >= 'A' && f[0][0] <= 'Z':
			got = append(got, f[0])
		}
	}
	var want []string
	for _, r := range lockorder.Ranks() {
		want = append(want, r.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the table in doc.go lists ranks %v; internal/lockorder checks %v", got, want)
	}
}
