package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/swarmops/swarmops/bench/internal/envelope"
	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/server"
)

// SwarmOpsServe is SwarmOps as agents use it with a server: one
// `swarmops serve` holds the store open, and every commit is a CLI
// invocation (`swarmops commit -F - --advance REF …`) sent over its socket,
// exactly as a `swarmops` process sends it, minus that process's start.
// Each writer keeps its connection to the server and sends its change list
// inside the request (protocol version 2), as an agent's long-lived client
// would.
// The writers' commits share the server's one commit pipeline, so one
// sync serves every commit waiting, across the writer processes.
//
// The server is started by the first Open of a store that has none, from
// the binary named by $SWARMOPS_BIN (built from this module when unset),
// and runs until StopServers. Reads (View, Load) use the store directly:
// only W1 and W2 measure this engine.
type SwarmOpsServe struct{}

// Name implements Engine.
func (SwarmOpsServe) Name() string { return "swarmops-serve" }

// Durable implements Engine.
func (SwarmOpsServe) Durable() bool { return true }

// MultiProcess implements Engine.
func (SwarmOpsServe) MultiProcess() bool { return true }

// Open implements Engine: the store is created if needed, and a server
// started for it unless one answers.
func (SwarmOpsServe) Open(dir string, writers int) (Store, error) {
	direct, err := SwarmOps{}.Open(dir, writers)
	if err != nil {
		return nil, err
	}
	if !server.Running(dir) {
		if err := startServer(dir); err != nil {
			direct.Close()
			return nil, err
		}
	}
	return &serveStore{dir: dir, direct: direct.(*swarmStore)}, nil
}

var servers struct {
	sync.Mutex
	running []*exec.Cmd
	bin     string
	built   string // the temporary directory of a binary built here
}

// serveBinary returns the swarmops binary: $SWARMOPS_BIN, or one built
// once into a temporary directory.
func serveBinary() (string, error) {
	if b := os.Getenv("SWARMOPS_BIN"); b != "" {
		return b, nil
	}
	if servers.bin != "" {
		return servers.bin, nil
	}
	dir, err := os.MkdirTemp("", "swarmops-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "swarmops")
	// The product is built in its own module (the bench module replaces
	// it with the checkout's root), with its own go.sum.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/swarmops/swarmops").Output()
	if err != nil {
		return "", fmt.Errorf("swarmops-serve: find the swarmops module (run from the bench module, or set SWARMOPS_BIN): %w", err)
	}
	// Built as the guide installs it: static, without cgo.
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/swarmops")
	cmd.Dir = string(bytes.TrimSpace(root))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("swarmops-serve: build swarmops: %v: %s", err, out)
	}
	servers.bin, servers.built = bin, dir
	// The writer processes find the same binary.
	os.Setenv("SWARMOPS_BIN", bin)
	return bin, nil
}

func startServer(dir string) error {
	servers.Lock()
	defer servers.Unlock()
	bin, err := serveBinary()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--store", dir, "--json", "serve")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("swarmops-serve: start the server: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !bytes.Contains([]byte(line), []byte(`"ok":true`)) {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("swarmops-serve: the server did not start: %q %v", line, err)
	}
	servers.running = append(servers.running, cmd)
	return nil
}

// StopServers stops every server this process started (SIGTERM, then a
// wait), so a benchmark leaves none behind.
func StopServers() {
	servers.Lock()
	defer servers.Unlock()
	for _, c := range servers.running {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	servers.running = nil
	if servers.built != "" {
		os.RemoveAll(servers.built)
		os.Unsetenv("SWARMOPS_BIN")
		servers.bin, servers.built = "", ""
	}
}

type serveStore struct {
	dir    string
	direct *swarmStore
	// idle holds connections to the server between invocations: an agent
	// process keeps its connection, as a CLI that runs many commands
	// would. W2's goroutines each take one of their own.
	mu   sync.Mutex
	idle []*server.Client
}

// client takes an idle connection, or dials a new one.
func (s *serveStore) client() (*server.Client, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	return server.Dial(s.dir)
}

func (s *serveStore) release(c *server.Client) {
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.mu.Unlock()
}

// run sends one invocation to the server and decodes its envelope.
func (s *serveStore) run(stdin string, args ...string) (envelope.Envelope, error) {
	var out bytes.Buffer
	c, err := s.client()
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("swarmops-serve: %w", err)
	}
	_, err = c.Run(&server.Request{Args: append(args, "--json"), Cwd: "/", Env: map[string]string{"SWARMOPS_STORE": s.dir},
		StdinInline: true, Stdin: []byte(stdin)}, nil, &out, io.Discard)
	s.release(c)
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("swarmops-serve: %w", err)
	}
	var env envelope.Envelope
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		return envelope.Envelope{}, fmt.Errorf("swarmops-serve: %q: %w", out.String(), err)
	}
	if !env.OK {
		return env, s.mapErr(env)
	}
	return env, nil
}

func (s *serveStore) mapErr(env envelope.Envelope) error {
	e := env.Error
	switch e.Code {
	case "E_CONFLICT":
		ce := &ConflictError{}
		if e.Current != nil {
			if id, err := objects.ParseID(*e.Current); err == nil {
				ce.Current = Key(id)
			}
		}
		return fmt.Errorf("%w: %s", ce, e.Message)
	case "E_BUSY":
		return fmt.Errorf("%w: %s", ErrBusy, e.Message)
	case "E_NOT_FOUND":
		return fmt.Errorf("%w: %s", ErrNotFound, e.Message)
	}
	return fmt.Errorf("swarmops-serve: %s: %s", e.Code, e.Message)
}

// Commit implements Store: the same changeset as SwarmOps's (one 24-byte
// file under the writer's directory, the payload as message, the writer's
// ref advanced), as a change list through the server.
func (s *serveStore) Commit(t *Txn) (Key, error) {
	data := make([]byte, 24)
	binary.LittleEndian.PutUint64(data[0:], uint64(t.Writer))
	binary.LittleEndian.PutUint64(data[8:], uint64(t.Seq))
	copy(data[16:], t.ID[:8])
	var list bytes.Buffer
	fmt.Fprintf(&list, "put w%02d/f = \"", t.Writer)
	for _, b := range data {
		fmt.Fprintf(&list, "\\x%02x", b)
	}
	list.WriteString("\"\n")
	args := []string{"commit", "-F", "-", "--agent", fmt.Sprintf("agent-%02d", t.Writer), "-m", string(t.Payload)}
	if t.HasParent {
		args = append(args, "--parent", core.ID(t.Parent).String(), "--advance", t.Ref)
	}
	env, err := s.run(list.String(), args...)
	if err != nil {
		return Key{}, err
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return Key{}, err
	}
	id, err := objects.ParseID(d.ID)
	if err != nil || t.HasParent {
		return Key(id), err
	}
	// A chain's first changeset creates its ref, by compare-and-swap from
	// absence (the CLI's --advance without a parent would take the ref's
	// value as the parent instead).
	if _, err := s.run("", "ref", "create", t.Ref, id.String()); err != nil {
		return Key{}, err
	}
	return Key(id), nil
}

// Load, Head, View and Settle use the store directly.
func (s *serveStore) Load(chains [][]Txn) ([][]Key, error) { return s.direct.Load(chains) }
func (s *serveStore) Head(ref string) (Key, bool, error)   { return s.direct.Head(ref) }
func (s *serveStore) View() (View, error)                  { return s.direct.View() }
func (s *serveStore) Settle() error                        { return s.direct.Settle() }
func (s *serveStore) Close() error {
	s.mu.Lock()
	for _, c := range s.idle {
		c.Close()
	}
	s.idle = nil
	s.mu.Unlock()
	return s.direct.Close()
}
