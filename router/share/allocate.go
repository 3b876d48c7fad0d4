package share

import (
	"math"
	"slices"
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
	// Absent marks a router with no entry in the epoch that published one
	// in an epoch of the store's roster (ExchangeOptions.Keep): Share is the
	// last share it published, which it may go on taking while the store
	// does not answer it (Options.Hold). Replicas and Demand are zero.
	Absent bool
	// Calls is how many calls Demand counts, when Counted: an entry of an
	// earlier version carries no count.
	Calls   uint64
	Counted bool
}

// Floor is the least a router that published an entry takes, as a part of an
// equal split among the routers that did: a router that has just started, or
// whose clients just moved to it, still has some capacity until the next
// epoch shows its demand.
const Floor = 0.1

// Allocate is the replica share of router id from the entries peers of one
// closed epoch of a pool, and false when id has no entry there: it then takes
// its static share, 1/N, or the share it holds (Options.Hold).
//
// With P routers in the epoch and N = max(P, the largest replica count any
// of them published), N-P routers of the cluster published nothing in it.
// Each keeps a reserve: the largest of 1/N and the last share it published
// (an absent peer of the store's roster, which may hold it while cut off
// from the store), the largest such shares first. The P routers share what
// the reserves leave, each in proportion to its demand but never under
// Floor/P of the equal split. Every router computes from the same closed
// epoch, so the shares and reserves add up to exactly one:
//
//	Σ_{j∈P} (1−R) × w_j/Σw + R = 1,  w_j = max(d_j/D, Floor/P),  R = Σ reserves
//
// With no roster entries R = (N−P)/N: each absent router's static share.
// With no demand at all (D = 0) the P routers split 1−R evenly.
//
// Shares are sticky: while every router's demand share stays within its
// band of the share it took last, and those shares fit in 1−R, every router
// keeps its last share. Each change costs the routers a grow delay at the
// lower of two shares (for a PT counted over 40 s, 40 s of the part the
// shrinking routers gave up), so the shares move only on evidence that the
// demand moved. The band is the larger of Band and Noise standard errors of
// the demand share as counted, were the share in force w the demand's: a
// demand share from n calls in all is then binomial, with a standard error
// of sqrt(w(1−w)/n). Ten calls say next to nothing of how the demand
// splits, a thousand say it to within a point or two, so routers that have
// just started, or a quiet pool, keep the equal split until their counts
// tell them apart. A router that has no share yet
// counts as holding its equal part of 1−R, when every entry carries its
// count (an earlier version's does not, and then every router, whichever
// its version, takes shares as that version does: the routers read the same
// snapshot and must agree). The routers read the last shares from the same
// snapshot, so they keep or drop them together.
func Allocate(peers []Peer, id string) (float64, bool) {
	present, _, out := shares(peers)
	for i, p := range present {
		if p.ID == id {
			return out[i], true
		}
	}
	return 0, false
}

// shares is every present router's share from one epoch's entries, in the
// order of present (split), and the replica count N: the shares in force
// when they are kept, else by demand. Computed once for all the routers
// (DemandPart needs each one's).
func shares(peers []Peer) (present []Peer, n int, out []float64) {
	present, n, part, _ := split(peers)
	byDemand := demandShares(present, part)
	if last := kept(present, part, byDemand); last != nil {
		return present, n, last
	}
	return present, n, byDemand
}

// Band is how far a router's demand share may move from the share it took
// before it takes another, whatever the counts: 5 points plus a fifth of its
// share.
func Band(share float64) float64 { return 0.05 + 0.2*share }

// Noise is how many standard errors of its count a router's demand share
// may move before the shares follow it. Every router tests the same snapshot
// each exchange, a few times a second, over windows that overlap: at one or
// two standard errors counting noise alone would move the shares every few
// seconds; three leave it about three chances in a thousand a test, and a
// test's window shares all but a few of its calls with the one before.
const Noise = 3

// kept returns the shares the present routers of one epoch keep, in their
// order, or nil when they take byDemand, their shares by demand (Allocate).
func kept(present []Peer, part float64, byDemand []float64) []float64 {
	counted := true
	var calls uint64
	for _, p := range present {
		counted = counted && p.Counted
		calls += p.Calls
	}
	last := make([]float64, len(present))
	var sum float64
	for i, p := range present {
		last[i] = p.Share
		if p.Share <= 0 {
			if !counted {
				return nil
			}
			last[i] = part / float64(len(present))
		}
		sum += last[i]
	}
	if sum > part+1e-9 {
		return nil
	}
	for i := range present {
		band := Band(last[i])
		if counted {
			band = max(band, part*noise(last[i]/part, calls))
		}
		if math.Abs(byDemand[i]-last[i]) > band {
			return nil
		}
	}
	return last
}

// noise is Noise standard errors of a demand share counted from n calls,
// were w the demand's: with no call counted, any share is as likely as
// another.
func noise(w float64, n uint64) float64 {
	if n == 0 {
		return math.Inf(1)
	}
	w = min(max(w, 0), 1)
	return Noise * math.Sqrt(w*(1-w)/float64(n))
}

// split reads one epoch's entries: the routers present in it (in its
// order), the replica count N, the part the present routers share, and the
// reserves of the N-P routers absent from it, largest first (Allocate).
func split(peers []Peer) (present []Peer, n int, part float64, reserves []float64) {
	var held []float64
	for _, p := range peers {
		if p.Absent {
			held = append(held, p.Share)
			continue
		}
		present = append(present, p)
		n = max(n, p.Replicas)
	}
	n = max(n, len(present), 1)
	static := 1 / float64(n)
	// The largest shares first: the routers still counted are some of the
	// absent ones, and whichever they are, what they hold is covered.
	sort.Sort(sort.Reverse(sort.Float64Slice(held)))
	part = 1
	for i := range n - len(present) {
		r := static
		if i < len(held) {
			r = max(r, held[i])
		}
		reserves = append(reserves, r)
		part -= r
	}
	// Shares published from allocations that added up to one leave room for
	// the present routers; this floor binds only on a roster that says
	// otherwise, and keeps them serving.
	return present, n, max(part, Floor*float64(len(present))/float64(n)), reserves
}

// demandShares is the shares of the present routers by demand, in their
// order: part split in proportion to each one's demand, none under the
// floor (Allocate).
func demandShares(present []Peer, part float64) []float64 {
	out := make([]float64, len(present))
	var total float64
	for _, p := range present {
		total += max(p.Demand, 0)
	}
	if total <= 0 {
		for i := range out {
			out[i] = part / float64(len(present))
		}
		return out
	}
	floor := Floor / float64(len(present))
	var sum float64
	for i, p := range present {
		out[i] = max(max(p.Demand, 0)/total, floor)
		sum += out[i]
	}
	for i := range out {
		out[i] *= part / sum
	}
	return out
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
	// reserves are the shares of the routers of n absent from the snapshot
	// (Allocate), largest first; the first rostered are the shares of the
	// store's roster, which their routers may hold (Part.within): their calls
	// are counted rounded up, the others' (static shares) rounded down, and
	// those calls are not handed out.
	reserves []float64
	rostered int
	n        int
	// within, when set, are the parts of the last epochs a router holds
	// while the store does not answer it (Controller.holdPart): of each
	// region it takes the least calls any of them hands it, and at most its
	// share rounded up, which the others count for it (Scale).
	within []Part
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
	present, n, out := shares(peers)
	self := slices.IndexFunc(present, func(q Peer) bool { return q.ID == id })
	if self < 0 {
		return Part{}, false
	}
	p := Part{Share: out[self], n: n, self: self, shares: out}
	p.reserves, p.rostered = reservesOf(peers)
	return p, true
}

// Calls is the router's calls a second of a region the cluster may call k
// times a second. When the cluster has a whole call or more, the router gets
// whole calls: its floor of k × share, plus one if its remainder is among the
// largest when it is ranked. Below one call a second, when no whole call can
// be handed out, it gets k × share, which the policy paces evenly. A held
// part (within) gets the least of its epochs' calls, at most its share
// rounded up, as in the first region Scale scales.
func (p Part) Calls(k float64) float64 {
	if len(p.within) > 0 && k >= 1 {
		least := ceil(k * p.Share)
		for _, w := range p.within {
			least = min(least, w.Calls(k))
		}
		return least
	}
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
	left := whole - reservedCalls(k, p.reserves, p.rostered)
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
	// Reserves rounded up can leave less than the floors: take calls back
	// one at a time from the smallest fractions up, round the order.
	for took := true; left <= -1 && took; {
		took = false
		for j := n - 1; j >= 0 && left <= -1; j-- {
			if i := order[j]; floors[i] >= 1 {
				floors[i]--
				left++
				took = true
			}
		}
		mine = floors[p.self]
	}
	return mine, handed
}

// reservedCalls is how many of a region's k calls a second reserves keep
// for the routers absent from an epoch: the first rostered (shares their
// routers may hold) rounded up, the rest (static shares) rounded down.
func reservedCalls(k float64, reserves []float64, rostered int) float64 {
	var sum float64
	for i, r := range reserves {
		if i < rostered {
			sum += ceil(k * r)
		} else {
			sum += floor(k * r)
		}
	}
	return sum
}

// reservesOf is the reserves of one closed epoch's entries (Allocate),
// largest first, and how many of them are shares of the store's roster.
func reservesOf(peers []Peer) (reserves []float64, rostered int) {
	_, _, _, reserves = split(peers)
	for _, q := range peers {
		if q.Absent && rostered < len(reserves) {
			rostered++
		}
	}
	return reserves, rostered
}

// floor rounds down, forgiving the last bits of floating point: 6 × 1/3 is
// two calls, not one.
func floor(x float64) float64 { return math.Floor(x + 1e-9) }

// ceil rounds up, forgiving the last bits of floating point: 3 × 1/3 is one
// call, not two.
func ceil(x float64) float64 { return math.Ceil(x - 1e-9) }
