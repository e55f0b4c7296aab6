package contention

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Summary is what a run's records say about the writer lock and the
// writers' progress. Waits in passes are the wait divided by Pass.
type Summary struct {
	Writers      int
	Ops          int           // acknowledged store operations (commits and CAS, not reads)
	Transactions int64         // writer lock acquisitions by every writer
	Wall         time.Duration // go to the last operation's end
	Pass         time.Duration // Wall / Transactions: one hand-off of the lock
	Busy         int           // operations that failed with Busy
	Conflicts    int           // operations that lost a CAS
	WaitP50      float64       // lock wait per operation, in passes
	WaitP99      float64
	WaitMax      float64
	WaitMaxAbs   time.Duration
	// Overtakes counts, for one acquisition of the writer lock, the
	// acquisitions by other writers between the moment it took its place in
	// the queue and the moment it got the lock: C8's "one round of the
	// other writers" in hand-offs, independent of how long each hand-off
	// took. A FIFO lock keeps it at most Writers-1.
	OvertakesP50 float64
	OvertakesMax int
	LatP50       time.Duration // operation latency (call to return)
	LatP99       time.Duration
	LatMax       time.Duration
	Spread       float64 // slowest writer's total ÷ fastest's, both from go
	Throughput   float64 // acknowledged operations per second
	// Repeats is, of the publishes onto a ref more than one writer moves
	// (each but the first of its history), the fraction whose writer also
	// made the publish before; Publishes counts them. A winner drawn at
	// random among the writers would repeat about once in Writers. It
	// says whether the spread of a shared-ref run is chance or a winner
	// that keeps winning.
	Repeats   float64
	Publishes int
}

// Summarize computes a Summary from the records of one run whose go file
// appeared at goNS. Only EvOp records of store operations count; reads take
// no lock and are left out of waits and latencies.
func Summarize(recs []Record, goNS int64) Summary {
	var s Summary
	var waits []float64
	var lats []time.Duration
	lastEnd := map[int]int64{}
	writers := map[int]bool{}
	var end int64
	for _, r := range recs {
		if r.Ev == EvGo {
			writers[r.W] = true
		}
		if r.Ev != EvOp || r.Kind == KindRead {
			continue
		}
		writers[r.W] = true
		s.Transactions += r.Locks
		switch r.Err {
		case "":
			s.Ops++
		case ErrClassBusy:
			s.Busy++
		case ErrClassConflict:
			s.Conflicts++
		}
		waits = append(waits, float64(r.WaitNS))
		lats = append(lats, time.Duration(r.End-r.Start))
		if r.End > lastEnd[r.W] {
			lastEnd[r.W] = r.End
		}
		if r.End > end {
			end = r.End
		}
	}
	s.Writers = len(writers)
	if end <= goNS || len(waits) == 0 {
		return s
	}
	s.Wall = time.Duration(end - goNS)
	if s.Transactions > 0 {
		s.Pass = s.Wall / time.Duration(s.Transactions)
	}
	sort.Float64s(waits)
	sort.Slice(lats, func(a, b int) bool { return lats[a] < lats[b] })
	pass := float64(s.Pass)
	if pass > 0 {
		s.WaitP50 = Percentile(waits, 50) / pass
		s.WaitP99 = Percentile(waits, 99) / pass
		s.WaitMax = waits[len(waits)-1] / pass
	}
	s.WaitMaxAbs = time.Duration(waits[len(waits)-1])
	s.LatP50 = lats[rank(len(lats), 50)]
	s.LatP99 = lats[rank(len(lats), 99)]
	s.LatMax = lats[len(lats)-1]
	lo, hi := math.MaxInt64, 0
	for _, e := range lastEnd {
		d := int(e - goNS)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo > 0 {
		s.Spread = float64(hi) / float64(lo)
	}
	s.Throughput = float64(s.Ops) / s.Wall.Seconds()
	s.OvertakesP50, s.OvertakesMax = overtakes(recs)
	s.Repeats, s.Publishes = repeats(recs)
	return s
}

// repeats follows each ref's history of acknowledged moves, from the value
// no move installed through each move's new value, and counts the moves
// made by the writer of the move before. Refs one writer alone moves are
// left out.
func repeats(recs []Record) (frac float64, n int) {
	type move struct {
		w   int
		new string
	}
	byOld := map[string]map[string]move{} // ref -> old -> move
	movers := map[string]map[int]bool{}
	for _, r := range recs {
		if r.Ev != EvOp || r.Err != "" || r.Ref == "" || r.New == "" || r.Kind == KindRead {
			continue
		}
		if byOld[r.Ref] == nil {
			byOld[r.Ref], movers[r.Ref] = map[string]move{}, map[int]bool{}
		}
		byOld[r.Ref][r.Old] = move{r.W, r.New}
		movers[r.Ref][r.W] = true
	}
	same := 0
	for ref, moves := range byOld {
		if len(movers[ref]) < 2 {
			continue
		}
		installed := map[string]bool{}
		for _, m := range moves {
			installed[m.new] = true
		}
		for old, first := range moves {
			if installed[old] {
				continue
			}
			prev, cur := first.w, first.new
			for seen := 1; seen < len(moves); seen++ {
				m, ok := moves[cur]
				if !ok {
					break
				}
				n++
				if m.w == prev {
					same++
				}
				prev, cur = m.w, m.new
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(same) / float64(n), n
}

// overtakes returns the median and the maximum, over every recorded
// acquisition, of the acquisitions by other writers while it waited.
func overtakes(recs []Record) (p50 float64, max int) {
	type acq struct {
		w        int
		from, at int64
	}
	var all []acq
	for _, r := range recs {
		if r.Ev != EvOp {
			continue
		}
		for _, a := range r.Acq {
			all = append(all, acq{r.W, a[0], a[1]})
		}
	}
	if len(all) == 0 {
		return 0, 0
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at < all[j].at })
	counts := make([]float64, 0, len(all))
	for i, a := range all {
		// Acquisitions strictly after a.from and before a itself.
		lo := sort.Search(i, func(k int) bool { return all[k].at > a.from })
		n := 0
		for k := lo; k < i; k++ {
			if all[k].w != a.w {
				n++
			}
		}
		counts = append(counts, float64(n))
		if n > max {
			max = n
		}
	}
	sort.Float64s(counts)
	return Percentile(counts, 50), max
}

// rank is the nearest-rank index of percentile p among n sorted values.
func rank(n int, p float64) int {
	i := int(math.Ceil(p/100*float64(n))) - 1
	return max(0, min(n-1, i))
}

// Percentile returns the nearest-rank percentile p of sorted values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[rank(len(sorted), p)]
}

// String formats the summary as one block for GinkgoWriter and the perf
// notes.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writers=%d ops=%d lock-passes=%d wall=%s pass=%s throughput=%.1f ops/s\n",
		s.Writers, s.Ops, s.Transactions, s.Wall.Round(time.Millisecond), s.Pass.Round(time.Microsecond), s.Throughput)
	fmt.Fprintf(&b, "busy=%d conflicts=%d spread=%.3f\n", s.Busy, s.Conflicts, s.Spread)
	if s.Publishes > 0 {
		fmt.Fprintf(&b, "shared-ref publishes made by the winner of the one before: %.3f of %d (about %.3f if the winner were drawn at random)\n",
			s.Repeats, s.Publishes, 1/float64(max(1, s.Writers)))
	}
	if s.Transactions > 0 {
		fmt.Fprintf(&b, "lock wait in passes: p50=%.2f p99=%.2f max=%.2f (max %s; one round of the others = %d passes)\n",
			s.WaitP50, s.WaitP99, s.WaitMax, s.WaitMaxAbs.Round(time.Microsecond), max(0, s.Writers-1))
		fmt.Fprintf(&b, "overtaken while waiting, in hand-offs to other writers: p50=%.0f max=%d\n", s.OvertakesP50, s.OvertakesMax)
	} else {
		b.WriteString("lock wait: not observable from outside the process (CLI level)\n")
	}
	fmt.Fprintf(&b, "latency: p50=%s p99=%s max=%s",
		s.LatP50.Round(time.Microsecond), s.LatP99.Round(time.Microsecond), s.LatMax.Round(time.Microsecond))
	return b.String()
}
