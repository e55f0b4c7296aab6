package textmerge

// Before the search for a longest common subsequence, xdiff sets aside
// lines of the middle (the part left after trimming the common prefix and
// suffix) that it will not try to match, and marks them changed:
//
//   - a line that does not occur in the other file at all, which can never
//     match, so leaving it out changes nothing but the cost;
//   - a line that occurs in the other file at least about sqrt(n) times
//     (n the other file's line count, the figure capped at 1024), when it
//     sits inside a run of such lines and unmatched lines that is mostly
//     unmatched lines. Matching such a line would only pin a
//     rewritten stretch to a frequent line like "}" or a blank line.
//
// The second rule is a heuristic that can cost minimality. It is kept so
// that the hunks, and so the merges, are git's whenever the search itself
// picks git's alignment.

// Line kinds for the cleanup, xdiff's values.
const (
	kindNoMatch    = 0
	kindMatch      = 1
	kindMultiMatch = 2
)

// Limits of the multiple-match rule, xdiff's values.
const (
	maxEqLimit  = 1024 // cap on the "occurs too often" count
	scanWindow  = 100  // lines looked at on each side of a frequent line
	keepRunBias = 4    // a run is "mostly unmatched" past 1 in 4 frequent lines
)

// bogoSqrt is xdiff's cheap square root: the power of two near sqrt(n).
func bogoSqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// keepLines returns the lines of the middles of sa and sb (all but pre
// leading and suf trailing lines) that the search will try to match.
func keepLines(sa, sb *side, classes, pre, suf int) (ka, kb []int) {
	countA, countB := make([]int, classes), make([]int, classes)
	for _, c := range sa.class {
		countA[c]++
	}
	for _, c := range sb.class {
		countB[c]++
	}
	return keepSide(sa, countB, pre, sa.n()-suf), keepSide(sb, countA, pre, sb.n()-suf)
}

// keepSide applies the cleanup to lines [lo, hi) of s; other counts the
// lines of the other file by class.
func keepSide(s *side, other []int, lo, hi int) []int {
	limit := min(bogoSqrt(s.n()), maxEqLimit)
	kind := make([]uint8, hi-lo)
	for i := lo; i < hi; i++ {
		switch nm := other[s.class[i]]; {
		case nm == 0:
			kind[i-lo] = kindNoMatch
		case nm >= limit:
			kind[i-lo] = kindMultiMatch
		default:
			kind[i-lo] = kindMatch
		}
	}
	keep := make([]int, 0, hi-lo)
	for k, kd := range kind {
		if kd == kindMatch || kd == kindMultiMatch && !discardFrequent(kind, k) {
			keep = append(keep, lo+k)
		} else {
			s.mark(lo+k, true)
		}
	}
	return keep
}

// discardFrequent reports whether the frequent line k should be set aside:
// it must have unmatched lines both above and below it within the runs of
// unmatched and frequent lines around it, and frequent lines must be at
// most a quarter of those runs.
func discardFrequent(kind []uint8, k int) bool {
	noBefore, freqBefore := runBeside(kind, k, -1, max(k-scanWindow, 0))
	if noBefore == 0 {
		return false
	}
	noAfter, freqAfter := runBeside(kind, k, 1, min(k+scanWindow, len(kind)-1))
	if noAfter == 0 {
		return false
	}
	freq, no := freqBefore+freqAfter, noBefore+noAfter
	return freq*keepRunBias < freq+no
}

// runBeside counts the unmatched lines (no) and, from 1, the frequent
// lines (freq) in the run beside line k, going by step (-1 up, 1 down)
// as far as line end or the first matched line.
func runBeside(kind []uint8, k, step, end int) (no, freq int) {
	freq = 1
	for j := k + step; j*step <= end*step && kind[j] != kindMatch; j += step {
		if kind[j] == kindNoMatch {
			no++
		} else {
			freq++
		}
	}
	return no, freq
}
