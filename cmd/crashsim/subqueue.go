package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/crashsweep"
)

// The merge-queue part of the subprocess sweep crashes `swarmops land
// --check` while it runs a batch of four queued lands onto main, one of
// which fails the check: the batch fails, is searched, three land and one
// is ejected. Three entries are queued by `ref create queue/main/N` (an
// entry is an ordinary ref: what an agent that queued and then died
// leaves), the fourth by the crashed command itself. The check logs every
// tip it passes. After each crash (process model, real OS):
//
//   - every value main took is the base or a tip the check passed on: the
//     queue never publishes an untested tree;
//   - running the land again, uncrashed, lands: main then holds exactly
//     the three good changes, no entry is left pending, and main's history
//     still holds only checked tips: no landed change is lost, and no
//     crash makes the queue forget an entry;
//   - verify --deep is clean.

// queueChanges are the four changes, in queue order; "bad" breaks the check.
var queueChanges = []struct{ label, file string }{
	{"Q1", "g1.txt"}, {"Q2", "g2.txt"}, {"QBAD", "BAD-q"}, {"Q3", "g3.txt"},
}

// queueCheck is the check of a point whose files live under root.
func queueCheck(root string) string {
	return fmt.Sprintf(`if ls | grep -q '^BAD'; then echo bad; exit 1; fi; echo "$SWARMOPS_CHECK_TIP" >> %q`, filepath.Join(root, "passed.log"))
}

// queueSweep sets the queue up under tmp, crashes the gated land at every
// stride-th call, and returns the points crashed and the violations.
func (e *cliEnv) queueSweep(ctx context.Context, tmp string, stride, workers int64) (int, []string, error) {
	base, err := e.queueSetup(ctx, tmp)
	if err != nil {
		return 0, nil, err
	}
	args := func(root string) []string {
		return []string{"land", e.labels["Q3"], "--onto", "main", "--check", queueCheck(root)}
	}
	done := filepath.Join(tmp, "queue-done")
	if err := crashsweep.CopyTree(base, done); err != nil {
		return 0, nil, err
	}
	if r, err := e.run(ctx, filepath.Join(done, "store"), 0, "", args(done)...); err != nil || !r.env.OK {
		return 0, nil, fmt.Errorf("queue sweep: the uncrashed land failed: %v %s", err, r.outOr())
	}
	want := []string{"README", "g1.txt", "g2.txt", "g3.txt"}
	if vs := queueOracle(done, want); len(vs) > 0 {
		return 0, nil, fmt.Errorf("queue sweep: the uncrashed land: %s", strings.Join(vs, "; "))
	}
	return crashEveryCall(ctx, stride, workers, "land --check", "`swarmops land --check`", "the merge-queue part",
		func(at int64) ([]string, bool, error) { return e.queuePoint(ctx, tmp, base, want, args, at) })
}

// queueSetup makes the store: main at a base, four changes on it, the
// first three queued for main.
func (e *cliEnv) queueSetup(ctx context.Context, tmp string) (string, error) {
	base := filepath.Join(tmp, "queue-base")
	store := filepath.Join(base, "store")
	step := func(label, stdin string, args ...string) error {
		r, err := e.run(ctx, store, 0, stdin, args...)
		if err != nil || !r.env.OK {
			return fmt.Errorf("queue sweep setup %v: %v %s", args, err, r.outOr())
		}
		if label != "" {
			var d struct{ ID string }
			if err := jsonData(r, &d); err != nil {
				return err
			}
			e.labels[label] = d.ID
		}
		return nil
	}
	if err := step("", "", "init"); err != nil {
		return "", err
	}
	if err := step("QBASE", "put README = \"project\\n\"\n", "commit", "-F", "-", "--advance", "main"); err != nil {
		return "", err
	}
	for i, c := range queueChanges {
		if err := step(c.label, fmt.Sprintf("put %s = \"x\\n\"\n", c.file), "commit", "-F", "-", "--parent", "main", "-m", c.label); err != nil {
			return "", err
		}
		if i < 3 {
			if err := step("", "", "ref", "create", fmt.Sprintf("queue/main/%020d", i+1), e.labels[c.label]); err != nil {
				return "", err
			}
		}
	}
	return base, nil
}

// queuePoint copies the set-up store, crashes the gated land at call at,
// checks what it left, lands again uncrashed and checks the result.
func (e *cliEnv) queuePoint(ctx context.Context, tmp, base string, want []string, args func(string) []string, at int64) ([]string, bool, error) {
	work, done, vs, err := e.crashCopy(ctx, tmp, "queue-point-", base, args, at, 0)
	defer os.RemoveAll(work)
	if done || vs != nil || err != nil {
		return vs, done, err
	}
	store := filepath.Join(work, "store")
	vs = queueOracle(work, nil)
	r, err := e.run(ctx, store, 0, "", args(work)...)
	if err != nil {
		return nil, false, err
	}
	if !r.env.OK {
		return append(vs, fmt.Sprintf("the land run again after the crash failed: %s", r.out)), false, nil
	}
	for _, v := range queueOracle(work, want) {
		vs = append(vs, "after the land run again: "+v)
	}
	if r, err = e.run(ctx, store, 0, "", "verify", "--deep"); err != nil {
		return nil, false, err
	}
	if !r.env.OK {
		vs = append(vs, fmt.Sprintf("verify --deep: %s", r.out))
	}
	return vs, false, nil
}

// queueOracle checks the store under root: every value main took after
// its first is a tip the check logged as passed; with want, main's tree
// holds exactly those paths and no entry is pending.
func queueOracle(root string, want []string) []string {
	return inCrashedStore(filepath.Join(root, "store"), "the store does not open: ", func(_ *core.Store, sn *core.Snapshot) []string {
		return queueChecks(root, sn, want)
	})
}

// queueChecks are queueOracle's checks of a snapshot of the store.
func queueChecks(root string, sn *core.Snapshot, want []string) []string {
	b, _ := os.ReadFile(filepath.Join(root, "passed.log"))
	passed := strings.Fields(string(b))
	moves, err := sn.RefLog("main")
	if err != nil {
		return []string{"main's log: " + err.Error()}
	}
	var vs []string
	for _, m := range moves[1:] {
		if !slices.Contains(passed, m.New.String()) {
			vs = append(vs, fmt.Sprintf("main moved to %s, a tree no check passed", m.New))
		}
	}
	if want == nil {
		return vs
	}
	refs, err := sn.Refs()
	if err != nil {
		return append(vs, err.Error())
	}
	for _, r := range refs {
		if strings.HasPrefix(r.Name, "queue/") {
			vs = append(vs, fmt.Sprintf("entry %s is still pending", r.Name))
		}
	}
	head, err := sn.Ref("main")
	if err != nil {
		return append(vs, err.Error())
	}
	flat, err := sn.Flatten(head)
	if err != nil {
		return append(vs, err.Error())
	}
	var got []string
	for p := range flat {
		got = append(got, p)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		vs = append(vs, fmt.Sprintf("main holds %v, want %v", got, want))
	}
	return vs
}

// inCrashedStore opens the store a crash left and runs check on it and a
// snapshot of it; a store that does not open (openFail, then why) or gives
// no snapshot is the one violation.
func inCrashedStore(store, openFail string, check func(s *core.Store, sn *core.Snapshot) []string) []string {
	s, err := core.Open(store, core.Options{})
	if err != nil {
		return []string{openFail + err.Error()}
	}
	defer s.Close()
	sn, err := s.Snapshot()
	if err != nil {
		return []string{err.Error()}
	}
	return check(s, sn)
}

// jsonData decodes a result's data into v.
func jsonData(r *cliResult, v any) error {
	if err := json.Unmarshal(r.env.Data, v); err != nil {
		return fmt.Errorf("data of %s: %w", r.out, err)
	}
	return nil
}
