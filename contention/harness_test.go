package contention

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/swarmops/swarmops/core"
)

// fixture is a fresh store with a base changeset on main, and what it held
// before any writer ran.
type fixture struct {
	dir        string // the store
	work       string // barrier files and reports
	base       core.ID
	seq0       uint64 // journal sequence number after setup
	changeset0 int64  // changesets after setup
}

func newFixture() *fixture {
	root := GinkgoT().TempDir()
	f := &fixture{dir: filepath.Join(root, "store"), work: filepath.Join(root, "work")}
	Expect(os.Mkdir(f.work, 0o755)).To(Succeed())
	st, err := core.Create(f.dir, core.Options{})
	Expect(err).NotTo(HaveOccurred())
	f.base, err = st.Commit(core.CommitRequest{
		Changes: []core.Change{{Path: "README", Data: []byte("base\n")}},
		Agent:   "spec", Message: "base", Advance: "main",
	})
	Expect(err).NotTo(HaveOccurred())
	info, err := st.Info()
	Expect(err).NotTo(HaveOccurred())
	f.seq0, f.changeset0 = info.DurableSeq, info.Changesets
	Expect(st.Close()).To(Succeed())
	return f
}

// run is the outcome of one contention run.
type run struct {
	goNS    int64
	stopNS  int64
	recs    []Record
	killed  map[int]bool
	summary Summary
}

// procOpts describe how the writer processes of one run are started.
type procOpts struct {
	mode      string
	count     int
	ref       string
	refs      int
	brokenCAS bool
	chainBase bool // chain commits start on the fixture's base changeset
	// kill, if set, is called while the writers run; it returns the writers
	// it SIGKILLed.
	kill func(f *fixture, sessions []*gexec.Session) map[int]bool
}

func (f *fixture) writerArgs(id int, o procOpts) []string {
	args := []string{
		"-store", f.dir, "-id", strconv.Itoa(id), "-mode", o.mode, "-count", strconv.Itoa(o.count),
		"-pause", knobs.Pause.String(), "-lock-timeout", knobs.LockTimeout.String(),
		"-ready", filepath.Join(f.work, fmt.Sprintf("ready-%03d", id)),
		"-go", filepath.Join(f.work, "go"),
		"-out", f.recordFile(id),
	}
	if o.ref != "" {
		args = append(args, "-ref", o.ref, "-refs", strconv.Itoa(max(1, o.refs)))
	}
	if o.chainBase {
		args = append(args, "-base", f.base.String())
	}
	if o.brokenCAS {
		args = append(args, "-broken-cas")
	}
	return args
}

// runTimeout bounds a run generously: it is a hang detector, not a timing
// assertion.
func runTimeout(writers, count int) time.Duration {
	return 2*time.Minute + time.Duration(writers*count)*100*time.Millisecond
}

// releaseBarrier waits until n writers are ready, then creates the go file
// and returns the time it did.
func (f *fixture) releaseBarrier(n int, exited func() bool) int64 {
	Eventually(func() int {
		Expect(exited()).To(BeFalse(), "a writer exited before the barrier")
		m, _ := filepath.Glob(filepath.Join(f.work, "ready-*"))
		return len(m)
	}).WithTimeout(2*time.Minute).WithPolling(5*time.Millisecond).Should(Equal(n), "writers ready")
	goNS := time.Now().UnixNano()
	Expect(os.WriteFile(filepath.Join(f.work, "go"), nil, 0o644)).To(Succeed())
	return goNS
}

// recordFile is where writer w (a process, a goroutine or a CLI agent)
// writes its records.
func (f *fixture) recordFile(w int) string {
	return filepath.Join(f.work, fmt.Sprintf("w%03d.jsonl", w))
}

// sink opens writer w's record file, closed when the spec ends.
func (f *fixture) sink(w int) *Sink {
	out, err := os.OpenFile(f.recordFile(w), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(out.Close)
	return NewSink(out)
}

// collect reads the records a finished run's writers left and summarizes
// them from the release on.
func (f *fixture) collect(r *run) *run {
	var err error
	r.recs, err = ReadRecords(f.work)
	Expect(err).NotTo(HaveOccurred())
	r.summary = Summarize(r.recs, r.goNS)
	return r
}

// runProcesses runs writers writer processes of the helper binary behind
// the barrier and collects their reports.
func (f *fixture) runProcesses(writers int, o procOpts) *run {
	sessions := make([]*gexec.Session, writers)
	for i := range sessions {
		cmd := exec.Command(writerBin, f.writerArgs(i, o)...)
		s, err := gexec.Start(cmd, nil, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		sessions[i] = s
	}
	DeferCleanup(func() {
		for _, s := range sessions {
			s.Kill()
		}
	})
	anyExited := func() bool {
		for _, s := range sessions {
			if s.ExitCode() != -1 {
				return true
			}
		}
		return false
	}
	r := &run{killed: map[int]bool{}}
	r.goNS = f.releaseBarrier(writers, anyExited)
	if o.kill != nil {
		r.killed = o.kill(f, sessions)
	}
	deadline := runTimeout(writers, o.count)
	for i, s := range sessions {
		Eventually(s).WithTimeout(deadline).Should(gexec.Exit(), "writer %d", i)
		if r.killed[i] {
			continue
		}
		Expect(s.ExitCode()).To(Equal(0), "writer %d exit status (its stderr is in the spec output)", i)
	}
	r.stopNS = time.Now().UnixNano()
	return f.collect(r)
}

// runGoroutines runs the same workload as runProcesses in this process:
// one goroutine and one Store handle per writer.
func (f *fixture) runGoroutines(writers int, o procOpts) *run {
	errs := make([]error, writers)
	var wg sync.WaitGroup
	var exited sync.Map
	for i := 0; i < writers; i++ {
		cfg := WriterConfig{
			Store: f.dir, ID: i, Mode: o.mode, Count: o.count, Pause: knobs.Pause,
			LockTimeout: knobs.LockTimeout, Ref: o.ref, Refs: o.refs, RetryBusy: true,
			Ready: filepath.Join(f.work, fmt.Sprintf("ready-%03d", i)), Go: filepath.Join(f.work, "go"),
			Sink: f.sink(i),
		}
		if o.chainBase {
			cfg.Base = f.base
		}
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			errs[cfg.ID] = RunWriter(cfg)
			exited.Store(cfg.ID, true)
		}()
	}
	r := &run{killed: map[int]bool{}}
	r.goNS = f.releaseBarrier(writers, func() bool {
		n := 0
		exited.Range(func(any, any) bool { n++; return true })
		return n > 0
	})
	wg.Wait()
	r.stopNS = time.Now().UnixNano()
	Expect(errors.Join(errs...)).NotTo(HaveOccurred())
	return f.collect(r)
}

// acked returns the successful operations of a kind, by writer.
func (r *run) acked(kind string) map[int][]Record {
	out := map[int][]Record{}
	for _, rec := range r.recs {
		if rec.Ev == EvOp && rec.Kind == kind && rec.Err == "" {
			out[rec.W] = append(out[rec.W], rec)
		}
	}
	return out
}

func (r *run) count(kind string) int64 {
	n := int64(0)
	for _, recs := range r.acked(kind) {
		n += int64(len(recs))
	}
	return n
}

func mustID(s string) core.ID {
	id, err := ParseHexID(s)
	Expect(err).NotTo(HaveOccurred())
	return id
}

// openChecked opens the store, as any later process would, and checks what
// every run must leave: the journal sequence advanced by exactly the run's
// acknowledged transactions (a killed writer may add its in-flight one, or
// not), Verify(deep) clean, and Verify's frame count agreeing with the last
// sequence number, which a gap or a repeated number would break.
func (f *fixture) openChecked(r *run, txns int64) (*core.Store, *core.Snapshot) {
	st, err := core.Open(f.dir, core.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(st.Close)
	info, err := st.Info()
	Expect(err).NotTo(HaveOccurred())
	extra := int64(info.DurableSeq - f.seq0)
	if len(r.killed) == 0 {
		Expect(extra).To(Equal(txns), "journal frames written by the run vs transactions acknowledged")
	} else {
		Expect(extra).To(And(BeNumerically(">=", txns), BeNumerically("<=", txns+int64(len(r.killed)))),
			"journal frames written by the run vs transactions acknowledged, killed writers %v", r.killed)
	}
	rep, err := st.Verify(true, nil)
	Expect(err).NotTo(HaveOccurred(), "verify --deep")
	Expect(rep.Problems).To(BeEmpty(), "verify --deep")
	Expect(rep.Frames).To(Equal(int64(info.DurableSeq)), "journal sequence: frames verified vs last durable sequence number")
	sn, err := st.Snapshot()
	Expect(err).NotTo(HaveOccurred())
	return st, sn
}

// checkChains checks the private-chain workload: every acknowledged
// changeset present, on its writer's previous one, no id twice, and the log
// from each chain's head walking the whole chain back to its base.
func (f *fixture) checkChains(r *run, writers, count int) {
	commits := r.acked(KindCommit)
	_, sn := f.openChecked(r, r.count(KindCommit))
	seen := map[core.ID]int{}
	for w := 0; w < writers; w++ {
		recs := commits[w]
		Expect(recs).To(HaveLen(count), "writer %d acknowledged commits", w)
		sort.Slice(recs, func(a, b int) bool { return recs[a].I < recs[b].I })
		prev := f.base
		chain := make([]core.ID, 0, count+1)
		for i, rec := range recs {
			Expect(rec.I).To(Equal(i))
			id := mustID(rec.New)
			Expect(seen).NotTo(HaveKey(id), "changeset %s acknowledged twice (writers %d and %d)", id, seen[id], w)
			seen[id] = w
			cs, err := sn.Changeset(id)
			Expect(err).NotTo(HaveOccurred(), "acknowledged changeset %s of writer %d missing", id, w)
			Expect(cs.Parents).To(Equal([]core.ID{prev}), "writer %d commit %d parent", w, i)
			Expect(cs.Message).To(Equal(Message(w, i)))
			chain = append(chain, id)
			prev = id
		}
		log, err := sn.Log(prev, count+1)
		Expect(err).NotTo(HaveOccurred())
		want := []core.ID{}
		for i := len(chain) - 1; i >= 0; i-- {
			want = append(want, chain[i])
		}
		want = append(want, f.base)
		Expect(log).To(Equal(want), "log from writer %d's head", w)
	}
}

// publishedOn walks ref's first-parent log down to the fixture's base and
// returns it (newest first).
func (f *fixture) publishedOn(sn *core.Snapshot, ref string, limit int) []core.ID {
	head, err := sn.Ref(ref)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	log, err := sn.Log(head, limit)
	Expect(err).NotTo(HaveOccurred())
	return log
}

// checkPublishes checks a publish workload: the log from each ref holds
// every acknowledged publish exactly once, in a first-parent chain, and
// nothing else; the store holds exactly the changesets the writers were
// told it made.
func (f *fixture) checkPublishes(r *run, o procOpts, writers int) {
	wins := r.acked(KindCAS)
	commits := r.count(KindCommit)
	if o.mode == ModeAdvance {
		wins = r.acked(KindAdvance)
		commits = r.count(KindAdvance)
	}
	txns := r.count(KindCommit) + r.count(KindAdvance) + r.count(KindCAS)
	st, sn := f.openChecked(r, txns)
	info, err := st.Info()
	Expect(err).NotTo(HaveOccurred())
	if len(r.killed) == 0 {
		Expect(info.Changesets-f.changeset0).To(Equal(commits), "changesets in the store vs commits acknowledged")
	}

	refs := map[string]bool{}
	for _, recs := range wins {
		for _, rec := range recs {
			refs[rec.Ref] = true
		}
	}
	total := writers * o.count
	onRef := map[core.ID]string{}
	byMsg := map[string]int{}
	for ref := range refs {
		log := f.publishedOn(sn, ref, total+2)
		Expect(len(log)).To(BeNumerically("<=", total+1), "log of %s longer than every publish", ref)
		for _, id := range log {
			if id == f.base {
				continue
			}
			Expect(onRef).NotTo(HaveKey(id), "changeset %s twice in the logs", id)
			onRef[id] = ref
			cs, err := sn.Changeset(id)
			Expect(err).NotTo(HaveOccurred())
			byMsg[cs.Message]++
		}
	}
	for msg, n := range byMsg {
		Expect(n).To(Equal(1), "publish %s landed %d times", msg, n)
	}
	for w := 0; w < writers; w++ {
		if !r.killed[w] {
			Expect(wins[w]).To(HaveLen(o.count), "writer %d publishes won", w)
		}
		for _, rec := range wins[w] {
			id := mustID(rec.New)
			Expect(onRef).To(HaveKeyWithValue(id, rec.Ref), "acknowledged publish %s (writer %d item %d) not on %s", id, w, rec.I, rec.Ref)
		}
	}
	var won int
	for _, recs := range wins {
		won += len(recs)
	}
	Expect(len(onRef)).To(BeNumerically(">=", won))
	Expect(len(onRef)).To(BeNumerically("<=", won+len(r.killed)), "changesets on the refs that nobody was told had landed")
}

// linearizability checks each ref's history (claim C5) with a final read of
// its value appended; initial gives each ref's value before the run. whole
// checks the entire history with porcupine; otherwise porcupine checks the
// wins, reads and unknowns and CheckConflicts the losers (see
// SplitConflicts for why). It returns porcupine's result per ref, Illegal
// if CheckConflicts found a violation, so a negative control can expect
// Illegal; a checker that runs out of time returns Unknown, a failure.
func (f *fixture) linearizability(r *run, initial func(ref string) string, whole bool) map[string]porcupine.CheckResult {
	hist, err := Histories(r.recs)
	Expect(err).NotTo(HaveOccurred())
	st, err := core.Open(f.dir, core.Options{})
	Expect(err).NotTo(HaveOccurred())
	defer st.Close()
	sn, err := st.Snapshot()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]porcupine.CheckResult{}
	for ref, h := range hist {
		call := time.Now().UnixNano()
		v, err := sn.Ref(ref)
		if errors.Is(err, core.ErrNotFound) {
			err = nil
		}
		Expect(err).NotTo(HaveOccurred())
		h = append(h, FinalRead(hexOrEmpty(v), call, time.Now().UnixNano()))
		unknown := 0
		for _, op := range h {
			if op.Output.(refOutput).Unknown {
				unknown++
			}
		}
		checked, losers := h, []porcupine.Operation(nil)
		if !whole {
			checked, losers = SplitConflicts(h)
		}
		start := time.Now()
		res := CheckRef(initial(ref), checked, knobs.LinTimeout)
		bad := CheckConflicts(initial(ref), h)
		if len(bad) > 0 && res == porcupine.Ok {
			res = porcupine.Illegal
		}
		msg := fmt.Sprintf("%d operations (%d of unknown outcome), porcupine over %d, %d losers checked apart, %d violations: %s in %s",
			len(h), unknown, len(checked), len(losers), len(bad), res, time.Since(start).Round(time.Millisecond))
		GinkgoWriter.Printf("linearizability of %s: %s\n", ref, msg)
		for i, b := range bad {
			if i == 10 {
				GinkgoWriter.Printf("  ... %d more\n", len(bad)-10)
				break
			}
			GinkgoWriter.Printf("  %s\n", b)
		}
		AddReportEntry("linearizability of "+ref, msg)
		if res != porcupine.Ok {
			// The store's directory goes with the spec; the history is
			// kept where the failure can be read.
			out, err := os.CreateTemp("", "contention-history-"+strings.ReplaceAll(ref, "/", "_")+"-*.txt")
			Expect(err).NotTo(HaveOccurred())
			_, err = out.WriteString(DescribeHistory(h, r.goNS))
			Expect(err).NotTo(HaveOccurred())
			Expect(out.Close()).To(Succeed())
			GinkgoWriter.Printf("history of %s (%s) written to %s (times in µs from go)\n", ref, res, out.Name())
		}
		out[ref] = res
	}
	return out
}

func report(name string, r *run) {
	GinkgoWriter.Printf("%s\n%s\n", name, r.summary)
	AddReportEntry(name, r.summary.String())
}
