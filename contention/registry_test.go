package contention

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
)

// registryFile is the shared registry of n slots, slot k holding edits[k]
// or "free". Every slot line is followed by a fixed separator line: git's
// merge rules (and core/textmerge's) conflict on edits of two adjacent
// lines, so agents that each edit their own slot merge cleanly only when
// at least one unchanged line lies between any two slots.
func registryFile(n int, edits map[int]string) string {
	var b strings.Builder
	for k := 0; k < n; k++ {
		v, ok := edits[k]
		if !ok {
			v = "free"
		}
		fmt.Fprintf(&b, "slot %02d: %s\n--\n", k, v)
	}
	return b.String()
}

// registryAgent is one agent process's work: commit its slot's edit and a
// file of its own on the base, then land it onto main, again on E_BUSY.
// It returns the number of E_CONFLICT answers and any other failure.
func registryAgent(bin, store, base string, n, w int) (conflicts int, err error) {
	run := func(stdin string, args ...string) (envelope, error) {
		return swarmopsJSON[envelope](bin, store, stdin, args...)
	}
	list := fmt.Sprintf("put registry.txt = %q\nput agents/w%02d.txt = %q\n",
		registryFile(n, map[int]string{w: fmt.Sprintf("agent %d was here", w)}), w, fmt.Sprintf("agent %d's own file\n", w))
	var env envelope
	for {
		if env, err = run(list, "commit", "-F", "-", "--parent", base, "--agent", fmt.Sprintf("w%d", w), "-m", fmt.Sprintf("slot %d", w)); err != nil {
			return conflicts, err
		}
		if env.OK || env.Error.Code != "E_BUSY" {
			break
		}
	}
	if !env.OK {
		return conflicts, fmt.Errorf("agent %d commit: %s: %s", w, env.Error.Code, env.Error.Message)
	}
	var c struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(env.Data, &c); err != nil {
		return conflicts, err
	}
	for {
		if env, err = run("", "land", c.ID, "--onto", "main", "--agent", fmt.Sprintf("w%d", w)); err != nil {
			return conflicts, err
		}
		switch {
		case env.OK:
			return conflicts, nil
		case env.Error.Code == "E_CONFLICT":
			return conflicts + 1, fmt.Errorf("agent %d land: %s", w, env.Error.Message)
		case env.Error.Code != "E_BUSY":
			return conflicts, fmt.Errorf("agent %d land: %s: %s", w, env.Error.Code, env.Error.Message)
		}
	}
}

var _ = Describe("A shared registry file", Serial, func() {

	It("takes every agent's own line when they land concurrently: 0 conflicts, all edits in the final file", func() {
		n := knobs.Writers
		root := GinkgoT().TempDir()
		store := filepath.Join(root, "store")
		st, err := core.Create(store, core.Options{})
		Expect(err).NotTo(HaveOccurred())
		base, err := st.Commit(core.CommitRequest{
			Changes: []core.Change{{Path: "registry.txt", Data: []byte(registryFile(n, nil))}},
			Agent:   "spec", Message: "the registry", Advance: "main",
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Close()).To(Succeed())

		gate := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		conflicts, failures := 0, []string{}
		for w := 0; w < n; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				c, err := registryAgent(swarmopsBin, store, base.String(), n, w)
				mu.Lock()
				defer mu.Unlock()
				conflicts += c
				if err != nil {
					failures = append(failures, err.Error())
				}
			}()
		}
		start := time.Now()
		close(gate)
		wg.Wait()
		wall := time.Since(start)
		AddReportEntry("registry lands", fmt.Sprintf("%d agents, %d conflicts, wall %v", n, conflicts, wall.Round(time.Millisecond)))
		Expect(conflicts).To(Equal(0), "E_CONFLICT answers; failures: %v", failures)
		Expect(failures).To(BeEmpty())

		st, err = core.Open(store, core.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(st.Close)
		sn, err := st.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		head, err := sn.Ref("main")
		Expect(err).NotTo(HaveOccurred())
		all := map[int]string{}
		for w := 0; w < n; w++ {
			all[w] = fmt.Sprintf("agent %d was here", w)
			own, _, err := sn.ReadPath(head, fmt.Sprintf("agents/w%02d.txt", w))
			Expect(err).NotTo(HaveOccurred(), "agent %d's own file on main", w)
			Expect(string(own)).To(Equal(fmt.Sprintf("agent %d's own file\n", w)))
		}
		reg, _, err := sn.ReadPath(head, "registry.txt")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(reg)).To(Equal(registryFile(n, all)), "the registry on main holds every agent's edit")
		log, err := sn.Log(head, n+2)
		Expect(err).NotTo(HaveOccurred())
		Expect(log).To(HaveLen(n+1), "main's first-parent log: one changeset per land, then the base")
	})
})
