package crashsweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// PartFile is the File of a violation found by a part rather than a
// scenario.
const PartFile = "(part)"

// A Part is an in-process crash sweep of a path that no scenario file
// describes, because what it writes or how it decides is not a store
// operation: a work tree's files and index, the merge queue's runner. It
// runs its path over a faultfs.MemFS, crashed at every filesystem call in
// turn, and checks what each crash leaves with an oracle of its own. A
// part runs in-process, so the canaries of internal/testknobs reach it
// (the subprocess sweep runs a real binary, which cannot be weakened).
type Part struct {
	Name string
	What string
	run  func(ctx context.Context, pc *partRun) error
}

// Parts lists the parts, in the order --quick and --sweep run them.
var Parts = []Part{
	{Name: "worktree", What: "checkout, switch and update (a line merge, a conflict) of a work tree, with and without Sync", run: treePart},
	{Name: "queue", What: "a gated land of four queued changes, one failing the check: search, eject, publish", run: queuePart},
	{Name: "export", What: "an export to git over a mapping file that names a commit git lacks", run: exportPart},
}

// PartConfig says how to run a part.
type PartConfig struct {
	Weaken testknobs.Weakening
	// At, when positive, crashes only at that call of each of the
	// part's operations.
	At int64
	// StopAtFirst ends the part at its first violation (the self-test).
	StopAtFirst bool
}

// PartReport is what one part checked and found.
type PartReport struct {
	Part       string        `json:"part"`
	Points     int64         `json:"crash_points"`
	States     int64         `json:"states_checked"`
	Violations []Violation   `json:"violations"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	// Skipped says why the part did not run ("" when it did).
	Skipped string `json:"skipped,omitempty"`
}

// ParsePart finds a part by name.
func ParsePart(name string) (Part, error) {
	var names []string
	for _, p := range Parts {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Part{}, fmt.Errorf("%w: unknown part %q (known: %s)", ErrConfig, name, strings.Join(names, ", "))
}

// Run sweeps the part. It returns an error only when the part cannot be
// set up; everything the code under test does wrong is a Violation.
func (p Part) Run(ctx context.Context, cfg PartConfig) (*PartReport, error) {
	start := time.Now()
	pc := &partRun{ctx: ctx, cfg: cfg, rep: &PartReport{Part: p.Name}}
	err := p.run(ctx, pc)
	if err == errStop {
		err = nil
	}
	pc.rep.Elapsed = time.Since(start)
	return pc.rep, err
}

// errStop ends a part at its first violation (PartConfig.StopAtFirst).
var errStop = fmt.Errorf("crashsweep: stop at the first violation")

// partRun is one run of a part: its configuration and its report.
type partRun struct {
	ctx context.Context
	cfg PartConfig
	rep *PartReport
}

// violation records a finding of the part's operation op at crash point
// at (0: the uncrashed run) under model.
func (pc *partRun) violation(claim, op string, at int64, model, format string, a ...any) error {
	v := Violation{Claim: claim, Scenario: pc.rep.Part, File: PartFile, At: at, Model: model,
		Canary: CanaryName(pc.cfg.Weaken), Detail: op + ": " + fmt.Sprintf(format, a...)}
	if at == 0 {
		v.At, v.Detail = -1, op+" (uncrashed): "+fmt.Sprintf(format, a...)
	}
	pc.rep.Violations = append(pc.rep.Violations, v)
	if pc.cfg.StopAtFirst {
		return errStop
	}
	return nil
}

// everyCall runs op on a process-crash clone of base crashed at call
// n = 1, 2, … (only PartConfig.At when set) until a run completes, and
// hands each crashed clone to check. op must fail with vfs.ErrCrashed
// once a call fails, or complete. It returns the number of points.
func (pc *partRun) everyCall(name string, base *faultfs.MemFS, op func(vfs.FS) error, check func(at int64, m *faultfs.MemFS) error) error {
	return pc.eachPoint(func(n int64) (bool, error) {
		m := base.CrashClone(faultfs.ProcessCrash, 0)
		err := op(faultfs.NewCrashing(m, n))
		if err == nil {
			return true, nil // n is past the last call: the run completed
		}
		pc.rep.Points++
		if !isCrashed(err) {
			return false, pc.violation("C9", name, n, "process", "failed with %v, not with the crash", err)
		}
		return false, check(n, m)
	})
}

// eachPoint calls try with the crash points n = 1, 2, … (only
// PartConfig.At when set) until try reports the run completed (n is past
// its last call) or fails, or the context ends.
func (pc *partRun) eachPoint(try func(n int64) (completed bool, err error)) error {
	for n := int64(1); ; n++ {
		if err := pc.ctx.Err(); err != nil {
			return err
		}
		if pc.cfg.At > 0 && n != pc.cfg.At {
			if n > pc.cfg.At {
				return nil
			}
			continue
		}
		if completed, err := try(n); completed || err != nil {
			return err
		}
	}
}

// isCrashed reports whether err comes from the crash (vfs.ErrCrashed
// anywhere in its chain, or in its text when a layer flattened it).
func isCrashed(err error) bool {
	return err != nil && (errors.Is(err, vfs.ErrCrashed) || strings.Contains(err.Error(), vfs.ErrCrashed.Error()))
}
