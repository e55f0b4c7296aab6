package main

import (
	"fmt"

	"github.com/swarmops/swarmops/bench/internal/hostenv"
)

// Machine describes the host once per report (shared with the workflow
// benchmark, so both record it the same way).
type Machine = hostenv.Machine

// Env is recorded with each measurement.
type Env = hostenv.Env

func machine(dir string) Machine { return hostenv.Describe(dir) }

func (h *harness) env() Env { return hostenv.Measure(h.dir, "peerbench") }

// checkFree refuses to run on a nearly full disk.
func (h *harness) checkFree() error {
	g, err := hostenv.FreeGiB(h.dir)
	if err != nil {
		return err
	}
	if g < h.minFree {
		return fmt.Errorf("free space %.1f GiB under %s is below the floor --min-free-gib=%.1f; refusing to run", g, h.dir, h.minFree)
	}
	return nil
}

// diskBytes sums the allocated size of every file under dir, as du counts.
func diskBytes(dir string) (int64, error) { return hostenv.DiskBytes(dir) }
