package crashsweep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strings"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/scenarios"
)

// corruptTask checks C6 against corruption inside the durable prefix: it
// runs the scenario to completion, flips one seeded bit in a journal
// segment, a loose object, the reflog file or the checkpoint, and opens and
// reads everything, the operation log included. Every read must return
// the committed bytes or fail with ErrCorrupt; a flip that changes what a
// reader gets without an error is undetected corruption. The clone keeps the
// boot id (a process restart), so the store knows its durable offset and a
// damaged frame cannot pass for a torn tail.
func corruptTask(ref *reference, t task, cfg *Config) taskResult {
	res := taskResult{states: 1, flips: 1}
	mem, _, _ := ref.runTo(0, cfg.Weaken)
	c := mem.CrashClone(faultfs.ProcessCrash, 0)
	v := Violation{Scenario: ref.sc.Name, File: ref.sc.File, Calls: ref.calls, Claim: string(scenarios.C6), Seed: cfg.Seed, Flip: t.flip}
	where, err := flipBit(c, cfg.Seed, t.flip)
	if err != nil {
		v.Detail = "cannot flip a bit: " + err.Error()
		res.violations = append(res.violations, v)
		return res
	}
	add := func(format string, a ...any) {
		w := v
		w.Detail = where + ": " + fmt.Sprintf(format, a...)
		res.violations = append(res.violations, w)
	}
	s, err := core.Open(storeDir, storeOptions(ref.sc, c, cfg.Weaken, fixedNow))
	if err != nil {
		if !errors.Is(err, core.ErrCorrupt) {
			add("open failed without ErrCorrupt: %s", errString(err))
		}
		return res
	}
	defer s.Close()
	sn, err := s.Snapshot()
	if err != nil {
		if !errors.Is(err, core.ErrCorrupt) {
			add("snapshot failed without ErrCorrupt: %s", errString(err))
		}
		return res
	}
	got, err := observeSnapshot(sn, ref.known)
	if err != nil {
		if !errors.Is(err, core.ErrCorrupt) {
			add("reading refs and changesets failed without ErrCorrupt: %s", errString(err))
		}
		return res
	}
	if want := ref.states[len(ref.states)-1]; !got.equal(want) {
		add("the store opened and read a different state without an error (undetected corruption): %s", got.diff(want))
		return res
	}
	for _, p := range ref.contentProblems(sn, got, true) {
		add("(%s) %s", p.claim, p.detail)
	}
	return res
}

// flipBit flips one bit, chosen by (seed, k), among the written bytes (up to
// the last non-zero byte) of the journal segments, loose objects, reflog
// and checkpoint, and returns where.
func flipBit(c *faultfs.MemFS, seed, k int64) (string, error) {
	type target struct {
		path string
		size int64
	}
	var ts []target
	var total int64
	for _, dir := range []string{storeDir + "/journal", storeDir + "/objects", storeDir + "/reflog", storeDir + "/checkpoint"} {
		err := afero.Walk(c, dir, func(p string, info fs.FileInfo, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if info.IsDir() || strings.HasSuffix(p, ".tmp") {
				return nil
			}
			data, err := afero.ReadFile(c, p)
			if err != nil {
				return err
			}
			n := int64(len(data))
			for n > 0 && data[n-1] == 0 {
				n--
			}
			if n > 0 {
				ts = append(ts, target{p, n})
				total += n
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	if total == 0 {
		return "", fmt.Errorf("no written bytes in journal, objects, reflog or checkpoint")
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].path < ts[j].path })
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(k)))
	pick := rng.Int64N(total)
	for _, t := range ts {
		if pick >= t.size {
			pick -= t.size
			continue
		}
		bit := byte(1) << rng.IntN(8)
		f, err := c.OpenFile(t.path, os.O_RDWR, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, pick); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		b[0] ^= bit
		if _, err := f.WriteAt(b, pick); err != nil {
			return "", err
		}
		if err := f.Sync(); err != nil {
			return "", err
		}
		return fmt.Sprintf("bit 0x%02x flipped in %s at offset %d", bit, t.path, pick), nil
	}
	return "", fmt.Errorf("flip target out of range")
}
