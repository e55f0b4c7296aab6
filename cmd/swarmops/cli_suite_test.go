package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

// updateGolden rewrites testdata/golden instead of comparing against it.
var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// binPath is the swarmops binary under test, built once per suite.
var binPath string

func TestCLI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "swarmops CLI")
}

var _ = SynchronizedBeforeSuite(func() []byte {
	p, err := gexec.Build("github.com/swarmops/swarmops/cmd/swarmops")
	Expect(err).NotTo(HaveOccurred())
	return []byte(p)
}, func(p []byte) {
	binPath = string(p)
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	gexec.CleanupBuildArtifacts()
})

// result is one finished run of the binary.
type result struct {
	Exit           int
	Stdout, Stderr string
}

// JSON decodes stdout, which must be exactly one JSON document.
func (r result) JSON() map[string]any {
	GinkgoHelper()
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	var m map[string]any
	Expect(dec.Decode(&m)).To(Succeed(), "stdout is not JSON: %q", r.Stdout)
	Expect(dec.More()).To(BeFalse(), "stdout holds more than one JSON document: %q", r.Stdout)
	return m
}

// Data returns the "data" of a successful envelope.
func (r result) Data() any {
	GinkgoHelper()
	m := r.JSON()
	Expect(m["ok"]).To(BeTrue(), "envelope: %s (stderr %s)", r.Stdout, r.Stderr)
	return m["data"]
}

// Err returns the "error" of a failed envelope, checking its fixed fields
// and that the exit status matches the code's row of the table.
func (r result) Err() map[string]any {
	GinkgoHelper()
	m := r.JSON()
	Expect(m["ok"]).To(BeFalse(), "envelope: %s", r.Stdout)
	e, ok := m["error"].(map[string]any)
	Expect(ok).To(BeTrue(), "no error object in %s", r.Stdout)
	Expect(e).To(HaveKey("message"))
	Expect(e).To(HaveKey("retryable"))
	code, _ := e["code"].(string)
	var row *errorKind
	for _, k := range errorTable() {
		if k.Code == code {
			row = &k
		}
	}
	Expect(row).NotTo(BeNil(), "code %q is not in the table", code)
	Expect(r.Exit).To(Equal(row.Exit), "exit status of %s", code)
	Expect(e["retryable"]).To(Equal(row.Retryable), "retryable of %s", code)
	return e
}

// throughServer, set by TestCLIThroughServer in the copy of the suite it
// starts, runs every command of a spec through a `swarmops serve` of the
// spec's store, started as soon as init made it: the output, codes and
// exit statuses the specs check must be the same as without a server.
var throughServer = os.Getenv("SWARMOPS_TEST_CLI_SERVER") == "1"

// TestCLIThroughServer runs the whole CLI suite again, in a child process,
// with every command going through a server.
func TestCLIThroughServer(t *testing.T) {
	if throughServer {
		t.Skip("this is the copy of the suite that runs through a server")
	}
	if testing.Short() {
		t.Skip("-short: the suite runs once, without a server")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLI$", "-ginkgo.no-color")
	cmd.Env = append(os.Environ(), "SWARMOPS_TEST_CLI_SERVER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the CLI suite through a server failed: %v\n%s", err, out)
	}
}

// env is a test workspace: a temp dir holding the store and any files.
type env struct {
	root  string
	store string
	extra []string
	// server is the spec's `swarmops serve`, in throughServer mode.
	server *exec.Cmd
}

func newEnv() *env {
	root := GinkgoT().TempDir()
	return &env{root: root, store: filepath.Join(root, "store")}
}

// newStoreEnv is a workspace with an empty store made by `swarmops init`.
func newStoreEnv() *env {
	GinkgoHelper()
	e := newEnv()
	e.ok("", "init")
	return e
}

// openSegment opens the store's first journal segment for writing, and
// returns it with the durable offset info reports: where the acknowledged
// frames end.
func (e *env) openSegment() (*os.File, int64) {
	GinkgoHelper()
	info := e.ok("", "info").(map[string]any)
	end := int64(info["durable_offset"].(float64))
	f, err := os.OpenFile(filepath.Join(e.store, "journal", "seg-000000000001"), os.O_RDWR, 0)
	Expect(err).NotTo(HaveOccurred())
	return f, end
}

// baseEnv strips the caller's SWARMOPS_* settings so they cannot leak in.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWARMOPS_") {
			out = append(out, kv)
		}
	}
	return out
}

// cmd prepares a run in the workspace with the store in SWARMOPS_STORE,
// or with SWARMOPS_STORE unset when e.store is empty.
func (e *env) cmd(stdin string, args ...string) *exec.Cmd {
	c := exec.Command(binPath, args...)
	c.Dir = e.root
	c.Env = baseEnv()
	if e.store != "" {
		c.Env = append(c.Env, "SWARMOPS_STORE="+e.store)
	}
	c.Env = append(c.Env, e.extra...)
	if e.server != nil {
		// Required, not auto: a command that quietly ran without the
		// server would pass for one that went through it.
		c.Env = append(c.Env, "SWARMOPS_SERVER=required")
	}
	c.Stdin = strings.NewReader(stdin)
	return c
}

// serve starts `swarmops serve` on the spec's store and waits until it is
// ready; the spec's cleanup stops it and checks it stopped cleanly.
func (e *env) serve() {
	GinkgoHelper()
	c, errb := e.startServer()
	e.server = c
	DeferCleanup(func() {
		c.Process.Signal(syscall.SIGTERM)
		Expect(c.Wait()).To(Succeed(), "serve: %s", errb.String())
	})
}

// startServer starts `swarmops serve` on e's store and waits until it is
// ready; the caller stops or kills it. errb collects its stderr.
func (e *env) startServer() (c *exec.Cmd, errb *bytes.Buffer) {
	GinkgoHelper()
	c = e.cmd("", "serve", "--json")
	out, err := c.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	errb = new(bytes.Buffer)
	c.Stderr = errb
	Expect(c.Start()).To(Succeed())
	line, err := bufio.NewReader(out).ReadString('\n')
	Expect(err).NotTo(HaveOccurred(), "serve did not say it was ready: %s", errb.String())
	Expect(line).To(ContainSubstring(`"ok":true`))
	return c, errb
}

// run runs the binary to completion.
func (e *env) run(stdin string, args ...string) result {
	GinkgoHelper()
	c := e.cmd(stdin, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	if throughServer && e.server == nil && code == 0 && len(args) > 0 && args[0] == "init" && e.store != "" {
		e.serve()
	}
	return result{Exit: code, Stdout: out.String(), Stderr: errb.String()}
}

// ok runs a command that must succeed and returns its JSON data.
func (e *env) ok(stdin string, args ...string) any {
	GinkgoHelper()
	r := e.run(stdin, append(args, "--json")...)
	Expect(r.Exit).To(Equal(0), "swarmops %v: %s %s", args, r.Stdout, r.Stderr)
	return r.Data()
}

// commit commits an inline change list and returns the new id.
func (e *env) commit(list string, args ...string) string {
	GinkgoHelper()
	d := e.ok(list, append([]string{"commit", "-F", "-"}, args...)...).(map[string]any)
	return d["id"].(string)
}

// write creates a file in the workspace.
func (e *env) write(name, content string) string {
	GinkgoHelper()
	p := filepath.Join(e.root, name)
	Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
	Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	return p
}

// writeTree creates the workspace directory dir holding files (slash paths
// relative to dir, each mapped to its content) and returns its path. The
// files are written in name order, so every run builds the tree alike.
func (e *env) writeTree(dir string, files map[string]string) string {
	GinkgoHelper()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		e.write(dir+"/"+name, files[name])
	}
	return filepath.Join(e.root, dir)
}

// journalState is what must not change when a command is refused: the
// store's info counts and every ref.
func (e *env) journalState() string {
	GinkgoHelper()
	info := e.ok("", "info").(map[string]any)
	refs := e.ok("", "ref", "list")
	b, _ := json.Marshal([]any{info["changesets"], info["durable_seq"], info["objects"], refs})
	return string(b)
}

var (
	fullID  = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	shortID = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
)

// mask replaces what changes from run to run: ids, times, elapsed time,
// temp paths, byte offsets that depend on timing.
func mask(v any, root string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			switch k {
			case "time":
				out[k] = "<time>"
			case "elapsed_ms":
				out[k] = 0
			case "journal_bytes", "durable_offset", "offset", "checkpoint_seq":
				out[k] = "<n>"
			default:
				out[k] = mask(val, root)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = mask(x[i], root)
		}
		return out
	case string:
		s := strings.ReplaceAll(x, root, "<tmp>")
		s = fullID.ReplaceAllString(s, "<id>")
		return shortID.ReplaceAllString(s, "<short>")
	}
	return v
}

// expectGolden compares a --json output, masked, with
// testdata/golden/NAME.json.
func expectGolden(name string, r result, root string) {
	GinkgoHelper()
	var v any
	Expect(json.Unmarshal([]byte(r.Stdout), &v)).To(Succeed(), "stdout is not JSON: %q", r.Stdout)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	Expect(enc.Encode(mask(v, root))).To(Succeed())
	got := buf.Bytes()
	path := filepath.Join("testdata", "golden", name+".json")
	if *updateGolden {
		Expect(os.WriteFile(path, got, 0o644)).To(Succeed())
		return
	}
	want, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred(), "golden file %s is missing; create it with: go test ./cmd/swarmops -run TestCLI -update", path)
	Expect(string(got)).To(Equal(string(want)),
		"%s differs from this run's output; if the change is intended, rewrite it with: go test ./cmd/swarmops -run TestCLI -update", path)
}
