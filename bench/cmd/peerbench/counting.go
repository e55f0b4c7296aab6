package main

import (
	"github.com/swarmops/swarmops/bench/engine"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// countingEngine returns e unchanged: children run engines on the real OS.
func countingEngine(e engine.Engine) engine.Engine { return e }

// countingSyncs counts SwarmOps' syncs per commit through faultfs.Counting
// over vfs.OS(), in this process: the calls made by syncN commits after 32
// warm-up commits, divided by syncN. It complements strace, which sees the
// same syscalls from outside.
func (h *harness) countingSyncs() error {
	var sw bool
	for _, e := range h.engines {
		sw = sw || e.Name() == "swarmops"
	}
	if !sw {
		return nil
	}
	for r := 0; r < min(h.runs, h.syncRuns); r++ {
		res := Result{Workload: "syncs-counting", Engine: "swarmops", Run: r, Env: h.env(), Metrics: map[string]float64{},
			Note: "faultfs.Counting over vfs.OS()"}
		err := func() error {
			d, err := h.fresh("syncs")
			if err != nil {
				return err
			}
			c := faultfs.NewCounting(vfs.OS())
			s, err := engine.SwarmOps{FS: c}.Open(d, 1)
			if err != nil {
				return err
			}
			defer s.Close()
			_, _, prev, err := commitChain(s, h.seed, 0, 0, 32, "", engine.Key{}, false)
			if err != nil {
				return err
			}
			before := c.Snapshot()
			if _, _, _, err := commitChain(s, h.seed, 0, 32, h.syncN, "", prev, true); err != nil {
				return err
			}
			after := c.Snapshot()
			per := func(op faultfs.Op) float64 { return float64(after[op]-before[op]) / float64(h.syncN) }
			res.Metrics["datasync_per_commit"] = per(faultfs.OpDatasync)
			res.Metrics["sync_per_commit"] = per(faultfs.OpSync)
			res.Metrics["syncdir_per_commit"] = per(faultfs.OpSyncDir)
			res.Metrics["write_per_commit"] = per(faultfs.OpWrite)
			res.Metrics["read_per_commit"] = per(faultfs.OpRead)
			res.Metrics["lock_per_commit"] = per(faultfs.OpLock)
			return nil
		}()
		if err != nil {
			res.Error = err.Error()
		}
		h.record(res)
	}
	return nil
}
