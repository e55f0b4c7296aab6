package stats

import (
	"math"
	"testing"
)

func TestMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	if got := Median(xs); got != 2.5 {
		t.Fatalf("Median = %v, want 2.5", got)
	}
	if xs[0] != 4 {
		t.Fatalf("Median reordered its input: %v", xs)
	}
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Fatalf("Median = %v, want 2", got)
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Pct(nil, 50)) {
		t.Fatal("the median and percentile of nothing must be NaN")
	}
	if lo, hi := MinMax([]float64{3, -1, 7}); lo != -1 || hi != 7 {
		t.Fatalf("MinMax = %v, %v, want -1, 7", lo, hi)
	}
}
