package contention

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
)

// startServer starts `swarmops serve` on the fixture's store and waits
// until it says it is ready.
func startServer(bin, store string) *exec.Cmd {
	GinkgoHelper()
	cmd := exec.Command(bin, "--store", store, "--json", "serve")
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	line, err := bufio.NewReader(out).ReadString('\n')
	Expect(err).NotTo(HaveOccurred(), "serve did not report ready")
	Expect(line).To(ContainSubstring(`"ok":true`))
	return cmd
}

// The CLI specs again with every command going through one server
// (SWARMOPS_SERVER=required): the same invariants must hold, and the
// server's one commit pipeline is what the agents share.
var _ = Describe("CLI level through a server (swarmops serve)", Ordered, ContinueOnFailure, Serial, func() {

	serve := func(f *fixture) {
		srv := startServer(swarmopsBin, f.dir)
		DeferCleanup(func() {
			srv.Process.Signal(syscall.SIGTERM)
			Expect(srv.Wait()).To(Succeed(), "serve stops cleanly on SIGTERM")
		})
	}

	It("keeps every agent's private chain intact", func() {
		r := cliSpec("CLI through a server", "private chains", serve, ModeChain, knobs.CLIPerWriter)
		Expect(r.summary.Busy).To(Equal(0), "E_BUSY through the server")
	})

	It("lands racing changes onto main, each exactly once", func() {
		r := cliSpec("CLI through a server", "land races onto main", serve, modeLand, knobs.CLIPerWriter)
		Expect(r.summary.Busy).To(Equal(0), "E_BUSY from land races through the server")
	})

	It("keeps every acknowledged commit while the server is SIGKILLed and restarted, and its clients carry on by themselves", func() {
		f := newFixture()
		count := knobs.CLIPerWriter * 3
		var (
			mu      sync.Mutex
			srv     = startServer(swarmopsBin, f.dir)
			stop    = make(chan struct{})
			kills   atomic.Int64
			stopped = make(chan struct{})
		)
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			rng := rand.New(rand.NewSource(GinkgoRandomSeed()))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(50+rng.Intn(150)) * time.Millisecond):
				}
				mu.Lock()
				srv.Process.Signal(syscall.SIGKILL)
				srv.Wait()
				kills.Add(1)
				time.Sleep(time.Duration(rng.Intn(50)) * time.Millisecond)
				srv = startServer(swarmopsBin, f.dir)
				mu.Unlock()
			}
		}()
		acked := make([][]core.ID, knobs.Writers)
		unavailable := atomic.Int64{}
		var wg sync.WaitGroup
		for w := 0; w < knobs.Writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer GinkgoRecover()
				acked[w] = stormAgent(swarmopsBin, f.dir, w, count, f.base, &unavailable)
			}()
		}
		wg.Wait()
		close(stop)
		<-stopped
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
		Expect(kills.Load()).To(BeNumerically(">", 0), "the storm killed no server")

		st, err := core.Open(f.dir, core.Options{})
		Expect(err).NotTo(HaveOccurred())
		defer st.Close()
		rep, err := st.Verify(true, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Problems).To(BeEmpty(), "verify --deep after the storm")
		sn, err := st.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		for w, ids := range acked {
			Expect(ids).To(HaveLen(count), "writer %d acknowledged commits", w)
			head, err := sn.Ref(fmt.Sprintf("agent/w%03d", w))
			Expect(err).NotTo(HaveOccurred())
			log, err := sn.Log(head, 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(log).To(HaveLen(count+1), "writer %d's chain: every acknowledged commit, once, then the base", w)
			for i, id := range ids {
				Expect(log[count-1-i]).To(Equal(id), "writer %d commit %d on its chain", w, i)
			}
		}
		AddReportEntry("server SIGKILL storm", fmt.Sprintf("%d writers × %d commits, %d server kills, %d E_UNAVAILABLE answers retried; every acknowledged commit on its chain, verify --deep clean",
			knobs.Writers, count, kills.Load(), unavailable.Load()))
	})
})

// runCLIEnv is runCLI with extra environment for every agent's commands.
func (f *fixture) runCLIEnv(bin string, writers, count int, mode string, env []string) *run {
	cliEnv = env
	defer func() { cliEnv = nil }()
	return f.runCLI(bin, writers, count, mode)
}

// cliEnv is the extra environment of the CLI agents' commands.
var cliEnv []string

// stormAgent commits count changes onto its own ref agent/wNNN through a
// server that is killed and restarted under it (SWARMOPS_SERVER=required:
// every command must go through a server). E_UNAVAILABLE means the
// outcome is unknown: the agent reads its ref, and a head that carries the
// attempt's message is the commit acknowledged after all; otherwise it
// tries again. It returns its acknowledged commits in order.
func stormAgent(bin, store string, w, count int, base core.ID, unavailable *atomic.Int64) []core.ID {
	ref := fmt.Sprintf("agent/w%03d", w)
	run := func(stdin string, args ...string) envelope {
		for {
			cmd := exec.Command(bin, append([]string{"--store", store, "--json"}, args...)...)
			cmd.Env = append(os.Environ(), "SWARMOPS_SERVER=required")
			cmd.Stdin = bytes.NewBufferString(stdin)
			out, _ := cmd.Output()
			var env envelope
			Expect(json.Unmarshal(out, &env)).To(Succeed(), "swarmops %v: %q", args, out)
			if !env.OK && env.Error.Code == "E_UNAVAILABLE" && env.Error.Retryable {
				unavailable.Add(1)
				if len(args) > 0 && args[0] == "commit" {
					return env // the caller decides: the commit may have happened
				}
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return env
		}
	}
	var ids []core.ID
	parent := base
	for i := 0; i < count; {
		msg := Message(w, i)
		args := []string{"commit", "-F", "-", "--parent", parent.String(), "--advance", ref, "-m", msg, "--agent", "w" + strconv.Itoa(w)}
		if i == 0 {
			args = append(args, "--create")
		}
		env := run(changeList(w, i, 0), args...)
		var id core.ID
		switch {
		case env.OK:
			var d struct {
				ID string `json:"id"`
			}
			Expect(json.Unmarshal(env.Data, &d)).To(Succeed())
			id = mustID(d.ID)
		case env.Error.Code == "E_UNAVAILABLE":
			// Unknown outcome: look. A head past the parent whose message
			// is this attempt's is the commit, acknowledged now.
			got := run("", "ref", "get", ref)
			if !got.OK {
				continue
			}
			var d struct {
				ID string `json:"id"`
			}
			Expect(json.Unmarshal(got.Data, &d)).To(Succeed())
			head := mustID(d.ID)
			if head == parent {
				continue
			}
			show := run("", "show", head.String(), "--name-status")
			Expect(show.OK).To(BeTrue())
			var cs struct {
				Message string `json:"message"`
			}
			Expect(json.Unmarshal(show.Data, &cs)).To(Succeed())
			Expect(cs.Message).To(Equal(msg), "writer %d: its ref moved to a changeset it did not make", w)
			id = head
		default:
			Fail(fmt.Sprintf("writer %d commit %d: %s: %s", w, i, env.Error.Code, env.Error.Message))
		}
		ids = append(ids, id)
		parent = id
		i++
	}
	return ids
}
