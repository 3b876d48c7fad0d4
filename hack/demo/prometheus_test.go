package main

import (
	"math"
	"testing"
	"time"
)

// TestChartLeavesOutWhatIsNotANumber: Prometheus answers NaN for a share
// whose two rates are both zero and Inf for one over zero; the chart's line
// leaves them out (a gap) and keeps every other sample, in percent, at its
// scenario time. The plotter refuses a NaN point, which failed make demo at
// its last step.
func TestChartLeavesOutWhatIsNotANumber(t *testing.T) {
	zero := time.Unix(1_700_000_000, 0)
	at := func(t time.Time) time.Duration { return 30 * t.Sub(zero) } // a time scale of 30
	got := percentPoints([]sample{
		{zero, math.NaN()},
		{zero.Add(time.Second), 0.5},
		{zero.Add(2 * time.Second), math.Inf(1)},
		{zero.Add(3 * time.Second), 0.93},
	}, at)
	if len(got) != 2 || got[0].At != 30*time.Second || got[0].Y != 50 || got[1].At != 90*time.Second || got[1].Y != 93 {
		t.Fatalf("points %+v, want 50%% at 30 s and 93%% at 1m30s", got)
	}
}
