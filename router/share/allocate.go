package share

import (
	"math"
	"sort"
)

// Peer is one router's entry in one epoch of the store: what it published for
// one pool.
type Peer struct {
	// ID names the router (its pod name by default).
	ID string
	// Replicas is how many routers it counted in its cluster.
	Replicas int
	// Demand is its calls per second to the pool, admitted and refused.
	Demand float64
	// Share is the share it took from the epoch before, 0 if none.
	Share float64
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
//
// Shares are sticky: while every router's demand share stays within Band of
// the share it took last, and those shares fit in P/N, every router keeps
// its last share. Demand counted over a few seconds is noisy, and each
// change costs the routers a grow delay at the lower of two shares; the
// routers read the last shares from the same snapshot, so they keep or drop
// them together.
func Allocate(peers []Peer, id string) (float64, bool) {
	s, ok := allocate(peers, id)
	if !ok || !sticky(peers) {
		return s, ok
	}
	for _, p := range peers {
		if p.ID == id {
			return p.Share, true
		}
	}
	return s, ok
}

// Band is how far a router's demand share may move from the share it took
// before it takes another: 5 points plus a fifth of its share.
func Band(share float64) float64 { return 0.05 + 0.2*share }

// sticky reports whether every router of the snapshot keeps its last share:
// each has one, each is within Band of its new demand share, and together
// they fit in the routers' part.
func sticky(peers []Peer) bool {
	n := len(peers)
	var sum float64
	for _, p := range peers {
		n = max(n, p.Replicas)
		sum += p.Share
	}
	if sum > float64(len(peers))/float64(n)+1e-9 {
		return false
	}
	for _, p := range peers {
		s, _ := allocate(peers, p.ID)
		if p.Share <= 0 || math.Abs(s-p.Share) > Band(p.Share) {
			return false
		}
	}
	return true
}

// allocate is Allocate without stickiness.
func allocate(peers []Peer, id string) (float64, bool) {
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

// Part is what one router takes of a pool: its share and, when it knows every
// router's share from one snapshot, its place among them, so that whole calls
// can be handed out without losing the fractions.
//
// A region counts calls over a one-second window: a router with a share of
// 5/3 calls a second can make only one call in any second, and three such
// routers use 3 of the 5. Rounding down loses what the fractions add up to;
// rounding up overshoots. From a common snapshot the routers instead hand out
// the whole calls by largest remainder (Hamilton's method): each takes the
// floor of its part, and the calls left go one each to the largest fractions,
// ties to the first in the snapshot's order, so every router computes the
// same assignment and the parts add up to the floor of the whole, never more.
type Part struct {
	// Share is the router's share of the cluster's capacity, in (0, 1].
	Share float64
	// shares are every ranked router's shares in the snapshot's order, and
	// self the router's index among them; self is -1 when the router does not
	// know the others' (the static share), and it then rounds down.
	shares []float64
	self   int
	// absent routers of n published nothing; each takes its static share,
	// rounded down, so those calls are not handed out.
	absent, n int
}

// StaticPart is the part of a router that takes 1/n and knows no ranks: it
// rounds its calls down.
func StaticPart(n int) Part {
	n = max(n, 1)
	return Part{Share: 1 / float64(n), self: -1, n: n}
}

// RankedPart is the part of router rank (0 to n-1) of n routers that each
// take 1/n and rank themselves the same way: the whole calls left over go
// to the first ranks.
func RankedPart(n, rank int) Part {
	p := StaticPart(n)
	if rank < 0 || rank >= p.n {
		return p
	}
	p.self = rank
	p.shares = make([]float64, p.n)
	for i := range p.shares {
		p.shares[i] = p.Share
	}
	return p
}

// staticPart is the static part a counter gives: ranked when it knows the
// router's place.
func staticPart(c Counter) Part {
	if r, ok := c.(Ranker); ok {
		if rank, ok := r.Rank(); ok {
			return RankedPart(c.Replicas(), rank)
		}
	}
	return StaticPart(c.Replicas())
}

// DemandPart is router id's part from one closed epoch's entries, and false
// when id has no entry there (Allocate).
func DemandPart(peers []Peer, id string) (Part, bool) {
	s, ok := Allocate(peers, id)
	if !ok {
		return Part{}, false
	}
	p := Part{Share: s, n: len(peers)}
	for _, q := range peers {
		p.n = max(p.n, q.Replicas)
	}
	p.absent = p.n - len(peers)
	for i, q := range peers {
		if q.ID == id {
			p.self = i
		}
		sq, _ := Allocate(peers, q.ID)
		p.shares = append(p.shares, sq)
	}
	return p, true
}

// Calls is the router's calls a second of a region the cluster may call k
// times a second. When the cluster has a whole call or more, the router gets
// whole calls: its floor of k × share, plus one if its remainder is among the
// largest when it is ranked. Below one call a second, when no whole call can
// be handed out, it gets k × share, which the policy paces evenly.
func (p Part) Calls(k float64) float64 {
	mine, _ := p.calls(k, 0)
	return mine
}

// calls is Calls with the routers' order for equal remainders rotated to
// begin at rank start, and the number of calls left over after the floors
// that it handed out. Scale hands out the regions of a pool in turn, each
// starting where the last one's leftovers ended: with equal shares every
// region's remainders are equal, and ties always broken toward the first
// ranks would give those ranks every region's leftover call (three routers
// over regions of 6, 5 and 4 calls a second: 6, 5 and 4 in all) where
// turning round the ranks gives each 5. A router's calls are metered in
// windows of its own, whose losses grow as their capacity shrinks (see
// Scale), so uneven totals for equal shares cost calls.
func (p Part) calls(k float64, start int) (mine float64, handed int) {
	whole := floor(k)
	if whole < 1 {
		return k * p.Share, 0
	}
	if p.self < 0 || p.self >= len(p.shares) {
		return floor(k * p.Share), 0
	}
	n := len(p.shares)
	floors := make([]float64, n)
	rems := make([]float64, n)
	left := whole - float64(p.absent)*floor(k/float64(max(p.n, 1)))
	for i, s := range p.shares {
		floors[i] = floor(k * s)
		left -= floors[i]
		// Rounded so that equal shares have equal remainders whatever the
		// last bits of their products.
		rems[i] = math.Round((k*s-floors[i])*1e9) / 1e9
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	turn := func(i int) int { return ((i-start)%n + n) % n }
	sort.Slice(order, func(a, b int) bool {
		ra, rb := rems[order[a]], rems[order[b]]
		if ra != rb {
			return ra > rb
		}
		return turn(order[a]) < turn(order[b])
	})
	// Hand out what is left one call at a time, round the order; more than
	// one round only when the absent routers' fractions are left too.
	mine = floors[p.self]
	for i := 0; left >= 1; i++ {
		if order[i%n] == p.self {
			mine++
		}
		left--
		handed++
	}
	return mine, handed
}

// floor rounds down, forgiving the last bits of floating point: 6 × 1/3 is
// two calls, not one.
func floor(x float64) float64 { return math.Floor(x + 1e-9) }
