package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/textmerge"
)

// diffFormat is how diff and show print changes: the patch (default),
// a stat, or only the paths with their letters.
type diffFormat struct {
	stat, nameStatus bool
	context          int
}

func (f *diffFormat) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.stat, "stat", false, "print changed lines per path instead of the patch")
	fl.BoolVar(&f.nameStatus, "name-status", false, "print only the paths with A, M or D")
	fl.IntVarP(&f.context, "unified", "U", textmerge.DefaultContext, "lines of context around each change")
}

func (f *diffFormat) check() error {
	if f.stat && f.nameStatus {
		return usagef("--stat and --name-status: give one")
	}
	if f.context < 0 {
		return usagef("-U %d: want 0 or more lines of context", f.context)
	}
	return nil
}

// fileDiff is one path's change with its content diff.
type fileDiff struct {
	pc             core.PathChange
	fd             textmerge.FileDiff
	added, deleted int
}

// blobSource reads the two sides of a change: old from the store, new from
// the store or, for a work tree, from its files. parallel says both may be
// called from several goroutines at once (a snapshot; not a work tree).
type blobSource struct {
	old, new func(e objects.Entry, path string) ([]byte, error)
	parallel bool
}

// storeBlobs reads both sides from a snapshot.
func storeBlobs(sn *core.Snapshot) blobSource {
	read := func(e objects.Entry, _ string) ([]byte, error) { return sn.Blob(e.ID) }
	return blobSource{old: read, new: read, parallel: true}
}

// contentDiffs diffs each change's content, a path at a time on each of up
// to GOMAXPROCS goroutines when src allows it (reading a blob of a
// compressed group decodes the group, which runs outside the store's
// lock), so two blobs a goroutine are held at once. Under --name-status
// nothing is read. The error is the first path's to fail, as a single
// goroutine would return it: paths are taken in order and each taken is
// finished.
func contentDiffs(src blobSource, pcs []core.PathChange, f diffFormat) ([]fileDiff, error) {
	out := make([]fileDiff, len(pcs))
	if f.nameStatus {
		for i, pc := range pcs {
			out[i].pc = pc
		}
		return out, nil
	}
	errs := make([]error, len(pcs))
	workers := 1
	if src.parallel {
		workers = max(1, min(runtime.GOMAXPROCS(0), len(pcs)))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(pcs); i = int(next.Add(1) - 1) {
				if out[i], errs[i] = contentDiff(src, pcs[i], f); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// contentDiff diffs one change's content.
func contentDiff(src blobSource, pc core.PathChange, f diffFormat) (fileDiff, error) {
	d := fileDiff{pc: pc}
	var a, b []byte
	var err error
	if pc.Op != "add" {
		if a, err = src.old(pc.Old, pc.Path); err != nil {
			return d, err
		}
	}
	if pc.Op != "delete" {
		if b, err = src.new(pc.New, pc.Path); err != nil {
			return d, err
		}
	}
	if d.fd, err = textmerge.Unified(a, b, f.context); err != nil {
		return d, usagef("%w", err)
	}
	for _, h := range d.fd.Hunks {
		for _, l := range h.Lines {
			switch l.Op {
			case textmerge.OpInsert:
				d.added++
			case textmerge.OpDelete:
				d.deleted++
			}
		}
	}
	return d, nil
}

// diffsJSON renders diffs: every change's path, op and entries, and with
// the patch its structured hunks and line counts.
func diffsJSON(fds []fileDiff, f diffFormat) []map[string]any {
	out := make([]map[string]any, len(fds))
	for i, d := range fds {
		m := pathChangeJSON(d.pc)
		if !f.nameStatus {
			m["added"], m["deleted"] = d.added, d.deleted
			if d.fd.Binary {
				m["binary"] = true
			}
			if !f.stat {
				m["hunks"] = d.fd.Hunks
			}
		}
		out[i] = m
	}
	return out
}

var opLetter = map[string]string{"add": "A", "modify": "M", "delete": "D"}

// writeDiffs prints diffs in the chosen format.
func writeDiffs(w io.Writer, fds []fileDiff, f diffFormat) {
	switch {
	case f.nameStatus:
		for _, d := range fds {
			fmt.Fprintf(w, "%s\t%s\n", opLetter[d.pc.Op], quotePath(d.pc.Path))
		}
	case f.stat:
		writeStat(w, fds)
	default:
		for _, d := range fds {
			writePatch(w, d)
		}
	}
}

// writeStat prints git's --stat: a line a path, then the totals.
func writeStat(w io.Writer, fds []fileDiff) {
	width := 0
	for _, d := range fds {
		width = max(width, len(quotePath(d.pc.Path)))
	}
	var add, del int
	for _, d := range fds {
		p := quotePath(d.pc.Path)
		if d.fd.Binary {
			fmt.Fprintf(w, " %-*s | Bin\n", width, p)
			continue
		}
		fmt.Fprintf(w, " %-*s | %d %s%s\n", width, p, d.added+d.deleted,
			strings.Repeat("+", min(d.added, 40)), strings.Repeat("-", min(d.deleted, 40)))
		add, del = add+d.added, del+d.deleted
	}
	fmt.Fprintf(w, " %d files changed, %d insertions(+), %d deletions(-)\n", len(fds), add, del)
}

// writePatch prints one path's change the way git diff does.
func writePatch(w io.Writer, d fileDiff) {
	// Names git would quote are quoted whole, prefix included, as git
	// does ("a/new\nline").
	a, b := quotePath("a/"+d.pc.Path), quotePath("b/"+d.pc.Path)
	fmt.Fprintf(w, "diff --git %s %s\n", a, b)
	switch d.pc.Op {
	case "add":
		fmt.Fprintf(w, "new file mode %06o\n", uint32(d.pc.New.Mode))
	case "delete":
		fmt.Fprintf(w, "deleted file mode %06o\n", uint32(d.pc.Old.Mode))
	default:
		if d.pc.Old.Mode != d.pc.New.Mode {
			fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", uint32(d.pc.Old.Mode), uint32(d.pc.New.Mode))
		}
	}
	if d.fd.Binary {
		fmt.Fprintf(w, "Binary files %s and %s differ\n", a, b)
		return
	}
	if len(d.fd.Hunks) == 0 {
		return
	}
	from, to := a, b
	if d.pc.Op == "add" {
		from = "/dev/null"
	}
	if d.pc.Op == "delete" {
		to = "/dev/null"
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", from, to)
	for _, h := range d.fd.Hunks {
		fmt.Fprintf(w, "@@ -%s +%s @@", hunkRange(h.OldStart, h.OldCount), hunkRange(h.NewStart, h.NewCount))
		if h.Section != "" {
			fmt.Fprintf(w, " %s", h.Section)
		}
		fmt.Fprintln(w)
		for _, l := range h.Lines {
			fmt.Fprintf(w, "%s%s\n", l.Op, l.Text)
			if l.NoNewline {
				fmt.Fprintln(w, `\ No newline at end of file`)
			}
		}
	}
}

// hunkRange is a hunk header's range: "start" for one line, else
// "start,count".
func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
