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
// one-second window. The leftover calls of each region go round the routers
// from where the last region's ended, so that routers of equal shares get
// equal totals within one call.
//
// The in-flight limits of each region are times the router's whole share,
// rounded up and at least one, since a region's concurrency is shared like
// its rate (Little's law: in flight = rate × latency). GSUs (the order's
// size), the pool-wide in-flight cap (it protects this router, not the
// regions) and everything else are kept. A router that takes everything gets
// the pool as it is. p is not modified.
//
// What a share costs: a router's windows are its own, and a call that finds
// them full is refused even when another router's have room. A one-second
// window of k calls admits calls as k servers each held for one second do,
// so under calls arriving at random it loses Erlang's B(k, A) of an offered
// A calls a second, which grows as k and A are divided among routers: at 20
// calls a second for 15, one router serves 13.4, three routers of 5 each
// 11.9 together. Shares that follow demand keep each router's k in
// proportion to its A; only a meter the routers share pools the rest: with
// a store, Meter, and the share meters requests only when it does not
// answer.
func Scale(p table.Pool, part Part) table.Pool {
	if len(part.within) > 0 {
		return scaleWithin(p, part)
	}
	c := cluster(&p)
	s := Of(&p, part.Share)
	if s == 1 {
		return p
	}
	p.Regions = append([]table.Region(nil), p.Regions...)
	start := 0 // where the next region's leftover calls begin (Part.calls)
	for i := range p.Regions {
		cp := &p.Regions[i].Capacity
		if cp.RequestsPerSecond > 0 {
			calls, handed := part.calls(cp.RequestsPerSecond*c, start)
			cp.RequestsPerSecond = max(calls, minRate)
			start += handed
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

// scaleWithin is Scale for a held part (Part.within): its share scales the
// tokens and limits, and each region's calls are the least that any of its
// epochs' parts hands it there (each computed in that part's own order of
// regions), at most the share's rounded up.
func scaleWithin(p table.Pool, part Part) table.Pool {
	out := Scale(p, Part{Share: part.Share, self: -1, n: part.n})
	least := make([]float64, len(p.Regions))
	for i := range least {
		least[i] = math.Inf(1)
	}
	for _, w := range part.within {
		sw := Scale(p, w)
		for i := range least {
			least[i] = min(least[i], sw.Regions[i].Capacity.RequestsPerSecond)
		}
	}
	c := cluster(&p)
	for i := range out.Regions {
		// Below one call a second the share paces the calls (Part.calls).
		if k := p.Regions[i].Capacity.RequestsPerSecond * c; k >= 1 {
			out.Regions[i].Capacity.RequestsPerSecond = max(min(least[i], ceil(k*part.Share)), minRate)
		}
	}
	return out
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
