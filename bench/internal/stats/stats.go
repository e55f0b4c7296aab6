// Package stats holds the order statistics the benchmarks in this module
// report: a nearest-rank percentile, a median and a range.
package stats

import (
	"math"
	"sort"
)

// Pct returns the nearest-rank percentile q (0..100) of xs, or NaN when xs
// is empty. xs is sorted in place.
func Pct(xs []float64, q float64) float64 {
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

// Median returns the middle value of xs, or the mean of the two middle
// values for an even count (with two runs, a lower or upper pick would
// favour one direction of every metric), or NaN when xs is empty. xs is
// not modified.
func Median(xs []float64) float64 {
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

// MinMax returns the smallest and largest of xs (+Inf and -Inf when xs is
// empty).
func MinMax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}
