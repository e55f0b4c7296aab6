package crashsweep

import (
	"slices"

	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// modelSeed is one crash model, with the seed of its torn clones.
type modelSeed struct {
	model faultfs.Model
	seed  int64
}

// taskKind is what a task does at its point.
type taskKind uint8

const (
	taskCrash taskKind = iota
	taskFault
	taskRecover
	taskCorrupt
)

// task is one unit of a sweep's work, run by any worker.
type task struct {
	sc    int
	kind  taskKind
	n     int64
	rule  string
	model modelSeed // taskRecover: the clone whose recovery crashes
	r     int64     // taskRecover: the recovery call that crashes
	flip  int64     // taskCorrupt: which seeded bit flip
}

func (cfg *Config) modelSeeds() []modelSeed {
	var out []modelSeed
	for _, m := range cfg.Models {
		if m == faultfs.Torn {
			for i := 0; i < cfg.TornSeeds; i++ {
				out = append(out, modelSeed{m, cfg.Seed + int64(i)})
			}
			continue
		}
		out = append(out, modelSeed{m, cfg.Seed})
	}
	return out
}

// tasks lists a scenario's work: crash points (thinned by Stride), crashes
// during recovery, bit flips and fault rules.
func (cfg *Config) tasks(sc int, ref *reference, ms []modelSeed) []task {
	var out []task
	if !cfg.NoCrash {
		points := cfg.crashPoints(ref.calls + 1)
		if first := preambleEnd(ref.sc, cfg.Weaken) + 1; first > 1 && cfg.At == 0 {
			// A shared set-up (a generated workload's preamble) that
			// other scenarios sweep: its points are left out.
			points = slices.DeleteFunc(points, func(n int64) bool { return n < first })
		}
		if cfg.RecoverAt == 0 {
			for _, n := range points {
				out = append(out, task{sc: sc, kind: taskCrash, n: n})
			}
		}
		out = append(out, cfg.recoveryTasks(sc, ref, ms, points)...)
	}
	if ref.sc.Has(scenarios.C6) {
		switch {
		case cfg.Flip > 0:
			out = append(out, task{sc: sc, kind: taskCorrupt, flip: cfg.Flip})
		default:
			for k := int64(1); k <= cfg.Flips; k++ {
				out = append(out, task{sc: sc, kind: taskCorrupt, flip: k})
			}
		}
	}
	if cfg.Faults && ref.sc.Has(scenarios.C9) {
		rules := faultRules(ref, cfg.FaultStride, cfg.Seed)
		if cfg.Fault != "" {
			rules = []string{cfg.Fault}
		}
		for _, r := range rules {
			out = append(out, task{sc: sc, kind: taskFault, rule: r})
		}
	}
	return out
}

// crashPoints lists the calls to crash at, last being the point after the
// scenario's final call: one (At), every Stride-th from a seeded offset
// plus the first and the last, or all.
func (cfg *Config) crashPoints(last int64) []int64 {
	var points []int64
	switch {
	case cfg.At > 0:
		points = []int64{cfg.At}
	case cfg.Stride > 1:
		off := int64(uint64(cfg.Seed) % uint64(cfg.Stride))
		points = append(points, 1)
		for n := 1 + off; n < last; n += int64(cfg.Stride) {
			if n > 1 {
				points = append(points, n)
			}
		}
		points = append(points, last)
	default:
		for n := int64(1); n <= last; n++ {
			points = append(points, n)
		}
	}
	return points
}

// recoveryTasks lists the crash-during-recovery sweep of a scenario that
// claims C10: at the chosen crash points, for each power-loss clone, one
// task per call of its recovery, so the workers share them.
func (cfg *Config) recoveryTasks(sc int, ref *reference, ms []modelSeed, points []int64) []task {
	rec := map[int64]bool{}
	if ref.sc.Has(scenarios.C10) {
		switch {
		case cfg.At > 0:
			rec[cfg.At] = cfg.RecoverAt > 0
		case cfg.RecoveryPoints < 0:
			for _, n := range points {
				rec[n] = true
			}
		case cfg.RecoveryPoints > 0 && len(points) > 0:
			// A reference run can leave no points: under ack-before-sync,
			// whose sync runs on a background goroutine, the calls of a
			// generated workload's run vary (gen-adv1-undo-cas1x, about
			// one self-test in six). Then there is nothing to recover.
			k := cfg.RecoveryPoints
			for i := 1; i <= k; i++ {
				rec[points[(len(points)-1)*i/k]] = true
			}
		}
	}
	var out []task
	for _, n := range points {
		if !rec[n] {
			continue
		}
		for _, m := range ms {
			if m.model == faultfs.ProcessCrash || (m.model == faultfs.Torn && m.seed != cfg.Seed) {
				continue
			}
			lo, hi := int64(1), ref.recoveryCalls(n, m, cfg.Weaken)
			if cfg.RecoverAt > 0 {
				lo, hi = cfg.RecoverAt, cfg.RecoverAt
			}
			for r := lo; r <= hi; r++ {
				out = append(out, task{sc: sc, kind: taskRecover, n: n, model: m, r: r})
			}
		}
	}
	return out
}
