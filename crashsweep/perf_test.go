package crashsweep

import (
	"context"
	"testing"

	"github.com/swarmops/swarmops/scenarios"
)

// BenchmarkSweep measures the in-process sweep speed (P9) in crash points per
// second over the scenarios named by CRASHSWEEP_BENCH_SCENARIO (default: all).
func BenchmarkSweep(b *testing.B) {
	all, err := scenarios.All()
	if err != nil {
		b.Fatal(err)
	}
	scs, err := scenarios.Select(all, envOr("CRASHSWEEP_BENCH_SCENARIO", "*"))
	if err != nil {
		b.Fatal(err)
	}
	var points, states int64
	var secs float64
	for i := 0; i < b.N; i++ {
		rep, err := Sweep(context.Background(), scs, Config{RecoveryPoints: 0})
		if err != nil {
			b.Fatal(err)
		}
		points += rep.Points
		states += rep.States
		secs += rep.Elapsed.Seconds()
	}
	b.ReportMetric(float64(points)/secs, "points/s")
	b.ReportMetric(float64(states)/secs, "states/s")
}
