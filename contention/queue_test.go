package contention

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
)

// gatedCheck is a check that fails while the tree holds a marker file
// (BAD-*), printing the marker, after sleeping sleep; every tip it passes
// is appended to log, so a spec can hold the target's history against it.
func gatedCheck(sleep, log string) string {
	return fmt.Sprintf(`sleep %s; if ls | grep '^BAD-'; then echo "marker found" >&2; exit 1; fi; echo "$SWARMOPS_CHECK_TIP" >> %q`, sleep, log)
}

// gatedResult is what one agent's land --check answered.
type gatedResult struct {
	change string
	code   string // "" when it landed
	output string
	exit   int
	batch  int
}

// swarmopsJSON runs the CLI with --json and decodes its envelope into an
// E (a map, or the envelope struct).
func swarmopsJSON[E any](bin, store, stdin string, args ...string) (E, error) {
	full := append([]string{"--store", store, "--json", "--lock-timeout", knobs.LockTimeout.String()}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	_ = cmd.Run()
	var env E
	if err := json.Unmarshal(out.Bytes(), &env); err != nil {
		return env, fmt.Errorf("swarmops %v: no JSON envelope: %q", args, out.String())
	}
	return env, nil
}

// gatedCommit commits agent w's own file on base (and a marker file when
// bad) and returns the change's id.
func gatedCommit(bin, store, base string, w int, bad bool) (string, error) {
	list := fmt.Sprintf("put agents/w%02d.txt = \"agent %d\\n\"\n", w, w)
	if bad {
		list += fmt.Sprintf("put BAD-w%02d = \"breaks the check\\n\"\n", w)
	}
	for {
		env, err := swarmopsJSON[map[string]any](bin, store, list, "commit", "-F", "-", "--parent", base, "-m", fmt.Sprintf("agent %d", w))
		if err != nil {
			return "", err
		}
		if env["ok"] == true {
			return env["data"].(map[string]any)["id"].(string), nil
		}
		if e := env["error"].(map[string]any); e["code"] != "E_BUSY" {
			return "", fmt.Errorf("agent %d commit: %v", w, e)
		}
	}
}

// gatedLand lands change onto main through the queue, again on E_BUSY.
func gatedLand(bin, store, change, check string) (gatedResult, error) {
	for {
		env, err := swarmopsJSON[map[string]any](bin, store, "", "land", change, "--onto", "main", "--check", check)
		if err != nil {
			return gatedResult{}, err
		}
		r := gatedResult{change: change}
		if env["ok"] == true {
			r.batch = int(env["data"].(map[string]any)["batch"].(float64))
			return r, nil
		}
		e := env["error"].(map[string]any)
		if r.code = e["code"].(string); r.code == "E_BUSY" {
			continue
		}
		if out, ok := e["output"].(string); ok {
			r.output, r.exit = out, int(e["exit_status"].(float64))
		}
		return r, nil
	}
}

// gatedStore makes a store whose main holds one file and returns main.
func gatedStore(store string) (string, error) {
	st, err := core.Create(store, core.Options{})
	if err != nil {
		return "", err
	}
	base, err := st.Commit(core.CommitRequest{Changes: []core.Change{{Path: "README", Data: []byte("project\n")}},
		Agent: "spec", Message: "base", Advance: "main"})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return base.String(), err
}

// landAll lands changes concurrently (together) or one after another,
// and returns the answers in the order of changes and the wall time.
func landAll(bin, store string, changes []string, check string, together bool) ([]gatedResult, []error, time.Duration) {
	res := make([]gatedResult, len(changes))
	errs := make([]error, len(changes))
	start := time.Now()
	if !together {
		for i, c := range changes {
			res[i], errs[i] = gatedLand(bin, store, c, check)
		}
		return res, errs, time.Since(start)
	}
	var wg sync.WaitGroup
	for i, c := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = gatedLand(bin, store, c, check)
		}()
	}
	wg.Wait()
	return res, errs, time.Since(start)
}

var _ = Describe("Gated lands (land --check)", Serial, func() {

	It("eject the changes that fail the check, with its output, and land the rest, from concurrent agent processes", func() {
		n := knobs.QueueAgents
		bad := map[int]bool{1: true, n - 2: true}
		root := GinkgoT().TempDir()
		store, log := filepath.Join(root, "store"), filepath.Join(root, "passed.log")
		base, err := gatedStore(store)
		Expect(err).NotTo(HaveOccurred())
		changes := make([]string, n)
		for w := 0; w < n; w++ {
			changes[w], err = gatedCommit(swarmopsBin, store, base, w, bad[w])
			Expect(err).NotTo(HaveOccurred())
		}
		res, errs, wall := landAll(swarmopsBin, store, changes, gatedCheck("0.2", log), true)
		Expect(errs).To(HaveEach(BeNil()))
		batches := []int{}
		for w, r := range res {
			if bad[w] {
				Expect(r.code).To(Equal("E_CHECK_FAILED"), "agent %d's land", w)
				Expect(r.exit).To(Equal(1))
				Expect(r.output).To(ContainSubstring(fmt.Sprintf("BAD-w%02d", w)), "the check's output names the marker")
				Expect(r.output).To(ContainSubstring("marker found"))
				continue
			}
			Expect(r.code).To(BeEmpty(), "agent %d's land", w)
			batches = append(batches, r.batch)
		}
		sort.Ints(batches)
		AddReportEntry("gated lands", fmt.Sprintf("%d agents, 2 ejected, batch sizes of the landed %v, wall %v", n, batches, wall.Round(time.Millisecond)))
		Expect(batches[len(batches)-1]).To(BeNumerically(">", 1), "no frame landed more than one agent's change: the queue did not batch across processes")

		st, err := core.Open(store, core.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		sn, err := st.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		head, err := sn.Ref("main")
		Expect(err).NotTo(HaveOccurred())
		flat, err := sn.Flatten(head)
		Expect(err).NotTo(HaveOccurred())
		want := []string{"README"}
		for w := 0; w < n; w++ {
			if !bad[w] {
				want = append(want, fmt.Sprintf("agents/w%02d.txt", w))
			}
		}
		got := []string{}
		for p := range flat {
			got = append(got, p)
		}
		Expect(got).To(ConsistOf(want), "main's final tree holds exactly the landed agents' files")

		passed, err := os.ReadFile(log)
		Expect(err).NotTo(HaveOccurred())
		moves, err := sn.RefLog("main")
		Expect(err).NotTo(HaveOccurred())
		for _, m := range moves[1:] {
			Expect(strings.Fields(string(passed))).To(ContainElement(m.New.String()), "main moved to a tree no check passed")
		}
		refs, err := sn.Refs()
		Expect(err).NotTo(HaveOccurred())
		for _, r := range refs {
			Expect(r.Name).NotTo(HavePrefix("queue"), "a queue ref left behind")
		}
	})
})
