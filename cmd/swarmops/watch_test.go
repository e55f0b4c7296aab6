package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// lastSeq is the sequence number of the last move a watcher printed.
func (w *watcher) lastSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lines) == 0 {
		return 0
	}
	return uint64(w.lines[len(w.lines)-1]["seq"].(float64))
}

// waitForSeq waits until the watcher printed the move of frame seq.
func (w *watcher) waitForSeq(seq string) {
	GinkgoHelper()
	Eventually(func() []string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return seqRefs(w.lines)
	}, 30*time.Second, 10*time.Millisecond).Should(ContainElement(seq), "watch printed %v", w.raw)
}

// resumed checks that two watchers, the second started with --from the
// first's last move, printed together exactly the store's op log.
func resumed(e *env, w1, w2 *watcher) {
	GinkgoHelper()
	want := opLogOldestFirst(e)
	Expect(len(want)).To(BeNumerically(">", 0))
	w2.waitForSeq(want[len(want)-1])
	Expect(w2.stop()).To(Equal(0))
	got := append(seqRefs(w1.lines), seqRefs(w2.lines)...)
	Expect(got).To(Equal(want), "the two streams are not the op log, each move once")
}

var _ = Describe("watch across failures", func() {
	BeforeEach(func() {
		if throughServer {
			Skip("these specs start, kill and restart servers of their own")
		}
	})

	It("resumes with --from after its server is killed mid-stream and restarted: every move exactly once", func() {
		e := newStoreEnv()
		srv, _ := e.startServer()
		required := []string{"SWARMOPS_SERVER=required"}
		w1 := startWatchWith(e, required, "--json", "--from", "0")
		// One writer commits on main throughout, through the server when
		// one runs and by itself while none does (SWARMOPS_SERVER=auto).
		var wg sync.WaitGroup
		wg.Add(1)
		stopWriter := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopWriter:
					return
				default:
				}
				// A commit cut off by the server's death may or may not
				// have happened; the op log says which.
				e.run(fmt.Sprintf("put f = \"%d\"\n", i), "commit", "-F", "-", "--advance", "main", "--create", "--agent", "w")
			}
		}()
		w1.waitFor(10)
		Expect(srv.Process.Signal(syscall.SIGKILL)).To(Succeed())
		srv.Wait()
		Expect(w1.wait()).To(Equal(kindGone.Exit), "watch through a killed server: %v", w1.raw)
		Expect(w1.raw[len(w1.raw)-1]).To(ContainSubstring(`"code":"E_UNAVAILABLE"`))
		time.Sleep(100 * time.Millisecond) // commits go on without a server meanwhile
		srv, _ = e.startServer()
		defer func() {
			srv.Process.Signal(syscall.SIGTERM)
			srv.Wait()
		}()
		w2 := startWatchWith(e, required, "--json", "--from", fmt.Sprint(w1.lastSeq()))
		time.Sleep(300 * time.Millisecond)
		close(stopWriter)
		wg.Wait()
		resumed(e, w1, w2)
	})

	It("ends with E_UNAVAILABLE and where to resume when its server stops cleanly", func() {
		e := newStoreEnv()
		srv, _ := e.startServer()
		required := []string{"SWARMOPS_SERVER=required"}
		w := startWatchWith(e, required, "--json", "--from", "0")
		e.run("put f = \"1\"\n", "commit", "-F", "-", "--advance", "main", "--create")
		w.waitFor(1)
		Expect(srv.Process.Signal(syscall.SIGTERM)).To(Succeed())
		srv.Wait()
		Expect(w.wait()).To(Equal(kindGone.Exit), "watch through a stopped server: %v", w.raw)
		last := w.raw[len(w.raw)-1]
		Expect(last).To(ContainSubstring(`"code":"E_UNAVAILABLE"`))
		Expect(last).To(ContainSubstring(fmt.Sprintf(`"seq":%d`, w.lastSeq())))
	})

	It("resumes with --from after writers die mid-commit and the watch itself is killed", func() {
		e := newEnv()
		e.extra = append(e.extra, "SWARMOPS_SERVER=off")
		e.ok("", "init")
		w1 := startWatch(e, "--json", "--from", "0")
		// Four writers commit on refs of their own; some commit processes
		// are killed at a random moment, inside or before their commit.
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(k), 7))
				for i := range 12 {
					c := e.cmd(fmt.Sprintf("put f = \"%d\"\n", i), "commit", "-F", "-", "--advance", fmt.Sprintf("agent/%d", k), "--create", "--agent", fmt.Sprint(k))
					Expect(c.Start()).To(Succeed())
					if rng.IntN(3) == 0 {
						time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
						c.Process.Signal(syscall.SIGKILL)
					}
					c.Wait()
				}
			}()
		}
		w1.waitFor(8)
		Expect(w1.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		w1.wait()
		w2 := startWatch(e, "--json", "--from", fmt.Sprint(w1.lastSeq()))
		wg.Wait()
		resumed(e, w1, w2)
	})
})
