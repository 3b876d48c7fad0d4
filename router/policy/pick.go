package policy

import (
	"math/bits"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Start begins a call.
func (p *Pool) Start(req Request) Call { return Call{p: p, st: start(req)} }

// pick chooses the region for the next attempt of a call. Caps are checked
// from the widest to the narrowest: deadline, attempts, retry budget, the
// pool's in-flight cap, then each region's ejection, in-flight limit,
// throttle and capacity.
func (p *Pool) pick(cs callState) (callState, Attempt, error) {
	st := p.st.Load()
	now := p.nanos()
	if err := cs.check(now, st.maxAttempts); err != nil {
		return cs, Attempt{}, err
	}
	retry := cs.n > 0
	fallback := false
	if retry && !p.budget.allow(now, st.budgetPct, st.minRetries) {
		if !fallbackRetry(&cs, now) {
			return cs, Attempt{}, ErrBudgetExhausted
		}
		fallback = true
	}
	if g := p.inFlight.Add(1); g > ceiling(st.maxInFlight, cs.prio) {
		p.inFlight.Add(-1)
		ref := refusal{shed: g <= st.maxInFlight}
		return cs, Attempt{}, ref.err(cs.prio)
	}
	s, charged, err := p.choose(st, &cs, now, retry, fallback)
	if err != nil {
		p.inFlight.Add(-1)
		return cs, Attempt{}, err
	}
	if retry {
		p.budget.retry(now)
	} else {
		p.budget.request(now)
	}
	n := cs.record(s.r, charged, now)
	return cs, Attempt{Region: s.name, Endpoint: s.endpoint, Tier: s.tier, n: n}, nil
}

// fallbackRetry reports whether a retry is the fallback of reserved capacity
// that fails intermittently, which the retry budget does not bound: the last
// attempt failed (not 429) on a provisioned region that is not demoted and
// answers most of its calls, at least minRequests over the ejection interval
// with a failure rate under failureRateThreshold. That is the outage this
// project exists for: the provisioned region keeps its first attempts, and
// the calls it drops in a cluster of failures must still be served, even when
// a burst of them outruns the budget.
//
// Such a retry is bounded all the same: it goes only to a region the call has
// not tried (never back to the failing region), within maxAttempts and the
// deadline, and each receiver admits it only within its capacity, its
// in-flight limit and its throttle. So it adds at most failureRateThreshold
// of the provisioned region's calls, and only where there is room for them.
// Once the provisioned region fails at or over the threshold it is demoted
// (or it answers 429), and its retries spend the budget like any other.
func fallbackRetry(cs *callState, now int64) bool {
	if cs.last != Failure || cs.n == 0 {
		return false
	}
	r := cs.targets[cs.n-1]
	s := r.cfg.Load()
	if !s.provisioned || r.demoted.Load() != nil {
		return false
	}
	answered, failed := r.fails.sum(bucketOf(now, s.st.failWidth))
	return answered >= s.st.minRequests && float64(failed) < s.st.threshold*float64(answered)
}

// panicThreshold is Envoy's healthy panic threshold, in percent: when fewer
// than this share of a pool's regions are not ejected, ejections are ignored
// and every region takes traffic again.
const panicThreshold = 50

// Ranks of regions for one attempt, best first. A region the call already
// tried ranks after every untried one (rank + rankTried).
const (
	rankProbe       = iota // a demoted provisioned region whose probe is due (first attempts)
	rankProvisioned        // provisioned, not demoted
	rankShared             // shared, not ejected (or in panic)
	rankDemoted            // provisioned and demoted: what nobody else has room for
	rankTried
	rankCount = 2 * rankTried
	rankNone  = -1 // not a candidate: ejected, or refused this pick
)

// inPanic reports whether too few regions are left un-ejected for ejection to
// be honored.
func (st *poolState) inPanic(now int64) bool {
	return panicking(st.ejected(now), len(st.slots))
}

// panicking reports whether a pool of n regions, ejected of them ejected, is
// below the panic threshold.
func panicking(ejected, n int) bool {
	return ejected > 0 && (n-ejected)*100 < panicThreshold*n
}

// ejected counts the regions ejected at now.
func (st *poolState) ejected(now int64) int {
	k := 0
	for _, s := range st.slots {
		if s.r.ejectedUntil.Load() > now {
			k++
		}
	}
	return k
}

// choose ranks the regions for this attempt and takes the first, in rank order
// and by weight within a rank, that admits the call, with the token cost it
// charged the region in advance. A fallback retry (see fallbackRetry) may go
// only to regions the call has not tried. When no region admits the call it
// returns a *CapacityError.
func (p *Pool) choose(st *poolState, cs *callState, now int64, retry, fallback bool) (*slot, int64, error) {
	var ranks [table.MaxRegions]int8
	var present uint32 // bit r: some region has rank r
	var ref refusal
	ejected := 0
	for i, s := range st.slots {
		if until := s.r.ejectedUntil.Load(); until > now {
			ejected++
			ranks[i] = rankNone
			ref.note(until - now)
			continue
		}
		ranks[i] = rankOf(s, cs, now, retry)
		present |= 1 << ranks[i]
	}
	if panicking(ejected, len(st.slots)) {
		for i, s := range st.slots {
			if ranks[i] == rankNone {
				ranks[i] = rankOf(s, cs, now, retry)
				present |= 1 << ranks[i]
			}
		}
	}
	if fallback {
		present &= 1<<rankTried - 1
	}
	for present != 0 {
		rank := int8(bits.TrailingZeros32(present))
		present &^= 1 << rank
		for {
			i := p.weighted(st, &ranks, rank)
			if i < 0 {
				break
			}
			s := st.slots[i]
			probe := rank == rankProbe
			if probe && !s.r.probe.tick(now, st.probeEvery) {
				// Another call took this probe: it is only demoted.
				ranks[i] = rankDemoted
				present |= 1 << rankDemoted
				continue
			}
			if charged, ok := p.admit(s, cs, now, probe, &ref); ok {
				return s, charged, nil
			}
			ranks[i] = rankNone
		}
	}
	return nil, 0, ref.err(cs.prio)
}

// rankOf is the rank of a region that is not ejected (or in panic) for this
// attempt. A demoted region whose probe is due ranks first on a first
// attempt; choose takes the probe when it picks the region.
func rankOf(s *slot, cs *callState, now int64, retry bool) int8 {
	rank := int8(rankShared)
	if s.provisioned {
		rank = rankProvisioned
		if s.r.demoted.Load() != nil {
			rank = rankDemoted
			if !retry && s.r.probe.next.Load() <= now {
				rank = rankProbe
			}
		}
	}
	if retry && cs.hasTried(s.r) {
		rank += rankTried
	}
	return rank
}

// weighted draws one region of the given rank, in proportion to the regions'
// weights, or returns -1 when the rank has none. A lone candidate costs no
// draw.
func (p *Pool) weighted(st *poolState, ranks *[table.MaxRegions]int8, rank int8) int {
	var total float64
	last, k := -1, 0
	for i, s := range st.slots {
		if ranks[i] == rank {
			total += s.weight
			last = i
			k++
		}
	}
	if k <= 1 {
		return last
	}
	x := p.rnd.float() * total
	for i, s := range st.slots {
		if ranks[i] == rank {
			if x -= s.weight; x < 0 {
				return i
			}
		}
	}
	return last
}

// admit takes a place for the call in region s if the region has headroom:
// room in flight for the call's priority, a throttle draw that lets it
// through, and room under its capacity in the last second. A probe of a
// demoted region skips the throttle: it is the trickle that sees recovery.
// Requests count when admitted. Tokens count in advance at the region's
// average per call: admit returns that charge, which done corrects when the
// call ends. On refusal it notes why in ref and takes nothing.
func (p *Pool) admit(s *slot, cs *callState, now int64, probe bool, ref *refusal) (charged int64, ok bool) {
	r := s.r
	if n := r.inFlight.Add(1); n > ceiling(int64(r.limit.get()), cs.prio) && !s.roomInFlight(n, now, cs.deadline) {
		r.inFlight.Add(-1)
		ref.shed = ref.shed || n <= int64(r.limit.get())
		ref.note(int64(time.Second))
		return 0, false
	}
	if q := r.throttleP(now, s.st); q > 0 && !probe && p.rnd.float() < q {
		r.inFlight.Add(-1)
		ref.note(int64(time.Second))
		return 0, false
	}
	// A slot has a request cost or a token cost, never both (buildSlots), so
	// a refusal below never leaves tokens charged.
	switch {
	case s.tokCost > 0:
		charged = int64(float64(r.tokEst.Load()) * s.tokCost)
		if ok, wait := r.toks.take(now, charged); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	case s.reqCost > rateCapacity:
		if ok, wait := r.slow.take(now, s.reqCost*costUnit); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	case s.reqCost > 0:
		if ok, wait := r.reqs.take(now, s.reqCost); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	}
	return charged, true
}

// roomInFlight reports whether a region over its AIMD limit for the call's
// priority, with n calls in flight counting the one being admitted, still has
// room for a call whose deadline is deadline: it does while it answers and n
// is within the calls its capacity can keep in flight before their deadlines
// (slot.littleLimit), whatever the call's priority. Priorities are shed first
// where a region is overloaded (its AIMD limit, shrunk by 429s and timeouts)
// or the pool is (maxInFlight), never where it is only slow.
func (s *slot) roomInFlight(n, now, deadline int64) bool {
	return n <= s.littleLimit(now, deadline) && s.r.answering(now, s.st)
}

// answering reports whether the region answers: it is not demoted, not
// failing, and its throttle lets every call through.
func (r *region) answering(now int64, st *poolState) bool {
	return r.demoted.Load() == nil && !r.failing(now, st) && r.throttleP(now, st) == 0
}
