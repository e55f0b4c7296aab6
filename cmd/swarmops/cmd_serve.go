package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/server"
)

// serveCmd is `swarmops serve`: hold the store open and run every client's
// commands on it, until SIGINT or SIGTERM.
func (a *app) serveCmd() *cobra.Command {
	var grace time.Duration
	var cpuprofile string
	cmd := &cobra.Command{
		Use:   "serve [--grace DURATION]",
		Short: "Serve the store to every swarmops command on this host until stopped (SIGINT, SIGTERM)",
		Long: `Serve the store: hold it open and run the commands of every swarmops process
that uses this store (SWARMOPS_SERVER=auto, the default, finds the server
by itself) on one open store, so their commits share one commit pipeline and
one sync. The socket is serve.sock in the store directory, reachable only by
its owner. A second serve on the same store is refused (E_SERVER_RUNNING).
On SIGINT or SIGTERM, serve stops accepting, lets running commands finish
(at most --grace), removes its socket and exits 0.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.serve(grace, cpuprofile)
		}),
	}
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long running commands may take to finish at stop")
	// Hidden: a diagnostic for whoever measures the server (docs/cli.md,
	// serve), not a knob an agent needs.
	cmd.Flags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the server's whole life to FILE")
	cmd.Flags().MarkHidden("cpuprofile")
	return cmd
}

// serveGroupCache is the server's core.Options.GroupCache.
const serveGroupCache = 64

func (a *app) serve(grace time.Duration, cpuprofile string) error {
	if cpuprofile != "" {
		stop, err := startCPUProfile(a.path(cpuprofile))
		if err != nil {
			return err
		}
		defer stop()
	}
	// A server allocates for every request and keeps little of it: the
	// collector, at Go's default, takes a tenth of the server's CPU under
	// 32 committing clients. Collecting at 4× the live heap instead of 2×
	// halves that. GOGC, when set, decides.
	if a.getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	// The server keeps 64 decoded groups (16 MiB at most) where a command
	// keeps 4: its readers come back to the groups of the files a swarm
	// works on, and a diff served again decodes nothing.
	a.groupCache = serveGroupCache
	s, release, err := a.open()
	if err != nil {
		return err
	}
	defer release()
	dir, err := filepath.Abs(a.storeDir())
	if err != nil {
		return err
	}
	cfg := server.Config{Dir: dir, Handler: serveHandler(s, dir), Stream: streams,
		Logf: func(format string, args ...any) { fmt.Fprintf(a.stderr, "swarmops serve: "+format+"\n", args...) }}
	if weakenHook != nil {
		if err := weakenHook(a.getenv, &cfg); err != nil {
			return err
		}
	}
	srv, err := server.Start(cfg)
	if errors.Is(err, server.ErrRunning) {
		return &cliError{kind: kindRunning, err: err, msg: fmt.Sprintf("store %s: %v", dir, err),
			hint: "its clients use it already; stop it (SIGTERM) to start another"}
	}
	if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) {
		return &cliError{kind: kindReadOnly, err: err, msg: fmt.Sprintf("serve: %v", err),
			hint: "a server makes its socket in the store directory: run it where the store can be written"}
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	stop := make(chan os.Signal, 1)
	// A hangup (the terminal that started it closed) stops it as cleanly
	// as SIGTERM: socket and lock removed, running requests finished.
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(stop)
	// Ready: the one envelope (or line) of this command goes out now, so
	// whoever started the server can wait for it.
	a.ok(map[string]any{"store": dir, "socket": srv.Socket(), "pid": os.Getpid()},
		lines(fmt.Sprintf("serving %s on %s (pid %d)", dir, srv.Socket(), os.Getpid())))
	a.flush()
	var lost error
	select {
	case <-stop:
	case lost = <-waitCh(srv):
	}
	if err := srv.Stop(grace); err != nil {
		fmt.Fprintf(a.stderr, "swarmops serve: %v\n", err)
	}
	if errors.Is(lost, server.ErrLost) {
		return &cliError{kind: kindGone, err: lost,
			msg:  fmt.Sprintf("serve %s: the socket or lock was removed or replaced, or the store directory moved: the server stopped", dir),
			hint: "start it again where the store is now; its clients meanwhile run their commands themselves"}
	}
	return nil
}

// startCPUProfile starts a CPU profile into file; the returned function
// stops it and closes the file. A file that cannot be written is a usage
// error: the flag named it.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, usagef("serve --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, usagef("serve --cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// waitCh turns srv.Wait into a channel.
func waitCh(srv *server.Server) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- srv.Wait() }()
	return ch
}

// streams says which requests' output reaches the client as it is written:
// a stream's (watch), and any whose client shows a terminal, where
// progress goes; the rest arrives with the exit status, in one write.
func streams(r *server.Request) bool {
	return streaming[commandName(r.Args)] || r.StdoutTTY || r.StderrTTY
}

// serveHandler runs one client's invocation as this process would run it,
// on the server's open store and in the client's working directory.
func serveHandler(s *core.Store, dir string) server.Handler {
	// The directory is looked at once: it is the one the server opened
	// (sameStore compares each request's store against it).
	info, _ := os.Stat(dir)
	return func(inv *server.Invocation) int {
		env := inv.Env
		c := &app{stdin: inv.Stdin, stdout: inv.Stdout, stderr: inv.Stderr, start: time.Now(),
			getenv: func(k string) string { return env[k] }, cwd: inv.Cwd, shared: s, sharedDir: dir, sharedInfo: info,
			stderrTTY: inv.StderrTTY, done: inv.Done, serverStopping: inv.Stopping}
		return c.run(inv.Args)
	}
}

// flush prints a success recorded so far, now, and marks the command's
// output as written: a long-running command reports readiness this way
// and prints nothing more when it ends well.
func (a *app) flush() {
	if a.jsonOut || a.jsonFlag {
		a.writeJSON(okEnvelope{OK: true, Data: a.data, Meta: meta{ElapsedMS: float64(time.Since(a.start).Microseconds()) / 1000}})
	} else if a.text != nil {
		a.text(a.stdout)
	}
	if f, ok := a.stdout.(interface{ Sync() error }); ok {
		f.Sync()
	}
	a.data, a.text, a.flushed = nil, nil, true
}
