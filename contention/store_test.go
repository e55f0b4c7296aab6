package contention

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/swarmops/swarmops/core/vfs"
)

// requireBusyControl is a reminder at the top of every measuring spec that
// the container's BeforeAll ran the E_BUSY control: a harness that cannot
// see a Busy when there is one proves nothing by reporting zero of them. The
// control runs in BeforeAll, not as a spec of its own, so that it also runs
// when a single spec is focused; if it fails, every spec fails.
func requireBusyControl() {}

// The store-level specs are one Ordered container because they share the
// E_BUSY control run once in BeforeAll (see requireBusyControl).
var _ = Describe("Store level (writer processes over the Go API)", Ordered, ContinueOnFailure, Serial, func() {
	BeforeAll(func() {
		By("the E_BUSY control: the spec holds the writer lock past a writer's timeout")
		f := newFixture()
		lock, err := vfs.OS().Lock(filepath.Join(f.dir, LockFile), 0)
		Expect(err).NotTo(HaveOccurred())
		const timeout = 300 * time.Millisecond
		args := []string{"-store", f.dir, "-id", "0", "-mode", ModeChain, "-count", "1",
			"-lock-timeout", timeout.String(), "-retry-busy=false", "-base", f.base.String(), "-out", filepath.Join(f.work, "w000.jsonl")}
		s, err := gexec.Start(exec.Command(writerBin, args...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(time.Minute).Should(gexec.Exit(3), "writer must stop on Busy (exit 3)")
		recs, err := ReadRecords(f.work)
		Expect(err).NotTo(HaveOccurred())
		var busy []Record
		for _, r := range recs {
			if r.Ev == EvOp && r.Err == ErrClassBusy {
				busy = append(busy, r)
			}
		}
		Expect(busy).To(HaveLen(1))
		Expect(time.Duration(busy[0].End-busy[0].Start)).To(BeNumerically(">=", timeout), "Busy came before the timeout")
		Expect(Summarize(recs, busy[0].Start).Busy).To(Equal(1), "the Busy counter")

		Expect(lock.Unlock()).To(Succeed())
		s, err = gexec.Start(exec.Command(writerBin, append(args[:len(args)-2], "-out", filepath.Join(f.work, "after.jsonl"))...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(time.Minute).Should(gexec.Exit(0), "once the lock is released the same commit succeeds")
		f.checkChains(&run{recs: mustRecords(filepath.Join(f.work, "after.jsonl"))}, 1, 1)
		AddReportEntry("E_BUSY control (store level)", fmt.Sprintf("Busy after %s with a %s timeout",
			time.Duration(busy[0].End-busy[0].Start).Round(time.Millisecond), timeout))
	})

	It("keeps every writer's private chain intact", func() {
		// C8 in hand-offs: nobody waits longer than one round of the
		// others. (At this size a bare flock passed too, with at most 19;
		// core/internal/lockq's TestServedInArrivalOrder is the check that
		// fails when the order is broken.)
		privateChains("processes", (*fixture).runProcesses)
	})

	var advanceRate float64

	It("lands every publish onto a shared main exactly once with commit --advance", func() {
		advanceRate = sharedMain("processes", "commit --advance", (*fixture).runProcesses, ModeAdvance)
	})

	It("lands every publish onto a shared main exactly once with commit then ref CAS", func() {
		refsetRate := sharedMain("processes", "commit then ref CAS", (*fixture).runProcesses, ModeRefSet)
		// Publishes per second, one transaction against two: reported, not
		// asserted (C8 is about fairness, not about this ratio).
		if advanceRate > 0 {
			msg := fmt.Sprintf("publishes/s: commit --advance %.1f, commit then CAS %.1f, ratio %.2f",
				advanceRate, refsetRate, advanceRate/refsetRate)
			GinkgoWriter.Println(msg)
			AddReportEntry("advance vs commit then CAS", msg)
		}
	})

	It("keeps every ref's CAS history linearizable, losers and reads included", func() {
		// Four refs keep about eight writers on each, which porcupine
		// checks whole in milliseconds (see SplitConflicts).
		fourRefs(procOpts{count: knobs.PerWriter}, "")
	})

	It("keeps ref CAS linearizable while writers are SIGKILLed mid-operation", func() {
		victims := min(3, knobs.Writers-1)
		fourRefs(procOpts{count: max(knobs.PerWriter, 4),
			kill: func(f *fixture, sessions []*gexec.Session) map[int]bool {
				killed := map[int]bool{}
				// Kill each victim once it is half-way, so it dies with
				// operations behind it and, most likely, one in flight.
				for v := 0; v < victims; v++ {
					Eventually(func() int {
						return countLines(f.recordFile(v), `"ev":"call"`)
					}).WithTimeout(runTimeout(knobs.Writers, knobs.PerWriter)).WithPolling(time.Millisecond).
						Should(BeNumerically(">=", max(knobs.PerWriter, 4)))
					Expect(sessions[v].Signal(syscall.SIGKILL)).NotTo(BeNil())
					killed[v] = true
				}
				return killed
			}}, fmt.Sprintf("%d killed, ", victims))
	})

	It("rejects the history of a deliberately broken, non-atomic CAS (negative control)", func() {
		requireBusyControl()
		f := newFixture()
		o := procOpts{mode: ModeRefSet, count: 5, ref: "main", brokenCAS: true}
		r := f.runProcesses(min(knobs.Writers, 8), o)
		res := f.linearizability(r, f.initialMain, false)
		Expect(res).To(HaveKeyWithValue("main", porcupine.Illegal),
			"a check-then-act CAS with 2 ms between check and act must produce a non-linearizable history")
	})

	Context("threads as processes (one Store handle per goroutine)", func() {
		It("keeps every goroutine's private chain intact", func() {
			privateChains("goroutines", (*fixture).runGoroutines)
		})

		It("lands every publish onto a shared main exactly once", func() {
			sharedMain("goroutines", "commit --advance", (*fixture).runGoroutines, ModeAdvance)
		})
	})

	Context("at full size", Label("slow"), func() {
		for _, mode := range []string{ModeChain, ModeAdvance} {
			It("serves "+mode+" writers in turn with no Busy", func() {
				requireBusyControl()
				f := newFixture()
				o := procOpts{mode: mode, count: knobs.SlowPerWriter, chainBase: mode == ModeChain}
				if mode == ModeAdvance {
					o.ref = "main"
				}
				r := f.runProcesses(knobs.Writers, o)
				if mode == ModeChain {
					f.checkChains(r, knobs.Writers, o.count)
				} else {
					f.checkPublishes(r, o, knobs.Writers)
				}
				report(fmt.Sprintf("processes, %s, %d × %d", mode, knobs.Writers, o.count), r)
				assertFair(r.summary, mode == ModeAdvance)
			})
		}
	})
})

// starter starts n writers with o: as processes or as goroutines.
type starter func(f *fixture, n int, o procOpts) *run

// privateChains runs knobs.Writers writers of kind through start, each on
// a chain of its own, and checks every chain intact and that no writer
// waited through more than one round of the others (C8).
func privateChains(kind string, start starter) {
	requireBusyControl()
	f := newFixture()
	o := procOpts{mode: ModeChain, count: knobs.PerWriter, chainBase: true}
	r := start(f, knobs.Writers, o)
	f.checkChains(r, knobs.Writers, o.count)
	report(fmt.Sprintf("%s, private chains, %d × %d", kind, knobs.Writers, o.count), r)
	Expect(r.summary.OvertakesMax).To(BeNumerically("<=", knobs.Writers), "acquisitions by other writers during one wait (C8)")
}

// sharedMain runs knobs.Writers writers of kind through start, publishing
// onto main by mode (described as how), and checks every publish landed
// exactly once and main's history linearizable; it returns the
// publishes per second.
func sharedMain(kind, how string, start starter, mode string) float64 {
	requireBusyControl()
	f := newFixture()
	o := procOpts{mode: mode, count: knobs.PerWriter, ref: "main"}
	r := start(f, knobs.Writers, o)
	f.checkPublishes(r, o, knobs.Writers)
	report(fmt.Sprintf("%s, shared main by %s, %d × %d", kind, how, knobs.Writers, o.count), r)
	f.expectLinearizable(r, f.initialMain, false)
	return float64(knobs.Writers*o.count) / r.summary.Wall.Seconds()
}

// fourRefs runs knobs.Writers writer processes publishing by commit then
// CAS onto four refs (o gives the count and any kills; killed names them
// for the report), and checks every acknowledged publish landed once and
// each ref's whole history linearizable.
func fourRefs(o procOpts, killed string) {
	requireBusyControl()
	f := newFixture()
	o.mode, o.ref, o.refs = ModeRefSet, "lin", 4
	r := f.runProcesses(knobs.Writers, o)
	for v := range r.killed {
		GinkgoWriter.Printf("killed writer %d\n", v)
	}
	f.checkPublishes(r, o, knobs.Writers)
	report(fmt.Sprintf("processes, 4 refs by commit then CAS, %s%d × %d", killed, knobs.Writers, o.count), r)
	f.expectLinearizable(r, func(string) string { return "" }, true)
}

// expectLinearizable expects every ref's history in r linearizable (see
// linearizability).
func (f *fixture) expectLinearizable(r *run, initial func(ref string) string, whole bool) {
	GinkgoHelper()
	for ref, res := range f.linearizability(r, initial, whole) {
		Expect(res).To(Equal(porcupine.Ok), "history of %s", ref)
	}
}

// assertFair checks C8: no Busy below the timeout; the slowest writer within
// 10 % of the fastest (target 5 %); and no writer overtaken by more than one
// round of the other writers while it waited, counted in hand-offs (plus one
// for the lone-writer fast path's single overtake). The wait in passes
// (wait ÷ mean hand-off) is reported, not asserted: with shared-ref
// workloads a mean hand-off averages cheap conflict passes with expensive
// publishes (about 72,000 lost attempts beside 32,000 publishes at
// 32 × 1,000), and on a shared 2-core machine it follows each hand-off's
// length, not the lock's order; the count is the order itself.
//
// With one shared ref (race), the spread is who wins the compare-and-swap
// races. A writer whose commit loses in the queue keeps its place there for
// its retry (core.Options.RetryPlace), so the races go to the writers in
// the order they first queued, and the shared ref is held to the chains'
// bound. If a loser retried from the back of the queue instead, the
// winner, who learns the new head first, would win again about four times
// in ten and spread the finishing times past that bound; so the winner's
// share of the next publish is asserted too, below a random draw's (one in
// 31). With kept places turned off (the constant core.DefaultRetryPlace set
// to -1), 32 × 300 fails both: spread 1.356, winner's share 0.552.
func assertFair(s Summary, race bool) {
	Expect(s.Busy).To(Equal(0), "Busy below the lock timeout (C8)")
	Expect(s.Spread).To(BeNumerically("<=", 1.10), "spread, slowest writer ÷ fastest (target 1.05)")
	Expect(s.OvertakesMax).To(BeNumerically("<=", s.Writers), "acquisitions by other writers during one wait vs one round of the others (C8)")
	if race {
		Expect(s.Repeats).To(BeNumerically("<", 1/float64(s.Writers-1)), "shared-ref publishes made by the winner of the one before (a random draw: one in %d)", s.Writers-1)
	}
}

func (f *fixture) initialMain(ref string) string {
	if ref == "main" {
		return f.base.String()
	}
	return ""
}

func mustRecords(name string) []Record {
	dir := GinkgoT().TempDir()
	b, err := os.ReadFile(name)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "r.jsonl"), b, 0o644)).To(Succeed())
	recs, err := ReadRecords(dir)
	Expect(err).NotTo(HaveOccurred())
	return recs
}

func countLines(name, substr string) int {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), substr)
}
