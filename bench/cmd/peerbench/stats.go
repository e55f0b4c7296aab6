package main

import (
	"math"
	"sort"
	"time"
)

// pct returns the nearest-rank percentile q (0..100) of xs, or NaN when xs
// is empty. xs is sorted in place.
func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	r := int(math.Ceil(q / 100 * float64(len(xs))))
	if r < 1 {
		r = 1
	}
	if r > len(xs) {
		r = len(xs)
	}
	return xs[r-1]
}

// median of xs: the middle value, or the mean of the two middle values for
// an even count (with two runs, a lower or upper pick would favour one
// direction of every metric).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	m := len(c) / 2
	if len(c)%2 == 1 {
		return c[m]
	}
	return (c[m-1] + c[m]) / 2
}

func minmax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// lat collects latencies in microseconds.
type lat []float64

func (l *lat) add(d time.Duration) { *l = append(*l, float64(d.Nanoseconds())/1e3) }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
