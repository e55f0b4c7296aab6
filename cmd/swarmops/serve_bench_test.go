package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/server"
)

// serveStoreForBench makes a store with one changeset on main and serves
// it from this process, as `swarmops serve` does; the server stops with
// the benchmark.
func serveStoreForBench(b *testing.B) string {
	b.Helper()
	store := filepath.Join(b.TempDir(), "store")
	getenv := storeEnv(store)
	for _, c := range []struct{ stdin, args string }{{"", "init"}, {"put seed = \"0\"\n", "commit -F - --advance main"}} {
		var out bytes.Buffer
		if st := run(strings.Fields(c.args), strings.NewReader(c.stdin), &out, &out, getenv); st != 0 {
			b.Fatalf("swarmops %s: %d %s", c.args, st, out.String())
		}
	}
	s, err := core.Open(store, core.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.Start(server.Config{Dir: store, Handler: serveHandler(s, store), Stream: streams})
	if err != nil {
		s.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		srv.Stop(5 * time.Second)
		s.Close()
	})
	return store
}

// BenchmarkServeLogRoundTrip measures `log -n 1 --json` through a running
// server, the way a client that keeps its connection sends it
// (server.Client), and the way a `swarmops` process sends it (a
// connection of its own, server.Run). It reports the median round trip
// as seen by the client (p50-ns) and the median of the server's own time
// for the command as its envelope reports it (meta.elapsed_ms,
// server-p50-ns).
//
//	go test ./cmd/swarmops -run '^$' -bench ServeLogRoundTrip -benchtime 2000x -count 3
func BenchmarkServeLogRoundTrip(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "kept-connection", false: "connection-per-command"}[keep]
		b.Run(name, func(b *testing.B) {
			store := serveStoreForBench(b)
			cl, err := server.Dial(store)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			rt := make([]time.Duration, 0, b.N)
			srv := make([]time.Duration, 0, b.N)
			var out bytes.Buffer
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out.Reset()
				req := &server.Request{Args: []string{"log", "-n", "1", "--json"}, Cwd: "/",
					Env: map[string]string{"SWARMOPS_STORE": store}}
				t0 := time.Now()
				var st int
				if keep {
					st, err = cl.Run(req, nil, &out, io.Discard)
				} else {
					st, err = server.Run(store, req, nil, &out, io.Discard)
				}
				rt = append(rt, time.Since(t0))
				if err != nil || st != 0 {
					b.Fatalf("log -n 1: %d %v %s", st, err, out.String())
				}
				srv = append(srv, elapsedOf(b, out.Bytes()))
			}
			b.StopTimer()
			b.ReportMetric(float64(median(rt).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(median(srv).Nanoseconds()), "server-p50-ns")
		})
	}
}

// elapsedOf returns an envelope's meta.elapsed_ms.
func elapsedOf(b *testing.B, out []byte) time.Duration {
	var env struct {
		OK   bool `json:"ok"`
		Meta struct {
			ElapsedMS float64 `json:"elapsed_ms"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(out, &env); err != nil || !env.OK {
		b.Fatalf("envelope %q: %v", out, err)
	}
	return time.Duration(env.Meta.ElapsedMS * float64(time.Millisecond))
}

// BenchmarkServeLogProcess is `swarmops log -n 1 --json` as a whole
// process through a running server, from spawn to exit: process start
// plus the round trip. BenchmarkSpawnProcess in the same run is the
// process start alone. Reports the median as p50-ns.
//
//	go test ./cmd/swarmops -run '^$' -bench 'ServeLogProcess|SpawnProcess' -benchtime 200x -count 3
func BenchmarkServeLogProcess(b *testing.B) {
	bin := buildCLI(b)
	store := serveStoreForBench(b)
	env := append(baseEnv(), "SWARMOPS_STORE="+store, serverModeEnv+"="+modeRequired)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c := exec.Command(bin, "log", "-n", "1", "--json")
		c.Env = env
		out, err := c.CombinedOutput()
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatalf("swarmops log -n 1: %v: %s", err, out)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(median(lat).Nanoseconds()), "p50-ns")
}

// BenchmarkServedCommandLine is the CLI layer's cost of one command line
// as a server runs it (serveHandler's app on its open store, no socket):
// run, which runs a plain command directly (runDirect), beside cobra's
// Execute on the same tree (the named command's). A commit includes its
// sync.
//
//	go test ./cmd/swarmops -run '^$' -bench ServedCommandLine -benchmem -count 6
func BenchmarkServedCommandLine(b *testing.B) {
	lines := []struct {
		name, stdin string
		args        []string
	}{
		{"log", "", []string{"log", "-n", "1", "--json"}},
		// Each commit writes new content: one that changes nothing is E_EMPTY.
		{"commit", "put f = \"x%d\"\n", []string{"commit", "-F", "-", "--advance", "bench", "--create", "--agent", "a", "-m", "m", "--json"}},
	}
	for _, l := range lines {
		for _, direct := range []bool{true, false} {
			b.Run(l.name+map[bool]string{true: "/direct", false: "/execute"}[direct], func(b *testing.B) {
				store := filepath.Join(b.TempDir(), "store")
				seedStore(b, store)
				s, err := core.Open(store, core.Options{LockTimeout: 10 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				info, err := os.Stat(store)
				if err != nil {
					b.Fatal(err)
				}
				getenv := storeEnv(store)
				var out bytes.Buffer
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					out.Reset()
					stdin := l.stdin
					if strings.Contains(stdin, "%d") {
						stdin = fmt.Sprintf(stdin, i)
					}
					a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: io.Discard, getenv: getenv,
						start: time.Now(), cwd: "/", shared: s, sharedDir: store, sharedInfo: info}
					var st int
					if direct {
						st = a.run(l.args)
					} else {
						st = a.runTree(a.rootCmd(l.args), l.args)
					}
					if st != 0 {
						b.Fatalf("%v: %d %s", l.args, st, out.String())
					}
				}
			})
		}
	}
}
