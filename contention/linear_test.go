package contention

import (
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/swarmops/swarmops/faultfs"
)

// These specs pin the ref model and the history builder on hand-made
// histories, so that the contention runs' "Ok" means something: each
// illegal case here is one a broken store could produce.
var _ = Describe("The ref model (C5)", func() {
	cas := func(client int, old, new string, call, ret int64, ok bool, cur string) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: refInput{Kind: KindCAS, Old: old, New: new}, Call: call,
			Output: refOutput{OK: ok, Cur: cur}, Return: ret}
	}
	read := func(client int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: refInput{Kind: KindRead}, Call: call, Output: refOutput{Cur: v}, Return: ret}
	}
	unknown := func(client int, old, new string, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: refInput{Kind: KindCAS, Old: old, New: new}, Call: call,
			Output: refOutput{Unknown: true}, Return: math.MaxInt64}
	}
	check := func(h ...porcupine.Operation) porcupine.CheckResult { return CheckRef("a", h, 10*time.Second) }

	It("accepts one winner and a loser told the winner's value", func() {
		Expect(check(cas(0, "a", "b", 0, 10, true, ""), cas(1, "a", "c", 1, 11, false, "b"), read(2, "b", 12, 13))).To(Equal(porcupine.Ok))
	})
	It("rejects two winners from the same expected value", func() {
		Expect(check(cas(0, "a", "b", 0, 10, true, ""), cas(1, "a", "c", 1, 11, true, ""))).To(Equal(porcupine.Illegal))
	})
	It("rejects a loser told a value the ref never held", func() {
		Expect(check(cas(0, "a", "b", 0, 10, true, ""), cas(1, "a", "c", 1, 11, false, "z"))).To(Equal(porcupine.Illegal))
	})
	It("rejects a loser whose expectation held all along", func() {
		Expect(check(cas(1, "a", "c", 1, 11, false, "a"))).To(Equal(porcupine.Illegal))
	})
	It("rejects a read of a value overwritten before the read began", func() {
		Expect(check(cas(0, "a", "b", 0, 10, true, ""), read(1, "a", 20, 21))).To(Equal(porcupine.Illegal))
	})
	It("accepts an operation of unknown outcome that happened", func() {
		Expect(check(unknown(0, "a", "b", 0), read(1, "b", 20, 21), cas(2, "b", "c", 22, 23, true, ""))).To(Equal(porcupine.Ok))
	})
	It("accepts an operation of unknown outcome that never happened", func() {
		Expect(check(unknown(0, "a", "b", 0), read(1, "a", 20, 21), cas(2, "a", "c", 22, 23, true, ""), read(3, "c", 24, 25))).To(Equal(porcupine.Ok))
	})
	It("accepts a read of unknown outcome whatever the state", func() {
		h := read(0, "", 5, math.MaxInt64)
		h.Output = refOutput{Unknown: true}
		Expect(check(cas(1, "a", "b", 0, 1, true, ""), h, read(2, "b", 20, 21))).To(Equal(porcupine.Ok))
	})
	It("still rejects a value nobody wrote next to an unknown operation", func() {
		Expect(check(unknown(0, "a", "b", 0), read(1, "z", 20, 21))).To(Equal(porcupine.Illegal))
	})

	It("builds histories from records: Busy left out, a call without a return unknown", func() {
		recs := []Record{
			{Ev: EvCall, W: 0, Seq: 1, Kind: KindCAS, Ref: "main", Old: "a", New: "b", Start: 1},
			{Ev: EvOp, W: 0, Seq: 1, Kind: KindCAS, Ref: "main", Old: "a", New: "b", Start: 1, End: 5, Err: ErrClassBusy},
			{Ev: EvCall, W: 0, Seq: 2, Kind: KindCAS, Ref: "main", Old: "a", New: "b", Start: 6},
			{Ev: EvOp, W: 0, Seq: 2, Kind: KindCAS, Ref: "main", Old: "a", New: "b", Start: 6, End: 9},
			{Ev: EvCall, W: 1, Seq: 1, Kind: KindCAS, Ref: "main", Old: "b", New: "c", Start: 10},
			{Ev: EvCall, W: 2, Seq: 1, Kind: KindRead, Ref: "other", Start: 3},
			{Ev: EvOp, W: 2, Seq: 1, Kind: KindRead, Ref: "other", Cur: "x", Start: 3, End: 4},
			{Ev: EvOp, W: 3, Seq: 1, Kind: KindCommit, New: "d", Start: 3, End: 4},
		}
		h, err := Histories(recs)
		Expect(err).NotTo(HaveOccurred())
		Expect(h).To(HaveLen(2))
		Expect(h["main"]).To(HaveLen(2))
		Expect(h["main"][0].Output).To(Equal(refOutput{OK: true, New: "b"}))
		Expect(h["main"][1].Output).To(Equal(refOutput{Unknown: true}))
		Expect(h["main"][1].Return).To(Equal(int64(math.MaxInt64)))
		Expect(h["other"]).To(HaveLen(1))
	})
})

var _ = Describe("Summarize", func() {
	It("counts waits in lock passes and the spread from go", func() {
		const ms = int64(time.Millisecond)
		recs := []Record{
			{Ev: EvGo, W: 0}, {Ev: EvGo, W: 1},
			// Four transactions in 40 ms: a pass is 10 ms.
			{Ev: EvOp, W: 0, Kind: KindCommit, Start: 0, End: 10 * ms, Locks: 1},
			{Ev: EvOp, W: 1, Kind: KindCommit, Start: 0, End: 20 * ms, Locks: 1, WaitNS: 10 * ms},
			{Ev: EvOp, W: 0, Kind: KindCommit, Start: 10 * ms, End: 30 * ms, Locks: 1, WaitNS: 10 * ms},
			{Ev: EvOp, W: 1, Kind: KindCommit, Start: 20 * ms, End: 40 * ms, Locks: 1, WaitNS: 10 * ms},
			{Ev: EvOp, W: 1, Kind: KindCommit, Start: 40 * ms, End: 40 * ms, Err: ErrClassBusy},
		}
		s := Summarize(recs, 0)
		Expect(s.Writers).To(Equal(2))
		Expect(s.Ops).To(Equal(4))
		Expect(s.Busy).To(Equal(1))
		Expect(s.Pass).To(Equal(10 * time.Millisecond))
		Expect(s.WaitMax).To(BeNumerically("~", 1.0, 1e-9))
		Expect(s.Spread).To(BeNumerically("~", 40.0/30.0, 1e-9))
		Expect(s.Throughput).To(BeNumerically("~", 100.0, 1e-9))
	})
})

var _ = Describe("Summarize's repeats", func() {
	pub := func(w int, ref, old, new string) Record {
		return Record{Ev: EvOp, W: w, Kind: KindAdvance, Ref: ref, Old: old, New: new, End: 1}
	}
	It("counts the publishes onto a shared ref made by the previous winner", func() {
		recs := []Record{
			// main: a -> b -> c -> d -> e by writers 0, 0, 1, 0. Listed out
			// of order, with a loss and a ref only writer 2 moves.
			pub(1, "main", "c", "d"), pub(0, "main", "a", "b"), pub(0, "main", "d", "e"),
			{Ev: EvOp, W: 1, Kind: KindAdvance, Ref: "main", Old: "a", Err: ErrClassConflict},
			pub(0, "main", "b", "c"),
			pub(2, "own", "", "x"), pub(2, "own", "x", "y"),
		}
		s := Summarize(recs, 0)
		Expect(s.Publishes).To(Equal(3))
		Expect(s.Repeats).To(BeNumerically("~", 1.0/3, 1e-9))
	})
})

var _ = Describe("CheckConflicts", func() {
	win := func(old, new string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: refInput{Kind: KindCAS, Old: old, New: new}, Call: call, Output: refOutput{OK: true}, Return: ret}
	}
	lose := func(old, cur string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: refInput{Kind: KindCAS, Old: old, New: "x"}, Call: call, Output: refOutput{Cur: cur}, Return: ret}
	}
	It("accepts losers told a value the ref held during their call", func() {
		Expect(CheckConflicts("a", []porcupine.Operation{win("a", "b", 0, 10), lose("a", "b", 5, 20), lose("z", "a", 0, 3), win("b", "c", 30, 40), lose("a", "b", 21, 35)})).To(BeEmpty())
	})
	It("rejects a loser told a value replaced before it was called", func() {
		Expect(CheckConflicts("a", []porcupine.Operation{win("a", "b", 0, 10), win("b", "c", 11, 12), lose("a", "b", 20, 30)})).To(HaveLen(1))
	})
	It("rejects a loser told a value installed after it returned", func() {
		Expect(CheckConflicts("a", []porcupine.Operation{lose("z", "b", 0, 5), win("a", "b", 10, 20)})).To(HaveLen(1))
	})
	It("rejects a loser told a value nobody wrote, or its own expectation", func() {
		Expect(CheckConflicts("a", []porcupine.Operation{lose("z", "q", 0, 5), lose("a", "a", 0, 5)})).To(HaveLen(2))
	})
})

// timedQueue returns a TimedFS over a memory filesystem with a queue
// directory, and a function that takes and lets go of one of its locks.
func timedQueue() (*TimedFS, func(name string)) {
	m := faultfs.NewMem()
	Expect(m.MkdirAll("/s/lockq", 0o755)).To(Succeed())
	t := NewTimedFS(m)
	return t, func(name string) {
		l, err := t.Lock(name, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Unlock()).To(Succeed())
	}
}

var _ = Describe("TimedFS", func() {
	// A queue entry the store leaves before its turn (a compare-and-swap
	// already lost) has no acquisition; the next acquisition's wait starts
	// at its own entry. Carrying the first entry's time over made one wait
	// span several operations in the first full-size run with early
	// conflicts ("overtaken ... max=437").
	It("starts each acquisition's wait at its own entry into the queue", func() {
		t, lock := timedQueue()
		before := time.Now().UnixNano()
		lock("/s/lockq/GUARD") // an entry the store leaves early
		lock("/s/lockq/t00000000000000000001")
		time.Sleep(5 * time.Millisecond)
		second := time.Now().UnixNano()
		lock("/s/lockq/GUARD")
		lock("/s/LOCK")
		acq := t.acquisitions(0)
		Expect(acq).To(HaveLen(1))
		Expect(acq[0][0]).To(BeNumerically(">=", second), "wait start %d ns after the first entry", acq[0][0]-before)
		// An early leave, then the lone-writer fast path: no queue wait.
		lock("/s/lockq/GUARD")
		lock("/s/lockq/t00000000000000000002")
		time.Sleep(5 * time.Millisecond)
		third := time.Now().UnixNano()
		l, err := t.Lock("/s/LOCK", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Unlock()).To(Succeed())
		acq = t.acquisitions(1)
		Expect(acq).To(HaveLen(1))
		Expect(acq[0][0]).To(BeNumerically(">=", third), "fast path: wait start %d ns before its try", third-acq[0][0])
		_, locks, busy := t.Totals()
		Expect(locks).To(Equal(int64(2)))
		Expect(busy).To(BeZero())
	})

	// A place counts from the ticket, which NEXT counts, not from the
	// guard: in between the queue looks idle to a lone writer. A kept
	// place's retry takes no guard and no ticket: its place is the first
	// entry's.
	It("counts a place from its ticket, and a kept place from the first entry's", func() {
		t, lock := timedQueue()
		lock("/s/lockq/GUARD")
		time.Sleep(5 * time.Millisecond)
		ticket := time.Now().UnixNano()
		lock("/s/lockq/t00000000000000000001")
		lock("/s/lockq/t00000000000000000000") // the wait for the one ahead
		kept := time.Now().UnixNano()
		lock("/s/lockq/t00000000000000000000") // the retry's wait, no guard
		lock("/s/LOCK")
		acq := t.acquisitions(0)
		Expect(acq).To(HaveLen(1))
		Expect(acq[0][0]).To(BeNumerically(">=", ticket), "place %d ns before the ticket", ticket-acq[0][0])
		Expect(acq[0][0]).To(BeNumerically("<", kept), "a kept place counted from the retry")
	})
})
