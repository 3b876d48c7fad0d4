package share

import (
	"math"

	"github.com/regionwarden/regionwarden/router/table"
)

// Of is the share a router takes of a pool whose replica share is replica:
// the pool's cluster share (policy.capacityShare, percent; 0 is the default,
// 100) times replica, within (0, 1].
func Of(p *table.Pool, replica float64) float64 {
	return clamp(cluster(p) * replica)
}

// cluster is the pool's cluster share as a fraction.
func cluster(p *table.Pool) float64 {
	c := p.Policy.CapacityShare
	if c == 0 {
		c = table.DefaultCapacityShare
	}
	return float64(c) / 100
}

// clamp keeps a share within (0, 1]: a router always has some capacity, never
// more than the whole.
func clamp(s float64) float64 {
	if !(s > minShare) { // NaN too
		return minShare
	}
	return min(s, 1)
}

// minShare is the smallest share a router takes: one in a million.
const minShare = 1e-6

// Scale returns the pool as a router with part meters it. Each region's
// capacity is first cut to the cluster's share (policy.capacityShare), then
// to the router's part of that: tokens per second times the share; requests
// per second in whole calls (Part.Calls), since regions count calls in a
// one-second window. The in-flight limits of each region are times the
// router's whole share, rounded up and at least one, since a region's
// concurrency is shared like its rate (Little's law: in flight = rate ×
// latency). GSUs (the order's size), the pool-wide in-flight cap (it
// protects this router, not the regions) and everything else are kept. A
// router that takes everything gets the pool as it is. p is not modified.
func Scale(p table.Pool, part Part) table.Pool {
	c := cluster(&p)
	s := Of(&p, part.Share)
	if s == 1 {
		return p
	}
	p.Regions = append([]table.Region(nil), p.Regions...)
	for i := range p.Regions {
		cp := &p.Regions[i].Capacity
		if cp.RequestsPerSecond > 0 {
			cp.RequestsPerSecond = max(part.Calls(cp.RequestsPerSecond*c), minRate)
		}
		cp.TokensPerSecond *= s
	}
	p.Policy.Default() // limits left zero are scaled from their defaults
	cc := &p.Policy.Concurrency
	cc.RegionInitialLimit = scaleLimit(cc.RegionInitialLimit, s)
	cc.RegionMaxLimit = scaleLimit(cc.RegionMaxLimit, s)
	e := &p.Policy.Ejection
	e.MinRequests = max(scaleLimit(e.MinRequests, s), min(e.MinRequests, minEvidence))
	return p
}

// minEvidence is the fewest answers a router with a small share judges a
// region on.
const minEvidence = 5

// minRate is the requests per second of a region whose every whole call this
// router left to the others: one call in a million seconds. Zero would mean
// "unknown", that is unbounded.
const minRate = 1e-6

// scaleLimit is an in-flight limit times s, rounded up, at least one.
func scaleLimit(limit int, s float64) int {
	return max(int(math.Ceil(float64(limit)*s)), 1)
}
