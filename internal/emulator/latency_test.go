package emulator

import (
	"math"
	"testing"
	"time"
)

// TestWithinIsTheSamplersShare checks Latency.Within against the latencies
// the region draws: the share of 100,000 draws shorter than d is within
// half a point of Within(d), for a lognormal and a fixed latency, and a
// deadline already spent (d ≤ 0) leaves none.
func TestWithinIsTheSamplersShare(t *testing.T) {
	for _, l := range []Latency{
		{Distribution: Lognormal, P50: D(600 * time.Millisecond), P99: D(2500 * time.Millisecond)},
		{Distribution: Fixed, P50: D(300 * time.Millisecond)},
	} {
		s := newLatencySampler(l, 7)
		draws := make([]time.Duration, 100_000)
		for i := range draws {
			draws[i] = s.sample()
		}
		for _, d := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 301 * time.Millisecond, 600 * time.Millisecond, time.Second, 2500 * time.Millisecond, 10 * time.Second} {
			var n int
			for _, x := range draws {
				if x < d {
					n++
				}
			}
			got, want := l.Within(d), float64(n)/float64(len(draws))
			if math.Abs(got-want) > 0.005 {
				t.Errorf("%s latency p50 %s p99 %s: Within(%s) = %.4f, %.4f of the draws are shorter", l.Distribution, l.P50, l.P99, d, got, want)
			}
		}
	}
	if got := (Latency{Distribution: Lognormal, P50: D(time.Second), P99: D(2 * time.Second)}).Within(-time.Second); got != 0 {
		t.Errorf("Within a spent deadline = %v, want 0", got)
	}
}
