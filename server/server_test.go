package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echo is a handler that reports what it was given: its arguments, its
// working directory and one environment variable on stdout, stdin (when
// the first argument is "stdin") back on stdout, a line on stderr, and the
// exit status named by the last argument.
func echo(inv *Invocation) int {
	fmt.Fprintf(inv.Stdout, "args=%s cwd=%s env=%s\n", strings.Join(inv.Args, ","), inv.Cwd, inv.Env["X"])
	if len(inv.Args) > 0 && inv.Args[0] == "stdin" {
		b, err := io.ReadAll(inv.Stdin)
		if err != nil {
			fmt.Fprintf(inv.Stderr, "stdin: %v\n", err)
			return 1
		}
		inv.Stdout.Write(b)
	}
	fmt.Fprintln(inv.Stderr, "to stderr")
	status := 0
	if len(inv.Args) > 0 {
		fmt.Sscan(inv.Args[len(inv.Args)-1], &status)
	}
	return status
}

// mustStart starts a server with cfg or fails the test. The caller stops
// it: a test that stops the server itself must not get a second Stop at
// cleanup, which would remove the socket of a server started after it in
// the same directory.
func mustStart(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start starts a server in dir with handler h, stopped when the test ends.
func start(t *testing.T, dir string, h Handler) *Server {
	t.Helper()
	s := mustStart(t, Config{Dir: dir, Handler: h})
	t.Cleanup(func() { s.Stop(5 * time.Second) })
	return s
}

func TestAnInvocationRoundTripsThroughTheServer(t *testing.T) {
	dir := t.TempDir()
	start(t, dir, echo)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*chunk/16+7) // several frames
	var out, errb bytes.Buffer
	status, err := Run(dir, &Request{Args: []string{"stdin", "3"}, Cwd: "/some/where", Env: map[string]string{"X": "y"}},
		bytes.NewReader(big), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if status != 3 {
		t.Errorf("status %d, want 3", status)
	}
	want := "args=stdin,3 cwd=/some/where env=y\n" + string(big)
	if out.String() != want {
		t.Errorf("stdout: got %d bytes, want %d (prefix %q)", out.Len(), len(want), out.String()[:min(out.Len(), 60)])
	}
	if errb.String() != "to stderr\n" {
		t.Errorf("stderr %q", errb.String())
	}
}

func TestAHandlerThatIgnoresStdinNeverAsksForIt(t *testing.T) {
	dir := t.TempDir()
	start(t, dir, echo)
	var out bytes.Buffer
	// A reader that fails the test if read: the client must not touch
	// stdin unless the server asks.
	status, err := Run(dir, &Request{Args: []string{"0"}, Cwd: "/"}, failReader{t}, &out, io.Discard)
	if err != nil || status != 0 {
		t.Fatalf("status %d, err %v", status, err)
	}
}

type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("stdin was read although the command did not ask for it")
	return 0, io.EOF
}

func TestASecondServerIsRefused(t *testing.T) {
	dir := t.TempDir()
	start(t, dir, echo)
	_, err := Start(Config{Dir: dir, Handler: echo})
	if !errors.Is(err, ErrRunning) {
		t.Fatalf("second Start: %v, want ErrRunning", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("the refusal does not name the running server's pid: %v", err)
	}
}

func TestTheSocketIsTheOwnersOnlyAndGoesAwayOnStop(t *testing.T) {
	dir := t.TempDir()
	s := mustStart(t, Config{Dir: dir, Handler: echo})
	st, err := os.Stat(s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", st.Mode())
	}
	if err := s.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind after a clean stop: %s", e.Name())
	}
	if _, err := Run(dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard); !errors.Is(err, ErrNoServer) {
		t.Errorf("Run after stop: %v, want ErrNoServer", err)
	}
}

func TestAStaleSocketIsDetectedAndReplaced(t *testing.T) {
	dir := t.TempDir()
	// A socket nobody listens on, as a killed server leaves it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SocketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Run(dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard); !errors.Is(err, ErrNoServer) || !NotRun(err) {
		t.Fatalf("Run on a stale socket: %v, want ErrNoServer", err)
	}
	start(t, dir, echo)
	var out bytes.Buffer
	if status, err := Run(dir, &Request{Args: []string{"0"}, Cwd: "/"}, nil, &out, io.Discard); err != nil || status != 0 {
		t.Fatalf("Run after the stale socket was replaced: %d %v", status, err)
	}
}

func TestALongStoreDirectoryStillGetsASocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start(t, dir, echo)
	if status, err := Run(dir, &Request{Args: []string{"0"}, Cwd: "/"}, nil, io.Discard, io.Discard); err != nil || status != 0 {
		t.Fatalf("Run: %d %v", status, err)
	}
}

func TestAPeerOfAnotherUserIsRefused(t *testing.T) {
	dir := t.TempDir()
	other := uint32(os.Getuid() + 1)
	var ran bool
	s := mustStart(t, Config{Dir: dir, PeerUID: &other, Handler: func(*Invocation) int { ran = true; return 0 }})
	defer s.Stop(time.Second)
	_, err := Run(dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != codePeer || !NotRun(err) {
		t.Fatalf("Run as a peer of another uid: %v, want a peer refusal", err)
	}
	if ran {
		t.Error("the handler ran for a refused peer")
	}
}

// TestARealPeerOfAnotherUserIsRefused connects from a process running as
// another user, which only root can start; elsewhere it is skipped.
func TestARealPeerOfAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a client as another user")
	}
	if os.Getenv("SERVER_TEST_CLIENT_DIR") != "" {
		return // the child's copy of this test does nothing; see TestMain
	}
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "store")
	os.Mkdir(dir, 0o755)
	var ran bool
	s := start(t, dir, func(*Invocation) int { ran = true; return 0 })
	os.Chmod(s.Socket(), 0o777) // let the other user reach the peer check
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "client.test")
	if b, err := os.ReadFile(exe); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SERVER_TEST_CLIENT_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid 65534: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "refused (peer)") {
		t.Errorf("client as uid 65534 was not refused by the peer check: %s", out)
	}
	if ran {
		t.Error("the handler ran for another user's request")
	}
}

// TestMain lets TestARealPeerOfAnotherUserIsRefused reuse the test binary
// as its client.
func TestMain(m *testing.M) {
	if dir := os.Getenv("SERVER_TEST_CLIENT_DIR"); dir != "" {
		_, err := Run(dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard)
		var re *RefusedError
		if errors.As(err, &re) {
			fmt.Printf("refused (%s)\n", re.Code)
		} else {
			fmt.Printf("not refused: %v\n", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestAServerThatDiesMidRequestIsRetryable(t *testing.T) {
	dir := t.TempDir()
	// A server that reads the request and dies before answering.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SocketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		readFrame(c)
		writeFrame(c, fStdout, []byte("partial"))
		c.Close()
	}()
	var out bytes.Buffer
	_, err = Run(dir, &Request{Cwd: "/"}, nil, &out, io.Discard)
	if !errors.Is(err, ErrGone) || NotRun(err) {
		t.Fatalf("Run against a dying server: %v, want ErrGone", err)
	}
	if out.String() != "partial" {
		t.Errorf("output before the death: %q", out.String())
	}
}

func TestMalformedRequestsAreRefusedNotRun(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	ran := 0
	start(t, dir, func(*Invocation) int { mu.Lock(); ran++; mu.Unlock(); return 0 })
	cases := map[string]func(net.Conn){
		"not json":         func(c net.Conn) { writeFrame(c, fRequest, []byte("{")) },
		"unknown field":    func(c net.Conn) { writeFrame(c, fRequest, []byte(`{"v":1,"cwd":"/","zz":1}`)) },
		"relative cwd":     func(c net.Conn) { writeFrame(c, fRequest, []byte(`{"v":1,"cwd":"x"}`)) },
		"nul in argument":  func(c net.Conn) { writeFrame(c, fRequest, []byte(`{"v":1,"cwd":"/","args":["a\u0000b"]}`)) },
		"wrong version":    func(c net.Conn) { writeFrame(c, fRequest, []byte(`{"v":99,"cwd":"/"}`)) },
		"stdin first":      func(c net.Conn) { writeFrame(c, fStdin, []byte("x")) },
		"oversized length": func(c net.Conn) { c.Write([]byte{0xff, 0xff, 0xff, 0xff, byte(fRequest)}) },
		"unknown type":     func(c net.Conn) { c.Write([]byte{0, 0, 0, 0, 99}) },
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("unix", filepath.Join(dir, SocketName))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			send(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			typ, p, err := readFrame(c)
			if errors.Is(err, io.EOF) {
				return // closed without an answer: refused
			}
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			if typ != fError {
				t.Fatalf("answer of type %d (%q), want an error frame", typ, p)
			}
		})
	}
	mu.Lock()
	if ran != 0 {
		t.Errorf("the handler ran %d times for malformed requests", ran)
	}
	mu.Unlock()
	// The server still serves after all of that.
	if status, err := Run(dir, &Request{Cwd: "/"}, nil, io.Discard, io.Discard); err != nil || status != 0 {
		t.Fatalf("a good request after the bad ones: %d %v", status, err)
	}
}

func TestStopTellsRunningInvocationsToFinish(t *testing.T) {
	dir := t.TempDir()
	started := make(chan struct{})
	s := mustStart(t, Config{Dir: dir, Handler: func(inv *Invocation) int {
		close(started)
		<-inv.Done
		fmt.Fprintln(inv.Stdout, "stopped")
		return 0
	}})
	res := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := Run(dir, &Request{Cwd: "/"}, nil, &out, io.Discard)
		res <- err
	}()
	<-started
	if err := s.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("a running invocation at stop: %v", err)
	}
	if out.String() != "stopped\n" {
		t.Errorf("stdout %q", out.String())
	}
}

func TestAClientThatGoesAwayEndsItsInvocation(t *testing.T) {
	dir := t.TempDir()
	ended := make(chan struct{})
	start(t, dir, func(inv *Invocation) int {
		<-inv.Done
		close(ended)
		return 0
	})
	c, err := net.Dial("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	writeJSON(c, fRequest, &Request{Version: Version, Cwd: "/"})
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the invocation did not see its client go away")
	}
}

func TestAClientCarriesManyInvocationsOnOneConnection(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	conns := map[string]bool{}
	start(t, dir, func(inv *Invocation) int {
		// The handler's stdout writer belongs to its connection.
		mu.Lock()
		conns[fmt.Sprintf("%p", inv.Done)] = true
		mu.Unlock()
		return echo(inv)
	})
	cl, err := Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 5; i++ {
		var out, errb bytes.Buffer
		in := fmt.Sprintf("input %d\n", i)
		// Inline stdin, then asked-for stdin, alternately.
		req := &Request{Args: []string{"stdin", fmt.Sprint(i)}, Cwd: "/", StdinInline: i%2 == 0}
		var stdin io.Reader = strings.NewReader(in)
		if req.StdinInline {
			req.Stdin, stdin = []byte(in), failReader{t}
		}
		status, err := cl.Run(req, stdin, &out, &errb)
		if err != nil || status != i {
			t.Fatalf("invocation %d: status %d, err %v", i, status, err)
		}
		if want := fmt.Sprintf("args=stdin,%d cwd=/ env=\n%s", i, in); out.String() != want {
			t.Errorf("invocation %d: stdout %q, want %q", i, out.String(), want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("5 invocations used %d connections, want 1", len(conns))
	}
}

func TestAVersion1ClientIsStillServed(t *testing.T) {
	dir := t.TempDir()
	start(t, dir, echo)
	c, err := net.Dial("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeFrame(c, fRequest, []byte(`{"v":1,"args":["stdin","4"],"cwd":"/w"}`))
	var out bytes.Buffer
	for {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		typ, p, err := readFrame(c)
		if err != nil {
			t.Fatalf("reading: %v (stdout so far %q)", err, out.String())
		}
		switch typ {
		case fStdout:
			out.Write(p)
		case fStdinWant:
			writeFrame(c, fStdin, []byte("old\n"))
			writeFrame(c, fStdinEOF, nil)
		case fExit:
			if string(p) != `{"status":4}` || out.String() != "args=stdin,4 cwd=/w env=\nold\n" {
				t.Fatalf("exit %s, stdout %q", p, out.String())
			}
			// One invocation a version 1 connection: the server closes it.
			if _, _, err := readFrame(c); !errors.Is(err, io.EOF) {
				t.Fatalf("after the exit: %v, want the connection closed", err)
			}
			return
		}
	}
}

func TestInlineStdinNeedsVersion2(t *testing.T) {
	for _, p := range []string{
		`{"v":1,"cwd":"/","stdin_inline":true,"stdin":"eA=="}`,
		`{"v":2,"cwd":"/","stdin":"eA=="}`,
	} {
		if _, err := decodeRequest([]byte(p)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", p, err)
		}
	}
	if _, err := decodeRequest([]byte(`{"v":2,"cwd":"/","stdin_inline":true,"stdin":"eA=="}`)); err != nil {
		t.Errorf("a version 2 request with inline stdin: %v", err)
	}
}

func TestAStoppingServerTellsAnIdleClientItsNextRequestDidNotRun(t *testing.T) {
	dir := t.TempDir()
	s := mustStart(t, Config{Dir: dir, Handler: echo})
	cl, err := Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if st, err := cl.Run(&Request{Args: []string{"0"}, Cwd: "/"}, nil, io.Discard, io.Discard); err != nil || st != 0 {
		t.Fatalf("first invocation: %d %v", st, err)
	}
	if err := s.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Run(&Request{Args: []string{"0"}, Cwd: "/"}, nil, io.Discard, io.Discard)
	if !NotRun(err) {
		t.Fatalf("a request on a connection the server closed at stop: %v, want one that did not run", err)
	}
	// With a server back, the same client dials again.
	start(t, dir, echo)
	if st, err := cl.Run(&Request{Args: []string{"0"}, Cwd: "/"}, nil, io.Discard, io.Discard); err != nil || st != 0 {
		t.Fatalf("after a restart: %d %v", st, err)
	}
}

func TestHeldOutputArrivesWithTheExitInOneWrite(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	s := mustStart(t, Config{Dir: dir, Stream: func(r *Request) bool { return len(r.Args) > 0 && r.Args[0] == "stream" },
		Handler: func(inv *Invocation) int {
			fmt.Fprintln(inv.Stdout, "one")
			fmt.Fprintln(inv.Stderr, "two")
			<-release
			fmt.Fprintln(inv.Stdout, "three")
			return 0
		}})
	defer s.Stop(5 * time.Second)
	for _, stream := range []bool{false, true} {
		c, err := net.Dial("unix", filepath.Join(dir, SocketName))
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"held"}
		if stream {
			args = []string{"stream"}
		}
		writeJSON(c, fRequest, &Request{Version: Version, Args: args, Cwd: "/"})
		// Nothing of a held command's output comes before it ends; a
		// stream's first line does.
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _, err = readFrame(c)
		if stream != (err == nil) {
			t.Fatalf("stream=%v: a frame before the end: %v", stream, err)
		}
		release <- struct{}{}
		if !stream {
			// Everything (three frames) in one read of the one write.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			r := bytes.NewReader(buf[:n])
			var types []frameType
			for {
				typ, _, err := readFrame(r)
				if err != nil {
					break
				}
				types = append(types, typ)
			}
			if fmt.Sprint(types) != fmt.Sprint([]frameType{fStdout, fStderr, fStdout, fExit}) {
				t.Errorf("one read got frames %v, want stdout, stderr, stdout, exit", types)
			}
		}
		c.Close()
	}
}

func TestBinaryRequestsRoundTripAndRefuseMalformedOnes(t *testing.T) {
	in := &Request{Args: []string{"commit", "-F", "-", "-m", "é"}, Cwd: "/w", Env: map[string]string{"SWARMOPS_STORE": "/s", "SWARMOPS_JSON": "1"},
		StdoutTTY: true, StdinInline: true, Stdin: []byte("put a = \"x\"\n")}
	p := appendBinaryRequest(nil, in)
	got, err := decodeRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 3 || got.Cwd != in.Cwd || strings.Join(got.Args, " ") != strings.Join(in.Args, " ") ||
		len(got.Env) != 2 || got.Env["SWARMOPS_STORE"] != "/s" || !got.StdoutTTY || got.StderrTTY ||
		!got.StdinInline || string(got.Stdin) != string(in.Stdin) {
		t.Fatalf("round trip: %+v", got)
	}
	p[len(p)-1] = 'y' // the decoded request keeps no reference to the frame
	if string(got.Stdin) != string(in.Stdin) {
		t.Fatalf("the request's stdin changed with the frame: %q", got.Stdin)
	}
	bad := map[string][]byte{
		"trailing bytes":      append(appendBinaryRequest(nil, &Request{Cwd: "/"}), 0),
		"unknown flag":        {binaryTag, 0x80, 1, '/', 0, 0, 0},
		"count past the end":  {binaryTag, 0, 1, '/', 0xff, 0xff, 0xff, 0xff, 0x0f},
		"string past the end": {binaryTag, 0, 9, '/'},
		"truncated":           {binaryTag},
		"relative cwd":        appendBinaryRequest(nil, &Request{Cwd: "w"}),
		"NUL in an argument":  appendBinaryRequest(nil, &Request{Cwd: "/", Args: []string{"a\x00"}}),
	}
	for what, p := range bad {
		if _, err := decodeRequest(p); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", what, err)
		}
	}
}

// TestAStoppingServerTellsEveryQueuedClientItsRequestDidNotRun: clients
// dial and send while the server stops. Each request either runs or is
// told it did not (NotRun: the client runs it itself); none may end with a
// reset that leaves it unknown whether it ran, which is what a client
// queued on the socket gets if the listener closes under it.
func TestAStoppingServerTellsEveryQueuedClientItsRequestDidNotRun(t *testing.T) {
	for round := 0; round < 5; round++ {
		dir := t.TempDir()
		s := mustStart(t, Config{Dir: dir, Handler: echo})
		var wg sync.WaitGroup
		var ran, notRun, unknown atomic.Int64
		stop := make(chan struct{})
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					cl, err := Dial(dir)
					if err != nil {
						if !NotRun(err) {
							unknown.Add(1)
							t.Errorf("a dial during stop: %v, want NotRun", err)
						}
						continue
					}
					_, err = cl.Run(&Request{Args: []string{"0"}, Cwd: "/"}, nil, io.Discard, io.Discard)
					cl.Close()
					switch {
					case err == nil:
						ran.Add(1)
					case NotRun(err):
						notRun.Add(1)
					default:
						unknown.Add(1)
						t.Errorf("a request during stop: %v, want it run or NotRun", err)
					}
				}
			}()
		}
		time.Sleep(30 * time.Millisecond)
		if err := s.Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		close(stop)
		wg.Wait()
		if unknown.Load() > 0 {
			t.Fatalf("round %d: %d requests ran, %d were told they did not, %d do not know", round, ran.Load(), notRun.Load(), unknown.Load())
		}
	}
}
