package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/swarmops/swarmops/bench/internal/stats"
)

// samples indexes a report's samples by system and step, and numbers
// the reasons of the cells it prints as n/a.
type samples struct {
	m       map[[2]string][]Sample
	reasons []string
}

func indexSamples(ss []Sample) *samples {
	x := &samples{m: map[[2]string][]Sample{}}
	for _, s := range ss {
		k := [2]string{s.System, s.Step}
		x.m[k] = append(x.m[k], s)
	}
	return x
}

// count is the number of samples of (sys, step), failed ones included.
func (x *samples) count(sys, step string) int { return len(x.m[[2]string{sys, step}]) }

// reason returns the note number of why, numbering it if it is new.
func (x *samples) reason(why string) int {
	for i, r := range x.reasons {
		if r == why {
			return i + 1
		}
	}
	x.reasons = append(x.reasons, why)
	return len(x.reasons)
}

// naCell is the cell of a step that failed: n/a and its note's number.
func (x *samples) naCell(why string) string { return fmt.Sprintf("n/a [%d]", x.reason(why)) }

// vals returns f of every successful sample of (sys, step) that has it.
func (x *samples) vals(sys, step string, f func(Sample) (float64, bool)) []float64 {
	var out []float64
	for _, s := range x.m[[2]string{sys, step}] {
		if v, ok := f(s); ok && s.Error == "" {
			out = append(out, v)
		}
	}
	return out
}

// na returns why (sys, step) has no successful sample: its first error,
// or "" when it has one or was not measured at all.
func (x *samples) na(sys, step string) string {
	var why string
	for _, s := range x.m[[2]string{sys, step}] {
		if s.Error == "" {
			return ""
		}
		if why == "" {
			why = s.Error
		}
	}
	return why
}

func wall(s Sample) (float64, bool) { return s.Ms, s.Ms > 0 }
func rssMB(s Sample) (float64, bool) {
	return float64(s.RSSKiB) / 1024, s.RSSKiB > 0
}
func metric(k string) func(Sample) (float64, bool) {
	return func(s Sample) (float64, bool) { v, ok := s.Metrics[k]; return v, ok }
}

// median of (sys, step)'s f, NaN when there is none.
func (x *samples) median(sys, step string, f func(Sample) (float64, bool)) float64 {
	return stats.Median(x.vals(sys, step, f))
}

// cell prints median (min–max) of (sys, step)'s f, "n/a [k]" when the
// step failed (note k says why), and "" when it was not measured.
func (x *samples) cell(sys, step string, f func(Sample) (float64, bool)) string {
	v := x.vals(sys, step, f)
	if len(v) == 0 {
		if why := x.na(sys, step); why != "" {
			return x.naCell(why)
		}
		return ""
	}
	lo, hi := stats.MinMax(v)
	if lo == hi {
		return num(lo)
	}
	return fmt.Sprintf("%s (%s–%s)", num(stats.Median(v)), num(lo), num(hi))
}

// num prints a figure with three significant digits or more, thousands
// separated.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v == math.Trunc(v) && math.Abs(v) < 1e15 || math.Abs(v) >= 100:
		s := fmt.Sprintf("%.0f", v)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		if neg {
			s = "-" + s
		}
		return s
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func mdEscape(s string) string { return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s) }

// row is one line of a timing table: a system's samples of a step.
type row struct {
	sys, step, label string
}

// labels names the systems in tables.
var labels = map[string]string{
	sysSwarmOps: "swarmops",
	sysServe:    "swarmops through `serve`",
	sysGit:      "git (defaults)",
	sysGitFsync: "git core.fsync=all",
}

type mdWriter struct {
	b strings.Builder
	r *Report
	x *samples
}

func (w *mdWriter) p(f string, a ...any) { fmt.Fprintf(&w.b, f, a...) }

// markdown renders the report: the environment, a table per step, the
// targets and the notes.
func markdown(r *Report) string {
	w := &mdWriter{r: r, x: indexSamples(r.Samples)}
	w.header()
	w.timeTable("Import", "`swarmops commit --dir TREE --advance main -m import` into a fresh store; `git add -A && git commit -q -m import` in a fresh repository whose work tree is TREE",
		[]row{{sysSwarmOps, "import", ""}, {sysGit, "import", ""}, {sysGitFsync, "import", ""}}, w.importNote)
	w.timeTable("Checkout into an empty directory", "`swarmops checkout main DIR`; `git worktree add --detach DIR main`",
		[]row{{sysSwarmOps, "checkout", ""}, {sysGit, "checkout", ""}, {sysGitFsync, "checkout", ""}}, w.checkoutNote)
	w.timeTable("One edited file, then commit", "one line appended to one file of the work tree, then `swarmops commit --dir WT --advance main -m edit` (or the commit run inside WT), or `git commit -a -q -m edit`",
		[]row{{sysSwarmOps, "edit-dir", "swarmops `commit --dir WT`"}, {sysSwarmOps, "edit-tree", "swarmops `commit` inside WT"},
			{sysServe, "edit-dir", "swarmops `commit --dir WT` through `serve`"}, {sysGit, "edit", ""}, {sysGitFsync, "edit", ""}}, nil)
	w.timeTable("Status of an unchanged work tree", "`swarmops status WT`; `git status --porcelain` (each run once, untimed, first)",
		[]row{{sysSwarmOps, "status", ""}, {sysServe, "status", ""}, {sysGit, "status", ""}}, nil)
	w.switchTable()
	w.readsTable()
	w.sizeTable()
	w.agentsTable()
	w.historyTable()
	w.targets()
	w.notes()
	return w.b.String()
}

// header prints the command, the machine, the tree and the ranges of load,
// probe and free space over the run.
func (w *mdWriter) header() {
	r := w.r
	var loads, agentLoads, probes, frees []float64
	for _, e := range r.Envs {
		if strings.Contains(e.System, "/agents") {
			agentLoads = append(agentLoads, e.Env.Load[0])
		} else {
			loads = append(loads, e.Env.Load[0])
		}
		if e.Env.ProbeUs > 0 {
			probes = append(probes, e.Env.ProbeUs)
		}
		frees = append(frees, e.Env.FreeGiB)
	}
	lmin, lmax := stats.MinMax(loads)
	pmin, pmax := stats.MinMax(probes)
	fmin, _ := stats.MinMax(frees)
	m := r.Machine
	w.p("### Workflow beside git, %s\n\n", r.Date)
	w.p("Command: `%s` (%d runs, systems in counterbalanced order; %.0f s).\n\n", r.Command, r.Config.Runs, r.Seconds)
	w.p("Machine: %d CPUs (%s), kernel %s, %s, memory %s, %s. %s; swarmops %s.\n\n", m.NumCPU, m.CPU, m.Kernel, m.FS, m.MemTotal, m.Go, r.Git, r.SwarmOps)
	w.p("Before each system's turn: 1-minute load %s–%s", num(lmin), num(lmax))
	if len(agentLoads) > 0 {
		almin, almax := stats.MinMax(agentLoads)
		w.p(" (before the agents' turns %s–%s)", num(almin), num(almax))
	}
	w.p("; raw fdatasync probe (4 KiB overwrite in pre-zeroed, synced space, median of 40) %s µs median [%s–%s]; free space ≥ %.0f GiB.\n\n",
		num(stats.Median(probes)), num(pmin), num(pmax), fmin)
	t := r.Tree
	w.p("Tree: a copy of `%s`, %s regular files, %s bytes, %d symbolic links", t.Source, num(float64(t.Files)), num(float64(t.Bytes)), t.Links)
	if len(t.Added) > 0 {
		w.p(" (added: %s)", strings.Join(t.Added, ", "))
	}
	w.p(". cat prints `%s`; the one-file commits edit `%s`; the two commits a switch moves between differ in %d files.\n\n", t.CatPath, t.EditPath, len(t.TenPaths))
	w.p("Cells: median (min–max) over every sample of every run, in milliseconds of wall time for the whole process, start-up included, taken by the small process that starts it; peak RSS is the process's ru_maxrss (for git's import, the larger of add and commit), which counts children it waited for and has a floor of the starter's own, about 4 MB. Ratios divide swarmops's median by the other system's.\n\n")
}

// timeTable prints one step's times and peak memory, with swarmops's
// ratio to each git row.
func (w *mdWriter) timeTable(title, what string, rows []row, note func(row) string) {
	if !w.any(rows) {
		return
	}
	w.p("#### %s\n\n%s.\n\n", title, what)
	w.p("| system | ms | peak RSS MB | ÷ git | ÷ git core.fsync=all | notes |\n|---|---|---|---|---|---|\n")
	var gitStep, fsyncStep string
	for _, rw := range rows {
		switch rw.sys {
		case sysGit:
			gitStep = rw.step
		case sysGitFsync:
			fsyncStep = rw.step
		}
	}
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) == 0 {
			continue
		}
		label := rw.label
		if label == "" {
			label = labels[rw.sys]
		}
		var rg, rf, n string
		if rw.sys == sysSwarmOps || rw.sys == sysServe {
			me := w.x.median(rw.sys, rw.step, wall)
			rg = ratio(me, w.x.median(sysGit, gitStep, wall))
			rf = ratio(me, w.x.median(sysGitFsync, fsyncStep, wall))
		}
		if note != nil {
			n = note(rw)
		}
		w.p("| %s | %s | %s | %s | %s | %s |\n", label, w.x.cell(rw.sys, rw.step, wall), w.x.cell(rw.sys, rw.step, rssMB), rg, rf, n)
	}
	w.p("\n")
}

func (w *mdWriter) any(rows []row) bool {
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) > 0 {
			return true
		}
	}
	return false
}

// importNote gives the entries each system recorded and git's background
// gc.
func (w *mdWriter) importNote(rw row) string {
	if rw.sys == sysSwarmOps {
		if v := w.x.vals(rw.sys, rw.step, metric("out_changes")); len(v) > 0 {
			return num(stats.Median(v)) + " changes"
		}
		return ""
	}
	if len(w.x.vals(rw.sys, rw.step, metric("add_ms"))) == 0 {
		return ""
	}
	n := fmt.Sprintf("%s entries; add %s ms, commit %s ms", num(w.x.median(rw.sys, rw.step, metric("entries"))),
		num(w.x.median(rw.sys, rw.step, metric("add_ms"))), num(w.x.median(rw.sys, rw.step, metric("commit_ms"))))
	if bg := w.x.vals(rw.sys, rw.step, metric("background_gc_ms")); slices.Max(append(bg, 0)) > 0 {
		n += fmt.Sprintf("; then the `git gc --auto` commit left running in the background took %s ms more", w.x.cell(rw.sys, rw.step, metric("background_gc_ms")))
	}
	return n
}

// checkoutNote gives the entries each checkout left on disk.
func (w *mdWriter) checkoutNote(rw row) string {
	if v := w.x.vals(rw.sys, rw.step, metric("on_disk")); len(v) > 0 {
		return num(stats.Median(v)) + " entries on disk"
	}
	return ""
}

// switchTable prints the switches: time, the files the command says it
// wrote, and what changed on disk.
func (w *mdWriter) switchTable() {
	rows := []row{{sysSwarmOps, "switch", ""}, {sysGit, "switch", ""}}
	if !w.any(rows) {
		return
	}
	w.p("#### Switching between two commits that differ in 10 files\n\n`swarmops checkout REV WT` on the work tree; `git checkout -q --detach REV`. Written on disk: entries whose inode, size, mtime or ctime changed, or that are new.\n\n")
	w.p("| system | ms | peak RSS MB | ÷ git | written (reported) | written on disk | removed on disk |\n|---|---|---|---|---|---|---|\n")
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) == 0 {
			continue
		}
		var rg, reported string
		if rw.sys == sysSwarmOps {
			rg = ratio(w.x.median(rw.sys, rw.step, wall), w.x.median(sysGit, rw.step, wall))
			reported = w.x.cell(rw.sys, rw.step, reportedWritten)
		}
		w.p("| %s | %s | %s | %s | %s | %s | %s |\n", labels[rw.sys], w.x.cell(rw.sys, rw.step, wall), w.x.cell(rw.sys, rw.step, rssMB), rg,
			reported, w.x.cell(rw.sys, rw.step, metric("on_disk_written")), w.x.cell(rw.sys, rw.step, metric("on_disk_removed")))
	}
	w.p("\n")
}

// reportedWritten is the count of files a checkout says it wrote: its
// "written" field, or "files" where it has no such field.
func reportedWritten(s Sample) (float64, bool) {
	if v, ok := s.Metrics["out_written"]; ok {
		return v, true
	}
	v, ok := s.Metrics["out_files"]
	return v, ok
}

// readsTable prints log, cat and diff side by side.
func (w *mdWriter) readsTable() {
	rows := []row{{sysSwarmOps, "", ""}, {sysServe, "", ""}, {sysGit, "", ""}}
	have := false
	for _, rw := range rows {
		have = have || w.x.count(rw.sys, "log") > 0
	}
	if !have {
		return
	}
	t := w.r.Tree
	w.p("#### log, cat and diff after the import and the ten-file commit\n\n`swarmops log -n 10`, `cat main:%s`, `diff main~1 main`; `git log -n 10`, `show HEAD:%s`, `diff HEAD~1 HEAD` in the work tree. Each process whole, start-up included.\n\n", t.CatPath, t.CatPath)
	w.p("| system | log -n 10 ms | cat ms | diff ms | peak RSS MB (log) |\n|---|---|---|---|---|\n")
	for _, rw := range rows {
		if w.x.count(rw.sys, "log") == 0 {
			continue
		}
		w.p("| %s | %s | %s | %s | %s |\n", labels[rw.sys], w.x.cell(rw.sys, "log", wall), w.x.cell(rw.sys, "cat", wall),
			w.x.cell(rw.sys, "diff", wall), w.x.cell(rw.sys, "log", rssMB))
	}
	w.p("\n")
	if w.x.count(sysServe, "server") > 0 {
		w.p("Through `serve`, the peak RSS is the client process's; the server's own peak over its whole turn was %s MB (the harness starts the server itself, so this figure has the harness's peak as a floor).\n\n", w.x.cell(sysServe, "server", rssMB))
	}
}

// sizeTable prints the store's size beside .git's.
func (w *mdWriter) sizeTable() {
	rows := []row{{sysSwarmOps, "size", "swarmops store"}, {sysGit, "size", "git .git at defaults (after its own gc --auto)"},
		{sysGit, "size-gc", "git .git after `git gc`"}, {sysGitFsync, "size", "git core.fsync=all .git (after its gc --auto)"}}
	if !w.any(rows) {
		return
	}
	mb := func(s Sample) (float64, bool) { v, ok := s.Metrics["bytes"]; return v / 1e6, ok }
	w.p("#### Size after the import (as du counts)\n\n| what | MB | swarmops ÷ this |\n|---|---|---|\n")
	me := w.x.median(sysSwarmOps, "size", mb)
	for _, rw := range rows {
		if w.x.count(rw.sys, rw.step) == 0 {
			continue
		}
		var rg string
		if rw.sys != sysSwarmOps {
			rg = ratio(me, w.x.median(rw.sys, rw.step, mb))
		}
		w.p("| %s | %s | %s |\n", rw.label, w.x.cell(rw.sys, rw.step, mb), rg)
	}
	w.p("\n")
}
