package emulator

import (
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Stats is a snapshot of what the regions saw and served.
type Stats struct {
	// Scenario is the scenario's name.
	Scenario string `json:"scenario"`
	// Elapsed is the scenario time when the snapshot was taken.
	Elapsed Duration `json:"elapsed"`
	// Regions are in the scenario's order.
	Regions []RegionStats `json:"regions"`
}

// RegionStats is what one region saw. Requests counts every generate call
// that reached the region's capacity check (malformed calls are only in
// ByCode), so Requests = sum of ByCode minus the malformed ones.
type RegionStats struct {
	Name string     `json:"name"`
	Tier table.Tier `json:"tier"`
	// CapacityRequestsPerSecond is the region's PT plus pay-as-you-go
	// capacity in calls of the scenario's typical size; zero means unlimited.
	CapacityRequestsPerSecond float64 `json:"capacityRequestsPerSecond"`
	// Requests is the number of generate calls that arrived.
	Requests int64 `json:"requests"`
	// ByCode counts outcomes by Google's status name (OK, RESOURCE_EXHAUSTED,
	// DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL, CANCELLED for callers that gave
	// up, CONNECTION_REFUSED, INVALID_ARGUMENT, ...).
	ByCode map[string]int64 `json:"byCode"`
	// ByTrafficType counts successful calls by the traffic type that served
	// them: PROVISIONED_THROUGHPUT or ON_DEMAND.
	ByTrafficType map[string]int64 `json:"byTrafficType"`
	// ByUsage counts successful calls by Cloud Monitoring's request_type:
	// dedicated (PT), spillover or shared.
	ByUsage map[string]int64 `json:"byUsage"`
	// Tokens counts the tokens of admitted calls by traffic type.
	Tokens map[string]int64 `json:"tokens"`
	// Full counts the 429s of each capacity whose quota was full: provisioned
	// ("Exceeded the Provisioned Throughput"), standard, priority or flex
	// ("Resource exhausted"). A fault's injected 429s count under the tier
	// of a call that was pay-as-you-go alone.
	Full map[string]int64 `json:"full,omitempty"`
	// PeakRequestsPerSecond is the most calls that arrived in one second of
	// scenario time, and PeakSecond is that second.
	PeakRequestsPerSecond int64 `json:"peakRequestsPerSecond"`
	PeakSecond            int   `json:"peakSecond"`
	// SecondsOverCapacity counts the scenario seconds in which more calls
	// arrived than the capacity; LongestOverCapacity is the longest run of
	// consecutive such seconds. Both are zero for an unlimited region.
	SecondsOverCapacity int `json:"secondsOverCapacity"`
	LongestOverCapacity int `json:"longestOverCapacity"`
	// PerSecond is the histogram, one entry per scenario second from zero.
	PerSecond []SecondStats `json:"perSecond,omitempty"`
}

// SecondStats is one second of scenario time in one region, the calls
// counted in the second they arrived.
type SecondStats struct {
	Second    int   `json:"second"`
	Requests  int64 `json:"requests"`
	Served    int64 `json:"served"`
	Throttled int64 `json:"throttled"`
	// PTFull counts, of Throttled, the calls refused because the region's
	// PT was full (its window held no room for them: RegionStats.Full's
	// FullProvisioned); the rest were a pay-as-you-go quota's or a fault's.
	PTFull    int64 `json:"ptFull,omitempty"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled,omitempty"`
}

// stats snapshots the region.
func (r *region) stats() RegionStats {
	capacity := r.sc.RequestsPerSecond(r.cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := RegionStats{
		Name:                      r.cfg.Name,
		Tier:                      r.cfg.Tier,
		CapacityRequestsPerSecond: capacity,
		ByCode:                    maps.Clone(r.byCode),
		ByTrafficType:             maps.Clone(r.byTraffic),
		ByUsage:                   maps.Clone(r.byUsage),
		Tokens:                    maps.Clone(r.tokens),
		Full:                      maps.Clone(r.full),
		PerSecond:                 make([]SecondStats, len(r.seconds)),
	}
	for i, s := range r.seconds {
		rs.PerSecond[i] = SecondStats{Second: i, Requests: s.requests, Served: s.served, Throttled: s.throttled, PTFull: s.ptFull, Failed: s.failed, Cancelled: s.cancelled}
	}
	rs.summarize()
	return rs
}

// Until is the region's stats for the calls that arrived in the first n
// seconds of scenario time: PerSecond cut there, and Requests, the peak and
// the seconds over capacity counted over what is left. The counts that are
// not kept by second (ByCode, ByTrafficType, ByUsage, Tokens) stay whole.
func (rs RegionStats) Until(n int) RegionStats {
	rs.PerSecond = rs.PerSecond[:min(max(n, 0), len(rs.PerSecond))]
	rs.summarize()
	return rs
}

// summarize counts Requests, the peak and the seconds over capacity from
// PerSecond.
func (rs *RegionStats) summarize() {
	rs.Requests, rs.PeakRequestsPerSecond, rs.PeakSecond = 0, 0, 0
	rs.SecondsOverCapacity, rs.LongestOverCapacity = 0, 0
	run := 0
	for i, s := range rs.PerSecond {
		rs.Requests += s.Requests
		if s.Requests > rs.PeakRequestsPerSecond {
			rs.PeakRequestsPerSecond, rs.PeakSecond = s.Requests, i
		}
		if c := rs.CapacityRequestsPerSecond; c > 0 && float64(s.Requests) > c {
			rs.SecondsOverCapacity++
			run++
			rs.LongestOverCapacity = max(rs.LongestOverCapacity, run)
		} else {
			run = 0
		}
	}
}

// consumed is the region's tokens per second by usage kind over scenario
// seconds [from, to).
func (r *region) consumed(from, to int) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	if to <= from {
		return out
	}
	for i := max(from, 0); i < to && i < len(r.seconds); i++ {
		for k, v := range r.seconds[i].tokens {
			out[k] += v
		}
	}
	for k := range out {
		out[k] /= float64(to - from)
	}
	return out
}

// WriteSummary writes one line per region: arrivals, peak against capacity,
// seconds over capacity and outcomes. The per-second histogram is left out.
func (s Stats) WriteSummary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s at %s\n", s.Scenario, s.Elapsed.Truncate(time.Second))
	for _, r := range s.Regions {
		fmt.Fprintf(&b, "  %-20s %-11s requests=%d peak=%d/s@%ds capacity=%.1f/s overCapacity=%ds (longest %ds) outcomes=%s traffic=%s\n",
			r.Name, r.Tier, r.Requests, r.PeakRequestsPerSecond, r.PeakSecond, r.CapacityRequestsPerSecond,
			r.SecondsOverCapacity, r.LongestOverCapacity, formatCounts(r.ByCode), formatCounts(r.ByTrafficType))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}
