// Command writer is the contention specs' helper process: one writer over
// the SwarmOps Go API, started by the specs with gexec. It opens the store,
// passes a file barrier, runs one workload (a private chain, or publishes
// onto a shared ref by Commit{Advance} or by Commit then UpdateRefs) and
// reports every operation as a JSON line (see contention.Record).
//
// Exit statuses: 0 done, 1 error, 2 usage, 3 stopped on Busy (only without
// -retry-busy, for the E_BUSY control).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/swarmops/swarmops/contention"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		cfg  contention.WriterConfig
		out  string
		base string
	)
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	fs.StringVar(&cfg.Store, "store", "", "store directory (required)")
	fs.IntVar(&cfg.ID, "id", -1, "writer number (required)")
	fs.StringVar(&cfg.Mode, "mode", contention.ModeChain, "workload: chain, advance or refset")
	fs.IntVar(&cfg.Count, "count", 1, "commits (chain) or publishes (advance, refset)")
	fs.DurationVar(&cfg.Pause, "pause", 0, "pause between two commits or publishes")
	fs.DurationVar(&cfg.LockTimeout, "lock-timeout", 0, "writer lock timeout (0: the store's default)")
	fs.StringVar(&base, "base", "", "parent of the first chain commit (64 hex digits)")
	fs.StringVar(&cfg.Ref, "ref", "main", "shared ref of the publish workloads")
	fs.IntVar(&cfg.Refs, "refs", 1, "spread publishes over this many refs REF/0..REF/n-1")
	fs.BoolVar(&cfg.RetryBusy, "retry-busy", true, "count and retry Busy operations instead of stopping")
	fs.BoolVar(&cfg.BrokenCAS, "broken-cas", false, "use a non-atomic check-then-act CAS (negative control only)")
	fs.StringVar(&cfg.Ready, "ready", "", "barrier: file to create once the store is open")
	fs.StringVar(&cfg.Go, "go", "", "barrier: file whose appearance starts the workload")
	fs.StringVar(&out, "out", "", "JSON-lines report file, appended to (required)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if cfg.Store == "" || cfg.ID < 0 || out == "" || cfg.Count < 1 || (cfg.Ready == "") != (cfg.Go == "") {
		fmt.Fprintln(os.Stderr, "writer: -store, -id, -out and -count ≥ 1 are required; -ready and -go go together")
		return 2
	}
	if base != "" {
		id, err := contention.ParseHexID(base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "writer: -base: %v\n", err)
			return 2
		}
		cfg.Base = id
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "writer: %v\n", err)
		return 1
	}
	defer f.Close()
	cfg.Sink = contention.NewSink(f)
	if err := contention.RunWriter(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "writer: %v\n", err)
		if errors.Is(err, contention.ErrStoppedBusy) {
			return 3
		}
		return 1
	}
	return 0
}
