package share

// Peer is one router's entry in one epoch of the store: what it published for
// one pool.
type Peer struct {
	// ID names the router (its pod name by default).
	ID string
	// Replicas is how many routers it counted in its cluster.
	Replicas int
	// Demand is its calls per second to the pool, admitted and refused.
	Demand float64
}

// Floor is the least a router that published an entry takes, as a part of an
// equal split among the routers that did: a router that has just started, or
// whose clients just moved to it, still has some capacity until the next
// epoch shows its demand.
const Floor = 0.1

// Allocate is the replica share of router id from the entries peers of one
// closed epoch of a pool, and false when id has no entry there: it then takes
// its static share, 1/N, which Allocate leaves to every router without one.
//
// With P routers in the epoch and N = max(P, the largest replica count any
// of them published), the P routers share P/N of the capacity, each in
// proportion to its demand but never under Floor/P of the equal split;
// N-P static shares of 1/N remain for the routers that published nothing.
// Every router computes from the same closed epoch, so the shares add up to
// exactly one:
//
//	Σ_{j∈P} P/N × w_j/Σw + (N−P) × 1/N = 1,  w_j = max(d_j/D, Floor/P)
//
// With no demand at all (D = 0) the P routers split P/N evenly.
func Allocate(peers []Peer, id string) (float64, bool) {
	self, n := -1, len(peers)
	var total float64
	for i, p := range peers {
		if p.ID == id {
			self = i
		}
		n = max(n, p.Replicas)
		total += max(p.Demand, 0)
	}
	if self < 0 {
		return 0, false
	}
	part := float64(len(peers)) / float64(n)
	if total <= 0 {
		return part / float64(len(peers)), true
	}
	floor := Floor / float64(len(peers))
	weight := func(p Peer) float64 { return max(max(p.Demand, 0)/total, floor) }
	var sum float64
	for _, p := range peers {
		sum += weight(p)
	}
	return part * weight(peers[self]) / sum, true
}
