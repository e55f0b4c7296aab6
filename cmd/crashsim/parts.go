package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// partFlags defines the flag of the in-process parts.
func partFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.part, "part", "", "run only this in-process part (worktree, queue, export), with --at N to crash only at call N; --quick and --sweep run every part")
}

// runsParts reports whether a --quick or --sweep run also runs every part:
// not when it was narrowed to some scenarios, one point or one shard
// other than the first.
func runsParts(o *options, cfg crashsweep.Config) bool {
	return (o.quick || o.sweep) && !o.set["scenario"] && o.at == 0 && o.fault == "" && o.flip == 0 &&
		!o.generated && cfg.Shard == 0
}

// partMode runs the part --part names.
func partMode(ctx context.Context, o *options, stdout io.Writer) (int, error) {
	p, err := crashsweep.ParsePart(o.part)
	if err != nil {
		return 0, err
	}
	var w testknobs.Weakening
	if o.canary != "" {
		if w, err = crashsweep.ParseCanary(o.canary); err != nil {
			return 0, err
		}
	}
	return runParts(ctx, []crashsweep.Part{p}, crashsweep.PartConfig{Weaken: w, At: o.at}, stdout)
}

// runParts runs parts, prints their violations and a line for each, and
// returns exitViolation when any found one.
func runParts(ctx context.Context, parts []crashsweep.Part, cfg crashsweep.PartConfig, stdout io.Writer) (int, error) {
	code := exitOK
	for _, p := range parts {
		rep, err := p.Run(ctx, cfg)
		if err != nil {
			return 0, fmt.Errorf("part %s: %w", p.Name, err)
		}
		if rep.Skipped != "" {
			fmt.Fprintf(stdout, "crashsim: part %s: skipped: %s\n", p.Name, rep.Skipped)
			continue
		}
		printViolations(stdout, rep.Violations, 20)
		fmt.Fprintf(stdout, "crashsim: part %s: %d crash points, %d states checked, %d violations (%.1f s)\n",
			p.Name, rep.Points, rep.States, len(rep.Violations), rep.Elapsed.Seconds())
		if len(rep.Violations) > 0 {
			code = exitViolation
		}
	}
	return code, nil
}
