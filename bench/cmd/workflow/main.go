// Command workflow times whole commands of an agent's day, swarmops beside
// git, on the same real tree in the same run: import a tree, check it out
// into an empty directory, switch between two commits, status, commit one
// edited file, log, cat and diff, the store's size, and 32 agents each
// committing through one CLI process per change. It writes a Markdown
// table per step, with the ratio swarmops/git and the targets' verdicts,
// and every sample as JSON (bench/README.md).
//
// Usage:
//
//	workflow [--tree DIR] [--runs N] [--steps import,checkout,...] \
//	         [--agents N] [--changes M] [--json FILE] [--md FILE]
//
// Every process is timed as a whole, start-up included, with its peak
// resident set (wait4's ru_maxrss). The systems run in counterbalanced
// order (A B C C B A), each run records the load and a raw fdatasync
// probe, and each cell is the median over its samples with the range.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/swarmops/swarmops/bench/internal/rerender"
)

func main() {
	if os.Getenv(spawnerVar) == "1" {
		if err := spawnerMain(); err != nil {
			fmt.Fprintf(os.Stderr, "workflow spawner: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "workflow: %v\n", err)
		os.Exit(1)
	}
}

// run measures what the flags ask for and writes the reports.
func run(args []string) error {
	c, err := parseConfig(args)
	if err != nil {
		return err
	}
	if c.Render != "" {
		return rerender.File(c.Render, c.MD, markdown) // the presentation changes without measuring again
	}
	b, cleanup, err := newBench(c)
	defer cleanup()
	if err != nil {
		return err
	}
	// An interrupted run removes its work directory too: the agents step
	// leaves gigabytes of work trees behind otherwise.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		logf("%v: removing the work directory and stopping", s)
		cleanup()
		os.Exit(1)
	}()
	start := time.Now()
	b.rep.Date = start.UTC().Format("2006-01-02 15:04 UTC")
	b.rep.Command = "workflow " + strings.Join(args, " ")
	if err := b.measure(); err != nil {
		return err
	}
	b.rep.Seconds = time.Since(start).Seconds()
	return writeReports(b.rep, c.JSON, c.MD)
}

// writeReports writes rep as JSON and as Markdown, and prints the Markdown.
func writeReports(rep *Report, jsonOut, mdOut string) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonOut, js, 0o644); err != nil {
		return err
	}
	md := markdown(rep)
	if err := os.WriteFile(mdOut, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

func logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+f+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
}
