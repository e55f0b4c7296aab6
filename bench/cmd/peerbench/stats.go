package main

import (
	"time"

	"github.com/swarmops/swarmops/bench/internal/stats"
)

// pct returns the nearest-rank percentile q (0..100) of xs, or NaN when xs
// is empty. xs is sorted in place.
func pct(xs []float64, q float64) float64 { return stats.Pct(xs, q) }

// median of xs: the middle value, or the mean of the two middle values for
// an even count.
func median(xs []float64) float64 { return stats.Median(xs) }

func minmax(xs []float64) (float64, float64) { return stats.MinMax(xs) }

// lat collects latencies in microseconds.
type lat []float64

func (l *lat) add(d time.Duration) { *l = append(*l, float64(d.Nanoseconds())/1e3) }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
