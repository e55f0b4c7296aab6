package main

import (
	"bytes"

	"github.com/swarmops/swarmops/bench/internal/hostenv"
)

// size records the disk space dir takes, as du counts it, with extra
// metrics.
func (b *bench) size(r int, sys, step, dir string, extra map[string]float64) error {
	if !b.c.has("size") {
		return nil
	}
	n, err := hostenv.DiskBytes(dir)
	if err != nil {
		return err
	}
	m := map[string]float64{"bytes": float64(n)}
	for k, v := range extra {
		m[k] = v
	}
	b.record(Sample{Run: r, System: sys, Step: step, Metrics: m})
	return nil
}

// checkout times c, which materializes a commit into the empty or missing
// directory wt, and counts the entries it left there.
func (b *bench) checkout(r int, sys, wt string, c cmdSpec) (bool, error) {
	p, err := b.execute(c)
	if err != nil {
		return false, err
	}
	var extra map[string]float64
	if p.exit == 0 {
		st, err := stamps(wt)
		if err != nil {
			return false, err
		}
		extra = map[string]float64{"on_disk": float64(len(st))}
	}
	return b.keep(r, sys, "checkout", c, p, extra), nil
}

// switches times --switches switches of the work tree wt, which is at
// from, alternately to to and back, counting the entries each one created,
// rewrote or removed on disk (by inode, size, mtime and ctime), then
// leaves wt at end. failure is why a switch failed ("" when none did): it
// is recorded, and wt is where that switch left it.
func (b *bench) switches(r int, sys, wt, from, to, end string, cmd func(target string) cmdSpec) (failure string, err error) {
	at, n := from, b.c.Switches
	if !b.c.has("switch") {
		n = 0
	}
	for i := 0; i < n; i++ {
		target := to
		if at == to {
			target = from
		}
		before, err := stamps(wt)
		if err != nil {
			return "", err
		}
		p, err := b.execute(cmd(target))
		if err != nil {
			return "", err
		}
		after, err := stamps(wt)
		if err != nil {
			return "", err
		}
		w, rm := touched(before, after)
		if !b.keep(r, sys, "switch", cmd(target), p, map[string]float64{"on_disk_written": float64(w), "on_disk_removed": float64(rm)}) {
			return p.failure(), nil
		}
		at = target
	}
	if at == end {
		return "", nil
	}
	p, err := b.execute(cmd(end))
	if err != nil {
		return "", err
	}
	return p.failure(), nil
}

// status times c, a status of an unchanged work tree, --reads times after
// one run that is not timed (so neither system is timed refreshing stat
// data a checkout or switch left racy).
func (b *bench) status(r int, sys string, c cmdSpec) error {
	if !b.c.has("status") {
		return nil
	}
	if _, err := b.execute(c); err != nil {
		return err
	}
	for k := 0; k < b.c.Reads; k++ {
		p, err := b.execute(c)
		if err != nil {
			return err
		}
		lines := float64(bytes.Count(p.stdout, []byte("\n")))
		b.keep(r, sys, "status", c, p, map[string]float64{"out_lines": lines})
	}
	return nil
}
