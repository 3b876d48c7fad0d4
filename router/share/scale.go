package share

import (
	"math"

	"github.com/regionwarden/regionwarden/router/table"
)

// Of is the share a router takes of a pool whose replica share is replica:
// the pool's cluster share (policy.capacityShare, percent; 0 is the default,
// 100) times replica, within (0, 1].
func Of(p *table.Pool, replica float64) float64 {
	cluster := p.Policy.CapacityShare
	if cluster == 0 {
		cluster = table.DefaultCapacityShare
	}
	return clamp(float64(cluster) / 100 * replica)
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

// Scale returns the pool as a router with share s of it meters it: every
// region's requests and tokens per second, provisioned and shared alike,
// times s; the in-flight limits of each region times s, rounded up and at
// least one, since a region's concurrency is shared like its rate (Little's
// law: in flight = rate × latency). GSUs, the pool-wide in-flight cap (it
// protects this router, not the regions) and everything else are kept. s is
// clamped to (0, 1]; a share of one returns the pool as it is. p is not
// modified.
func Scale(p table.Pool, s float64) table.Pool {
	s = clamp(s)
	if s == 1 {
		return p
	}
	p.Regions = append([]table.Region(nil), p.Regions...)
	for i := range p.Regions {
		c := &p.Regions[i].Capacity
		c.RequestsPerSecond *= s
		c.TokensPerSecond *= s
	}
	p.Policy.Default() // limits left zero are scaled from their defaults
	cc := &p.Policy.Concurrency
	cc.RegionInitialLimit = scaleLimit(cc.RegionInitialLimit, s)
	cc.RegionMaxLimit = scaleLimit(cc.RegionMaxLimit, s)
	return p
}

// scaleLimit is an in-flight limit times s, rounded up, at least one.
func scaleLimit(limit int, s float64) int {
	return max(int(math.Ceil(float64(limit)*s)), 1)
}
