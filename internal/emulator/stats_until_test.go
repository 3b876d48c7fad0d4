package emulator_test

import (
	"testing"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// TestStatsUntilCountsOnlyTheSecondsKept cuts a region's histogram and checks
// that the arrivals, the peak and the seconds over capacity are those of the
// seconds left.
func TestStatsUntilCountsOnlyTheSecondsKept(t *testing.T) {
	rs := emulator.RegionStats{CapacityRequestsPerSecond: 4}
	for i, n := range []int64{1, 5, 5, 2, 9, 9, 9} {
		rs.PerSecond = append(rs.PerSecond, emulator.SecondStats{Second: i, Requests: n})
	}
	for _, tc := range []struct {
		n                                int
		requests, peak                   int64
		peakSecond, over, longest, count int
	}{
		{n: 0},
		{n: 4, requests: 13, peak: 5, peakSecond: 1, over: 2, longest: 2, count: 4},
		{n: 100, requests: 40, peak: 9, peakSecond: 4, over: 5, longest: 3, count: 7},
	} {
		got := rs.Until(tc.n)
		if len(got.PerSecond) != tc.count || got.Requests != tc.requests || got.PeakRequestsPerSecond != tc.peak ||
			got.PeakSecond != tc.peakSecond || got.SecondsOverCapacity != tc.over || got.LongestOverCapacity != tc.longest {
			t.Errorf("Until(%d) = %d seconds, requests %d, peak %d at %d, over %d longest %d; want %d, %d, %d at %d, %d, %d",
				tc.n, len(got.PerSecond), got.Requests, got.PeakRequestsPerSecond, got.PeakSecond, got.SecondsOverCapacity, got.LongestOverCapacity,
				tc.count, tc.requests, tc.peak, tc.peakSecond, tc.over, tc.longest)
		}
	}
}
