package contention

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/crashsweep"
)

// gcAgent is one agent of the gc spec: every operation is one swarmops
// process, as an orchestrator's agents run them.
type gcAgent struct {
	store string
	w     int
	acked []string // every changeset a commit or land acknowledged
}

// run runs one swarmops command and returns its envelope; E_BUSY (the
// lock timeout, or a commit built again three times beside gc) is retried.
func (g *gcAgent) run(stdin string, args ...string) envelope {
	for {
		full := append([]string{"--store", g.store, "--json", "--lock-timeout", knobs.LockTimeout.String()}, args...)
		cmd := exec.Command(swarmopsBin, full...)
		cmd.Stdin = bytes.NewBufferString(stdin)
		cmd.Env = append(os.Environ(), "SWARMOPS_TEST_SEGMENT_SIZE=65536")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		var env envelope
		if err := json.Unmarshal(stdout.Bytes(), &env); err != nil {
			Fail(fmt.Sprintf("swarmops %v: no JSON envelope: stdout %q stderr %q", args, stdout.String(), stderr.String()))
		}
		if env.OK || env.Error.Code != "E_BUSY" {
			return env
		}
		Expect(env.Error.Retryable).To(BeTrue())
	}
}

func (g *gcAgent) id(env envelope, key string) string {
	var d map[string]any
	Expect(json.Unmarshal(env.Data, &d)).To(Succeed())
	s, _ := d[key].(string)
	return s
}

// work commits a chain on the agent's ref, lands it on main now and then,
// checks it out once (a lease on its head), and twice drops its ref and
// starts again from main, leaving garbage for gc.
func (g *gcAgent) work(rounds int, wt string) {
	defer GinkgoRecover()
	ref := fmt.Sprintf("a%02d", g.w)
	parent := "main"
	create := true
	for i := range rounds {
		args := []string{"commit", "-F", "-", "--parent", parent, "--advance", ref, "--agent", ref, "-m", fmt.Sprintf("%s %d", ref, i)}
		if create {
			args = append(args, "--create")
		}
		// The content cycles, so a commit after a dropped ref names blobs
		// of the dropped history by id: the race gc must not lose.
		env := g.run(fmt.Sprintf("put %s/f = \"agent %d value %d\\n\"\nput %s/n%d = \"%d\\n\"\n", ref, g.w, i%3, ref, i%4, i), args...)
		if !env.OK {
			// The parent was collected (its ref moved on and it was not
			// leased) or the ref moved: start again from main.
			Expect(env.Error.Code).To(BeElementOf("E_NOT_FOUND", "E_CONFLICT"), "commit: %s", env.Error.Message)
			parent, create = "main", false
			g.run("", "ref", "delete", ref)
			create = true
			continue
		}
		head := g.id(env, "id")
		g.acked = append(g.acked, head)
		parent, create = head, false
		switch {
		case i%4 == 3:
			if env := g.run("", "land", head, "--onto", "main", "--agent", ref); env.OK {
				g.acked = append(g.acked, g.id(env, "changeset"))
			}
		case i == 6:
			env := g.run("", "checkout", head, filepath.Join(wt, fmt.Sprint(i)))
			Expect(env.OK).To(BeTrue(), "checkout: %+v", env.Error)
		case i%6 == 5:
			g.run("", "ref", "delete", ref)
			parent, create = "main", true
		}
	}
}

var _ = Describe("gc beside agents", func() {
	It("runs 20 times while 32 processes commit, land and hold leases, and every acknowledged commit still reachable reads back", func() {
		dir := GinkgoT().TempDir()
		store := filepath.Join(dir, "store")
		first := &gcAgent{store: store}
		Expect(first.run("", "init").OK).To(BeTrue())
		Expect(first.run("put README = \"gc spec\\n\"\n", "commit", "-F", "-", "--advance", "main", "--create", "--root").OK).To(BeTrue())
		agents := make([]*gcAgent, knobs.Writers)
		var wg sync.WaitGroup
		for w := range agents {
			agents[w] = &gcAgent{store: store, w: w}
			wg.Add(1)
			go func() {
				defer wg.Done()
				agents[w].work(12, filepath.Join(dir, fmt.Sprintf("wt%02d", w)))
			}()
		}
		gcs := &gcAgent{store: store}
		var reports []string
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for range 20 {
				env := gcs.run("", "gc", "--retention", "0s")
				Expect(env.OK).To(BeTrue(), "gc: %+v", env.Error)
				reports = append(reports, string(env.Data))
				time.Sleep(50 * time.Millisecond)
			}
		}()
		wg.Wait()
		<-done
		AddReportEntry("last gc", reports[len(reports)-1])
		var segs, dropped, copied int
		for _, r := range reports {
			var d struct {
				Segments int `json:"segments_removed"`
				Dropped  int `json:"records_dropped"`
				Copied   int `json:"copied"`
			}
			Expect(json.Unmarshal([]byte(r), &d)).To(Succeed())
			segs, dropped, copied = segs+d.Segments, dropped+d.Dropped, copied+d.Copied
		}
		AddReportEntry("20 gcs", fmt.Sprintf("%d segments removed, %d index records dropped, %d objects copied forward", segs, dropped, copied))
		Expect(segs).To(BeNumerically(">", 0), "the spec must make gc reclaim segments")
		Expect(dropped).To(BeNumerically(">", 0), "the spec must make gc drop unreachable objects")

		s, err := core.Open(store, core.Options{})
		Expect(err).NotTo(HaveOccurred())
		defer s.Close()
		sn, err := s.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		var roots []core.ID
		refs, err := sn.Refs()
		Expect(err).NotTo(HaveOccurred())
		for _, r := range refs {
			roots = append(roots, r.ID)
		}
		leases, _, err := s.Leases()
		Expect(err).NotTo(HaveOccurred())
		for _, l := range leases {
			roots = append(roots, l.Roots...)
		}
		reach, err := crashsweep.Reachable(roots, func(id core.ID) ([]core.ID, error) {
			cs, err := sn.Changeset(id)
			if err != nil {
				return nil, fmt.Errorf("a root or its ancestry: %s: %w", id, err)
			}
			return cs.Parents, nil
		})
		Expect(err).NotTo(HaveOccurred())
		checked := 0
		for _, a := range agents {
			for _, h := range a.acked {
				id, err := objects.ParseID(h)
				Expect(err).NotTo(HaveOccurred())
				if !reach[id] {
					continue
				}
				files, err := sn.Flatten(id)
				Expect(err).NotTo(HaveOccurred(), "acknowledged, reachable %s", h)
				for p := range files {
					_, _, err := sn.ReadPath(id, p)
					Expect(err).NotTo(HaveOccurred(), "acknowledged, reachable %s: %s", h, p)
				}
				checked++
			}
		}
		AddReportEntry("acknowledged commits still reachable, read back", checked)
		Expect(checked).To(BeNumerically(">", knobs.Writers))
		vr, err := s.Verify(true, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(vr.Problems).To(BeEmpty())
	})
})
