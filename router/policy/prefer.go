package policy

import "github.com/regionwarden/regionwarden/router/table"

// Among capacities of one rank, the ones that fail fewer calls first.
//
// A rank holds capacities the pool values alike: the PTs of regions that
// answer, or one pay-as-you-go tier of every region that offers it. choose
// draws among them in proportion to their weights, which spreads the calls
// over them. That is right while they serve calls alike, and it is how a
// sudden failure of one of them reaches only its share. It is wrong when one
// of them fails a steady share of what it is sent that is too small to
// eject or demote it: a region whose latency tail runs past the callers'
// deadline (a p99 of five seconds under a three-second deadline loses one
// call in twelve there), one that answers a few calls in a hundred with a
// 504. Spread by weight, it is sent its share of the calls while a region of
// the same rank beside it, which fails none of them, has room for them.
//
// So, before drawing in a rank, choose holds back the capacities whose
// regions fail a share of their calls over the ejection interval that is
// higher than the least-failing region's of the rank by more than chance
// explains (a two-proportion z-test, below), each side judged on at least
// minRequests ended attempts. The rest are drawn by weight as before; the
// held ones take what those have no room for, in the same rank, before any
// capacity of a lower rank. That is right by construction, with no
// threshold of its own but the test's:
//
//   - Calls are moved only within a rank, so only between capacities the
//     pool already values alike: no call leaves a PT for pay-as-you-go, nor
//     a cheaper tier for a dearer one, for it.
//   - A held capacity loses nothing it would have served: it is the next to
//     be drawn once the others refuse (their meters, in-flight limits and
//     throttles decide, as they do for any call), so what the rank can take
//     in all is unchanged. Where a rank's capacities are all needed, all are
//     used.
//   - A call sent to the region that fails fewer of them is, on the evidence,
//     likelier to be served there: the expected number of calls served is
//     greatest when each capacity is filled in order of its chance to serve
//     them, which is what the hold does with what it knows.
//   - Regions that serve alike are not told apart (the test finds no
//     difference beyond chance at one in forty-four, z = 2), so a rank of
//     healthy regions is spread by weight as before, and a sudden failure of
//     one of them still reaches only its share.
//   - Nothing is held for good: the held regions still take the overflow,
//     and the least-failing region is judged on what it is sent; if moving
//     calls to it makes it fail more (a region that fails under load), its
//     own window shows it and the order turns. A region with too few ended
//     attempts to judge (under minRequests, say one that took nothing for an
//     interval) is never held: what it is sent is how it is measured again.
//   - A caller cannot use it against the others. What a region's window
//     counts is what ejection counts: a caller's own faults, the failures
//     of a caller that fails alone (blame.go) and the attempts its own
//     short deadline cut off are not the region's. What is left moves
//     calls between capacities of one rank, never out of the pool.
//
// Held or not, a region's ejection and demotion are unchanged: this orders
// the capacities that answer, it removes none.

// preferZ2 is the square of the z score over which a region's failure
// share counts as higher than the least-failing region's of its rank:
// z = 2, a chance of about one in forty-four (one-sided) that two regions
// serving alike are told apart. The cost of that error is an uneven
// spread over equals for a moment; the cost of the other (a real
// difference passed over) is the calls the worse region fails.
const preferZ2 = 4

// rankHeld is the rank of a candidate held back by holdWorse: counted in no
// rank until unhold restores it.
const rankHeld = -2

// failShare is a region's ended attempts and failures over the ejection
// interval, for holdWorse.
type failShare struct{ answered, failed int64 }

// worseThan reports whether f fails a higher share of its attempts than b
// by more than chance explains (preferZ2), both judged on at least min
// ended attempts. The difference is taken less Yates' continuity
// correction, half of 1/f.answered + 1/b.answered: the normal
// approximation alone tells apart too often on a handful of attempts (one
// failure in five against none in fifty; a region failing one call in
// fifty fails one of five one time in ten), as behind many routers, where
// minRequests is each one's share, down to five.
func (f failShare) worseThan(b failShare, min int64) bool {
	if !f.judged(min) || !b.judged(min) {
		return false
	}
	inv := 1/float64(f.answered) + 1/float64(b.answered)
	d := float64(f.failed)/float64(f.answered) - float64(b.failed)/float64(b.answered) - inv/2
	if d <= 0 {
		return false
	}
	pooled := float64(f.failed+b.failed) / float64(f.answered+b.answered)
	return d*d > preferZ2*pooled*(1-pooled)*inv
}

// judged reports whether f counts at least min ended attempts (and one).
func (f failShare) judged(min int64) bool { return f.answered >= max(min, 1) }

// below reports whether f fails a smaller share of its attempts than b.
func (f failShare) below(b failShare) bool { return f.failed*b.answered < b.failed*f.answered }

// holdWorse moves the candidates of rank whose regions fail significantly
// more of their calls than the least-failing region of the rank (see
// above) to rankHeld, and reports whether it held any. It reads the
// failure windows only when the rank has candidates in two regions or
// more.
func (cs *candidates) holdWorse(st *poolState, rank int8, now int64) bool {
	if rank == rankProbe {
		// A probe asks whether its region answers again: it is no
		// capacity to fill, and each demoted region's is its own.
		return false
	}
	if cs.stale&(1<<rank) != 0 {
		cs.sum(st, rank)
	}
	if cs.count[rank] < 2 {
		return false
	}
	// shares is indexed by region (slot), which may have several lanes
	// in a rank (every lane of a demoted region ranks rankDemoted).
	var shares [table.MaxRegions]failShare
	idx := bucketOf(now, st.failWidth)
	best := -1
	for c := range cs.n {
		if cs.rank[c] != rank {
			continue
		}
		i := int(cs.k[c] / laneCount)
		shares[i].answered, shares[i].failed = st.slots[i].r.fails.sum(idx)
		if shares[i].judged(st.minRequests) && (best < 0 || shares[i].below(shares[best])) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	held := false
	for c := range cs.n {
		if cs.rank[c] == rank && shares[cs.k[c]/laneCount].worseThan(shares[best], st.minRequests) {
			cs.rank[c] = rankHeld
			held = true
		}
	}
	if held {
		cs.stale |= 1 << rank
	}
	return held
}

// unhold returns the candidates holdWorse held to rank.
func (cs *candidates) unhold(rank int8) {
	for c := range cs.n {
		if cs.rank[c] == rankHeld {
			cs.rank[c] = rank
		}
	}
	cs.stale |= 1 << rank
}
