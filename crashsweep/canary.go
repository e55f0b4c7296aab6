package crashsweep

import (
	"context"
	"fmt"
	"strings"

	"github.com/swarmops/swarmops/internal/testknobs"
	"github.com/swarmops/swarmops/scenarios"
)

// Canary is one test-only weakening of the store that the sweep must catch.
type Canary struct {
	Name   string
	Weaken testknobs.Weakening
	Why    string
	// Sched marks a canary no sweep catches: only the interleavings of
	// the deterministic scheduler (crashsweep/sched) reach what it breaks.
	Sched bool
	// Part names the part (Parts) that catches the canary: it weakens a
	// path outside the store's scenarios, so the self-test runs that part
	// with it instead of the scenarios.
	Part string
}

// Canaries lists the weakenings of internal/testknobs the sweep must
// catch, by the name crashsim uses.
var Canaries = []Canary{
	{Name: "skip-datasync", Weaken: testknobs.SkipDatasync, Why: "never fdatasync the journal"},
	{Name: "ack-before-sync", Weaken: testknobs.AckBeforeSync, Why: "acknowledge a commit before its sync"},
	{Name: "skip-dirsync", Weaken: testknobs.SkipDirSync, Why: "skip the directory sync when a segment or loose object is created"},
	{Name: "skip-checksum", Weaken: testknobs.SkipChecksum, Why: "do not verify checksums on read or recovery"},
	{Name: "early-durable", Weaken: testknobs.EarlyDurable, Why: "publish the durable offset before the sync"},
	{Name: "skip-reflog-sync", Weaken: testknobs.SkipReflogSync, Why: "name a reflog chunk (older moves and their origins) in the checkpoint before it is durable"},
	{Name: "drop-protections", Weaken: testknobs.DropProtections, Why: "write checkpoints without the protected ref patterns"},
	{Name: "cas-if-exists", Weaken: testknobs.CASIfExists, Why: "a ref compare-and-swap checks the expected value only when the ref exists"},
	{Name: "land-no-ff", Weaken: testknobs.LandNoFastForward, Why: "Land merges where it should fast-forward"},
	{Name: "queue-skip-waiter", Weaken: testknobs.QueueSkipWaiter, Why: "a writer-queue waiter ignores the ticket just ahead of it, so a hand-off skips a waiter", Sched: true},
	{Name: "gc-ignores-leases", Weaken: testknobs.GCIgnoresLeases, Why: "gc keeps nothing for live leases (deletes a leased changeset)"},
	{Name: "update-trusts-stat", Weaken: testknobs.UpdateTrustsStat, Part: "worktree", Why: "a work tree's update records a merged file's stat data as clean, for theirs' object"},
	{Name: "dirs-record-untracked", Weaken: testknobs.DirsRecordUntracked, Part: "worktree", Why: "a work tree's walk records a directory that holds untracked names as holding only tracked ones, so later walks skip them"},
	{Name: "queue-two-frames", Weaken: testknobs.QueueTwoFrames, Part: "queue", Why: "the merge queue publishes its entries' outcomes in one frame and the target's move in another"},
	{Name: "export-trusts-map", Weaken: testknobs.ExportTrustsMap, Part: "export", Why: "an export builds on the commits its mapping file names without checking that git has them"},
}

// CanaryWorkloads are generated workloads the self-test sweeps besides
// its sample: the canaries cas-if-exists and land-no-ff break only what
// generated workloads reach (an undo that deletes main before a
// compare-and-swap expecting the base; a land that must fast-forward
// before a compare-and-swap on main), and a sample of four draws them
// too rarely.
var CanaryWorkloads = []string{"gen-adv1-undo-cas1x", "gen-adv1-land1-cas2"}

// CanaryName returns the name of a single canary ("" for none).
func CanaryName(w testknobs.Weakening) string {
	for _, c := range Canaries {
		if c.Weaken == w {
			return c.Name
		}
	}
	return ""
}

// ParseCanary maps a canary name to its weakening.
func ParseCanary(name string) (testknobs.Weakening, error) {
	var names []string
	for _, c := range Canaries {
		if c.Name == name {
			return c.Weaken, nil
		}
		names = append(names, c.Name)
	}
	return 0, fmt.Errorf("%w: unknown canary %q (known: %s)", ErrConfig, name, strings.Join(names, ", "))
}

// CanaryResult says whether a canary was caught, and by what.
type CanaryResult struct {
	Canary    Canary
	Caught    bool
	Violation *Violation // the first violation found
	Report    *Report
}

// SelfTest sweeps every scenario with each canary set and reports, per
// canary, the first violation that caught it. A canary that no violation
// catches means the sweep has lost its teeth for that durability rule.
//
// The unweakened store is swept first with the same configuration; its
// violations (if any) are the baseline, and a canary is caught only by a
// violation outside it. The baseline report is returned too: a self-test
// over a store that already fails proves less, and the caller says so.
func SelfTest(ctx context.Context, scs []*scenarios.Scenario, cfg Config) ([]CanaryResult, *Report, error) {
	base := cfg
	base.Weaken = 0
	base.Progress = nil
	baseline, err := Sweep(ctx, scs, base)
	if err != nil {
		return nil, nil, err
	}
	keys := map[string]bool{}
	for i := range baseline.Violations {
		keys[baseline.Violations[i].Key()] = true
	}
	var out []CanaryResult
	parts := map[string]map[string]bool{} // a part's baseline violations
	for _, c := range Canaries {
		if c.Part != "" {
			res, err := partCanary(ctx, c, parts)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, res)
			continue
		}
		cc := cfg
		cc.Weaken = c.Weaken
		cc.StopAtFirst = true
		cc.Baseline = keys
		rep, err := Sweep(ctx, scs, cc)
		if err != nil {
			return nil, nil, err
		}
		res := CanaryResult{Canary: c, Report: rep}
		for i := range rep.Violations {
			v := &rep.Violations[i]
			if v.Claim == "reference" || v.Claim == "determinism" {
				continue
			}
			res.Caught, res.Violation = true, v
			break
		}
		if !res.Caught && len(rep.Violations) > 0 {
			// Only reference-run failures: the canary broke the store so
			// badly the scenario cannot even run. That is caught too.
			res.Caught, res.Violation = true, &rep.Violations[0]
		}
		out = append(out, res)
	}
	return out, baseline, nil
}

// partCanary runs c's part with c set, after the part's correct run (its
// baseline, kept in parts), and says whether a violation outside the
// baseline caught c.
func partCanary(ctx context.Context, c Canary, parts map[string]map[string]bool) (CanaryResult, error) {
	p, err := ParsePart(c.Part)
	if err != nil {
		return CanaryResult{}, err
	}
	keys, ok := parts[c.Part]
	if !ok {
		base, err := p.Run(ctx, PartConfig{})
		if err != nil {
			return CanaryResult{}, err
		}
		keys = map[string]bool{}
		for i := range base.Violations {
			keys[base.Violations[i].Key()] = true
		}
		parts[c.Part] = keys
	}
	rep, err := p.Run(ctx, PartConfig{Weaken: c.Weaken, StopAtFirst: true})
	if err != nil {
		return CanaryResult{}, err
	}
	res := CanaryResult{Canary: c, Report: &Report{Points: rep.Points, States: rep.States, Elapsed: rep.Elapsed}}
	for i := range rep.Violations {
		if v := &rep.Violations[i]; !keys[v.Key()] {
			res.Caught, res.Violation = true, v
			break
		}
	}
	return res, nil
}
