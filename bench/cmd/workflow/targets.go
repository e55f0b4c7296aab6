package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/swarmops/swarmops/bench/internal/stats"
)

// agentsTable prints the agents step: each system's commit rate, the
// spread of its agents' finishing times, and its retried and failed
// commits.
func (w *mdWriter) agentsTable() {
	rows := []row{{sysSwarmOps, "agents-list", "swarmops, change list (`commit -F -`)"}, {sysServe, "agents-list", "swarmops through `serve`, change list"},
		{sysSwarmOps, "agents-dir", "swarmops, own work tree (`commit --dir WT`)"}, {sysServe, "agents-dir", "swarmops through `serve`, own work tree"},
		{sysGit, "agents", "git (defaults), own worktree (`commit -a`)"}, {sysGitFsync, "agents", "git core.fsync=all, own worktree"}}
	if !w.any(rows) {
		return
	}
	c := w.r.Config
	w.p("#### %d agents, %d commits each, one process per commit\n\n", c.Agents, c.Changes)
	w.p("Each agent appends a line to a file of its own and commits it onto a ref or branch of its own; the agents start together and each runs its commits one after another. A retryable failure (E_BUSY, E_UNAVAILABLE, a git lock) is counted and run again. Commits/s is every agent's commits over the wall time until the last agent finished; spread is the last agent's finishing time over the first's.\n\n")
	w.p("| system | commits/s | spread | retried | failed | per commit p50 ms | peak RSS MB | ÷ git | ÷ git core.fsync=all |\n|---|---|---|---|---|---|---|---|---|\n")
	rate := metric("commits_per_s")
	g, gf := w.x.median(sysGit, "agents", rate), w.x.median(sysGitFsync, "agents", rate)
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) == 0 {
			continue
		}
		var rg, rf string
		if rw.sys == sysSwarmOps || rw.sys == sysServe {
			me := w.x.median(rw.sys, rw.step, rate)
			rg, rf = ratio(me, g), ratio(me, gf)
		}
		w.p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rw.label, w.x.cell(rw.sys, rw.step, rate), w.x.cell(rw.sys, rw.step, metric("spread")),
			w.x.cell(rw.sys, rw.step, metric("busy")), w.x.cell(rw.sys, rw.step, metric("failed")), w.x.cell(rw.sys, rw.step, metric("p50_ms")),
			w.x.cell(rw.sys, rw.step, rssMB), rg, rf)
	}
	w.p("\nRatios here divide swarmops's commits/s by git's: above 1 is faster.\n\n")
}

// target is one line of the verdicts.
type target struct {
	what, measured, verdict string
}

// targets prints every target with the measured value and met, missed or
// n/a (with the reason).
func (w *mdWriter) targets() {
	ts := w.verdicts()
	if len(ts) == 0 {
		return
	}
	w.p("#### Against the targets\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range ts {
		w.p("| %s | %s | %s |\n", t.what, t.measured, t.verdict)
	}
	w.p("\n")
}

// verdicts judges each target whose steps were measured.
func (w *mdWriter) verdicts() []target {
	x := w.x
	var ts []target
	add := func(t target, ok bool) {
		if ok {
			ts = append(ts, t)
		}
	}
	add(w.ratioTarget("import ≤ 1.0× git `add -A && commit` with core.fsync=all", sysSwarmOps, "import", sysGitFsync, "import"))
	add(w.ratioTarget("checkout into an empty directory ≤ 1.0× `git worktree add`", sysSwarmOps, "checkout", sysGit, "checkout"))
	add(w.ratioTarget("one edited file, then `commit --dir` ≤ 1.0× `git commit -a` with core.fsync=all", sysSwarmOps, "edit-dir", sysGitFsync, "edit"))
	add(w.ratioTarget("one edited file, then `commit` inside the work tree ≤ 1.0× `git commit -a` with core.fsync=all", sysSwarmOps, "edit-tree", sysGitFsync, "edit"))
	add(w.ratioTarget("`status` on an unchanged tree ≤ 1.0× `git status`", sysSwarmOps, "status", sysGit, "status"))
	add(w.switchTarget())
	for _, sys := range []string{sysSwarmOps, sysServe} {
		for _, rd := range []string{"log", "cat", "diff"} {
			how := ""
			if sys == sysServe {
				how = " through `serve`"
			}
			add(w.limitTarget(fmt.Sprintf("`%s`%s ≤ 10 ms, process start included", rd, how), sys, rd, wall, 10, "ms"))
		}
	}
	mb := func(s Sample) (float64, bool) { v, ok := s.Metrics["bytes"]; return v / 1e6, ok }
	if me, g := x.median(sysSwarmOps, "size", mb), x.median(sysGit, "size", mb); !math.IsNaN(me) && !math.IsNaN(g) {
		ts = append(ts, target{"store size after the import ≤ git's at its defaults", fmt.Sprintf("%s MB against %s MB (%s)", num(me), num(g), ratio(me, g)), verdict(me <= g)})
	}
	add(w.peakTarget("peak memory of the import (`commit --dir` of the tree) ≤ 64 MB", "import"))
	add(w.peakTarget("peak memory of a one-file `commit --dir` ≤ 64 MB", "edit-dir"))
	add(w.peakTarget("peak memory of `checkout` into an empty directory ≤ 64 MB", "checkout"))
	return ts
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// ratioTarget judges swarmops's median against a git median: at most
// 1.0×. ok is false when neither side was measured.
func (w *mdWriter) ratioTarget(what, sys, step, gsys, gstep string) (target, bool) {
	x := w.x
	me, g := x.median(sys, step, wall), x.median(gsys, gstep, wall)
	switch {
	case x.count(sys, step) == 0 && x.count(gsys, gstep) == 0:
		return target{}, false
	case math.IsNaN(me) || math.IsNaN(g):
		why := x.na(sys, step)
		if why == "" {
			why = x.na(gsys, gstep)
		}
		return target{what, "", x.naCell(why)}, true
	}
	return target{what, fmt.Sprintf("%s ms against %s ms: %s", num(me), num(g), ratio(me, g)), verdict(me <= g)}, true
}

// limitTarget judges a median against an absolute limit.
func (w *mdWriter) limitTarget(what, sys, step string, f func(Sample) (float64, bool), limit float64, unit string) (target, bool) {
	return w.judge(what, sys, step, f, func(v []float64) (string, bool) {
		me := stats.Median(v)
		return fmt.Sprintf("%s %s median", num(me), unit), me <= limit
	})
}

// peakTarget judges the largest peak RSS of swarmops's step against 64 MB.
func (w *mdWriter) peakTarget(what, step string) (target, bool) {
	return w.judge(what, sysSwarmOps, step, rssMB, func(v []float64) (string, bool) {
		_, hi := stats.MinMax(v)
		return fmt.Sprintf("%s MB at most", num(hi)), hi <= 64
	})
}

// switchTarget judges that every switch wrote exactly the ten files that
// differ, as counted on disk.
func (w *mdWriter) switchTarget() (target, bool) {
	x := w.x
	const what = "a switch between two commits that differ in 10 files writes 10 files"
	return w.judge(what, sysSwarmOps, "switch", metric("on_disk_written"), func(v []float64) (string, bool) {
		lo, hi := stats.MinMax(v)
		m := fmt.Sprintf("%s written on disk", x.cell(sysSwarmOps, "switch", metric("on_disk_written")))
		if rep := x.cell(sysSwarmOps, "switch", reportedWritten); rep != "" {
			m += fmt.Sprintf(", %s reported", rep)
		}
		return m, lo == 10 && hi == 10
	})
}

// judge is a target on the values f gives of sys's step: none (ok false)
// when the step never ran, n/a with the reason when it ran but measured
// nothing, else what measure says of the values and whether they met it.
func (w *mdWriter) judge(what, sys, step string, f func(Sample) (float64, bool), measure func(v []float64) (string, bool)) (target, bool) {
	x := w.x
	if x.count(sys, step) == 0 {
		return target{}, false
	}
	v := x.vals(sys, step, f)
	if len(v) == 0 {
		return target{what, "", x.naCell(x.na(sys, step))}, true
	}
	m, met := measure(v)
	return target{what, m, verdict(met)}, true
}

// notes prints what the report noted, and the reasons of the cells shown
// as n/a, numbered.
func (w *mdWriter) notes() {
	if len(w.r.Notes) == 0 && len(w.x.reasons) == 0 {
		return
	}
	w.p("#### Notes\n\n")
	for i, why := range w.x.reasons {
		w.p("%d. n/a: %s\n", i+1, mdEscape(why))
	}
	if len(w.x.reasons) > 0 {
		w.p("\n")
	}
	for _, n := range w.r.Notes {
		w.p("- %s\n", strings.TrimSpace(n))
	}
	w.p("\n")
}
