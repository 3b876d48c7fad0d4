package policy

import (
	"errors"
	"math/bits"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Start begins a call.
func (p *Pool) Start(req Request) (c Call) {
	// Filled in place: a Call built apart and then copied into the result
	// costs a copy of its whole state, most of it zeros.
	c.p = p
	c.st.start(req)
	p.calls.Add(1)
	return c
}

// pick chooses the region and capacity for the next attempt of a call. Caps
// are checked from the widest to the narrowest: deadline, attempts, retry
// budget, the pool's in-flight cap, then each region's ejection, in-flight
// limit, throttle and capacity. It updates the call's state in place and
// returns the region and lane of the attempt it recorded there.
func (p *Pool) pick(cs *callState) (*slot, uint8, error) {
	st := p.st.Load()
	now := p.nanos()
	if err := cs.check(now, st.maxAttempts); err != nil {
		return nil, 0, err
	}
	if cs.begun == 0 {
		cs.begun = now
	}
	retry := cs.n > 0
	// A retry after a 429 (a full PT, ProvisionedFull, or no room in
	// pay-as-you-go, Capacity) is a spill, which the budget does not bound:
	// Google refused the attempt at once, before the model ran, so the
	// spill repeats no work and adds no load to the region that refused; it
	// goes only to a capacity the call has not tried, and only where that
	// capacity's meter, in-flight limit and throttle admit it. What the
	// budget is for, failures retried onto regions that may be failing
	// because they are overloaded, it still bounds.
	spill := retry && (cs.last == ProvisionedFull || cs.last == Capacity)
	budgeted := retry && !spill // the attempt spends the retry budget
	// below bounds the ranks of the capacities the attempt may take: any,
	// or those the call has not tried (rankTried), or, of those, the ones
	// that answer (rankDemoted).
	below := int8(rankCount)
	if spill {
		below = rankTried
	}
	if budgeted && !p.budget.allow(now, st.budgetPct, st.minRetries) {
		switch {
		case fallbackRetry(cs, now):
			below = rankTried
		case lastResortRetry(cs):
			below = rankDemoted
		default:
			return nil, 0, ErrBudgetExhausted
		}
	}
	// Attempts past maxAttempts, allowed because 429s do not count toward
	// it (callState.check), go only to capacities the call has not tried:
	// the bound stays the pool's maxAttempts attempts to any capacity, plus
	// at most one to each other capacity, never one back.
	beyond := int(cs.n) >= st.maxAttempts
	if beyond && below > rankTried {
		below = rankTried
	}
	if g := p.inFlight.Add(1); g > ceiling(st.maxInFlight, cs.prio) {
		p.inFlight.Add(-1)
		ref := refusal{shed: g <= st.maxInFlight}
		return nil, 0, ref.err(cs.prio, nil, 0)
	}
	s, l, charged, err := p.choose(st, cs, now, retry, below)
	if err != nil && spill && !beyond && !cs.waitsForSpill(err, now) && p.budget.allow(now, st.budgetPct, st.minRetries) {
		// No capacity the call has not tried admits the spill, nor will
		// within a wait (a pool of one capacity, say): it is then a retry
		// like any other, which the budget allows to go back to a capacity
		// the call tried.
		s, l, charged, err = p.choose(st, cs, now, retry, rankCount)
		budgeted = true
	}
	if err != nil && below == rankDemoted && !waitsForRoom(err) {
		// The last resort's retry found no capacity that answers and will
		// have room soon: it was the budget's, which refused it.
		err = ErrBudgetExhausted
	}
	if ce := (*CapacityError)(nil); beyond && errors.As(err, &ce) && !ce.waits() {
		// Past maxAttempts the call may go only where it has not been, and
		// no such capacity has room, nor will at a known moment: it has made
		// its attempts.
		err = ErrAttemptsExhausted
	}
	if err != nil {
		p.inFlight.Add(-1)
		return nil, 0, err
	}
	switch {
	case !retry:
		p.budget.request(now)
	case budgeted:
		p.budget.retry(now)
	}
	cs.record(s.r, l, charged, now)
	return s, l, nil
}

// attempt is the Attempt of call c that pick recorded on lane l of s, its
// latest.
func (s *slot) attempt(l uint8, c *Call) Attempt {
	a := Attempt{Region: s.name, Endpoint: s.endpoint, Tier: table.TierShared, PayGo: payGoOf(l), call: c, n: c.st.n - 1}
	if l == laneProvisioned {
		a.Tier, a.PayGo = table.TierProvisioned, s.st.spillTier(s, c.st.prio)
	}
	return a
}

// spillTier is the pay-as-you-go tier a provisioned attempt of priority pr
// on s spills into when the pool calls PTs with spillover: the first of the
// call's tiers the region offers, so that Google spills the overflow where
// the router would have sent it. "" when the request type is dedicated (no
// spill) or the region offers none of them (Google's default: standard).
func (st *poolState) spillTier(s *slot, pr Priority) table.PayGoTier {
	if st.pool.Policy.Provisioned.RequestType == table.RequestTypeDedicated {
		return ""
	}
	for _, l := range st.payGo[pr] {
		if s.offers(l) && !s.overflowLane(l) {
			return payGoOf(l)
		}
	}
	return ""
}

// fallbackRetry reports whether a retry is the fallback of reserved capacity,
// which the retry budget does not bound: the last attempt failed (not 429)
// on a provisioned region's PT, and either
//
//   - the region is not demoted and answers most of its calls, at least
//     minRequests over the ejection interval with a failure rate under
//     failureRateThreshold. That is the outage this project exists for: the
//     provisioned region keeps its first attempts, and the calls it drops in
//     a cluster of failures must still be served, even when a burst of them
//     outruns the budget. It adds at most failureRateThreshold of the
//     region's calls;
//   - the region is not demoted and answered fewer than minRequests over
//     the interval: too few to judge it, so it keeps its first attempts,
//     and the calls it drops are again the ones the capacity bought must not
//     drop. In a pool of a call a second whose PT fails every call, each of
//     them needs a retry, a rate the budget's floor of one a second refuses
//     whenever the calls come a little faster. It adds fewer than
//     minRequests retries an interval;
//   - the attempt was a probe of a demoted region (demote.go), or of a
//     region on probation after an ejection (eject.go): the router
//     chose to send it there, to a region it knew was failing, rather than
//     to one that answers, which would have taken it. Its retry adds no call
//     the caller did not bring, at most minRequests an interval and
//     budgetPercent of the pool's calls, the probe pace (probeCallsOf).
//
// Such a retry is bounded all the same: it goes only to a region the call has
// not tried (never back to the failing region), within maxAttempts and the
// deadline, and each receiver admits it only within its capacity, its
// in-flight limit and its throttle. A provisioned region failing at or over
// the threshold on enough calls is demoted (or it answers 429), and its
// retries spend the budget like any other, but for its probes' and those of
// the calls it took as a last resort (lastResortRetry).
func fallbackRetry(cs *callState, now int64) bool {
	if cs.last != Failure || cs.n == 0 {
		return false
	}
	if cs.probed&(1<<(cs.n-1)) != 0 {
		return true
	}
	r := cs.targets[cs.n-1]
	s := r.cfg.Load()
	if !s.provisioned || cs.lanes[cs.n-1] != laneProvisioned {
		return false
	}
	if r.demoted.Load() != nil {
		return false
	}
	answered, failed := r.fails.sum(bucketOf(now, s.st.failWidth))
	return answered < s.st.minRequests || float64(failed) < s.st.threshold*float64(answered)
}

// waitsForSpill reports whether a spill refused with err at now waits for
// the room of a capacity the call has not tried rather than go back to one
// it tried: the call waits for headroom (PickWaiting) and that room comes
// within the wait it may take (roomWithin). The capacity it tried answered
// it a 429 a moment ago, no room now by Google's own count (in spillover
// mode, the PT's and its location's pay-as-you-go's both); sent back there
// at once, the call's next attempt (one maxAttempts counts, unless it is
// refused again: callState.check) goes where it is known to find none,
// while a quota the meter knows will have room within a second would serve
// it. Which is what a pool
// with little traffic met: a pay-as-you-go quota of one or two calls a
// second is full for a moment far more often than one of fifty, and the
// budget's floor of a retry a second then let every such spill back to the
// capacity that had just refused it.
func (cs *callState) waitsForSpill(err error, now int64) bool {
	if !cs.waiting {
		return false
	}
	_, ok := cs.roomWithin(err, now)
	return ok
}

// waitsForRoom reports whether err is a refusal a call may wait out
// (CapacityError.waits).
func waitsForRoom(err error) bool {
	ce, ok := err.(*CapacityError)
	return ok && ce.waits()
}

// lastResortRetry reports whether a retry follows a failed attempt that
// the router sent to a region ranked last (demoted, ejected or silent)
// because no capacity that answers had room for it then: the retry budget
// does not bound it, but it may go only to a capacity the call has not
// tried and that answers (pick).
//
// Such an attempt was the router's choice, not a retry onto a region that
// failed the call: a capacity of last resort, a demoted PT taking "what
// nobody else can take", which fails the calls it takes as often as it
// fails. Its retry adds no call the caller did not bring, and goes only
// where a meter, an in-flight limit and a throttle admit it, never to a
// region in trouble, so it cannot multiply load on one. With the budget
// binding it, a demoted PT that still answers some of its calls lost most of
// the others for good: their retries found the budget spent, while the
// answering regions' room went to new calls, whose first attempts then took
// the PT's chances in turn (at half the PT's calls failing, about an eighth
// of all calls lost while the answering regions carried 60% of the load).
// Where no capacity answers (a total outage) the call has none to go to, and
// its retry, like any other, is the budget's to allow, within it and back to
// any region.
func lastResortRetry(cs *callState) bool {
	return cs.last == Failure && cs.n > 0 && cs.resort&(1<<(cs.n-1)) != 0
}

// panicThreshold is Envoy's healthy panic threshold, in percent: when fewer
// than this share of a pool's regions are not ejected, ejections are ignored
// and every region takes traffic again.
const panicThreshold = 50

// Ranks of the candidates for one attempt, best first: a candidate is a
// lane (a capacity: lane.go) of a region. A lane the call already tried
// ranks after every untried one (rank + rankTried).
const (
	rankProbe       = iota             // the PT of a demoted region whose probe is due (first attempts)
	rankProvisioned                    // a PT, region not demoted
	rankPayGo                          // pay-as-you-go: rankPayGo+i for the call's i-th tier, region not ejected (or in panic), demoted or silent
	rankOverflow    = rankPayGo + 3    // standard pay-as-you-go as a PT's overflow (slot.overflow): what the call's pay-as-you-go tiers have no room for
	rankAhead       = rankOverflow + 1 // a PT ahead of its pace (pace.go): what no other capacity that answers has room for
	rankDemoted     = rankAhead + 1    // any lane of a demoted, ejected or silent region: what nobody else has room for
	rankTried       = rankDemoted + 1
	rankCount       = 2 * rankTried
	rankNone        = -1 // not a candidate: not for this call, or refused this pick
)

// One pay-as-you-go rank per tier: this fails to compile if the tiers change.
var _ = [1]struct{}{}[len(table.PayGoTiers)-(rankOverflow-rankPayGo)]

// maxCandidates is the most candidates of one pool: every lane of every region.
const maxCandidates = table.MaxRegions * laneCount

// inPanic reports whether too few regions are left neither ejected nor on
// probation for either to be honored.
func (st *poolState) inPanic(now int64) bool {
	return panicking(st.ejected(now), len(st.slots))
}

// panicking reports whether a pool of n regions, ejected of them ejected, is
// below the panic threshold.
func panicking(ejected, n int) bool {
	return ejected > 0 && (n-ejected)*100 < panicThreshold*n
}

// ejected counts the regions ejected at now, or on probation after an
// ejection (eject.go): the regions out of the pool's first attempts, for
// the cap on ejections and for panic.
func (st *poolState) ejected(now int64) int {
	k := 0
	for _, s := range st.slots {
		if s.r.ejectedUntil.Load() > now || s.r.onProbation() {
			k++
		}
	}
	return k
}

// choose ranks the candidates (lanes of regions) for this attempt and takes
// the first, in rank order and by weight within a rank, that admits the
// call, with the token cost it charged the region in advance. It takes only
// candidates ranked under below: a spill and a fallback retry (see
// fallbackRetry) only capacities (lanes) the call has not tried
// (rankTried), a last resort's retry (lastResortRetry) only those of them
// that answer (rankDemoted). When no candidate admits the call it returns a
// *CapacityError.
func (p *Pool) choose(st *poolState, cs *callState, now int64, retry bool, below int8) (*slot, uint8, int64, error) {
	rk := st.laneRanks(cs.prio)
	cs.class, cs.ticket = ClassOf(cs.prio, retry), 0
	// cands lists the lanes that got a rank, so that the draws below walk
	// the few lanes a call may use, not every lane of every region.
	cands := candidates{below: below}
	var ref refusal
	ejected := 0
	// The regions the caller fails alone in rank last for its calls, as
	// demoted ones (blame.go).
	avoided := p.avoided(cs.caller, now, st)
	for i, s := range st.slots {
		if !cs.mayUse(s) {
			continue
		}
		if until := s.r.ejectedUntil.Load(); until > now {
			ejected++
			ref.note(until - now)
			continue
		}
		if s.r.onProbation() {
			ejected++
			continue
		}
		cands.rankSlot(i, s, &rk, cs, now, retry, avoided&(1<<i) != 0, false)
	}
	// An ejected region is not removed: it ranks as a demoted one, behind
	// every region that is not, and takes only what none of them has room
	// for. Ejection moves calls to regions that have headroom; where none
	// has, a call refused here fails for sure, while sent to the ejected
	// region it succeeds as often as that region answers (half its calls at
	// the default threshold), and its throttle still turns calls away from
	// a region that rejects most of what it answers. Once its ejection
	// ends it is on probation (eject.go): it ranks last still, and probes,
	// until a run of successes restores it. In panic, ejections and
	// probations are ignored: those regions rank as they would un-ejected.
	if ejected > 0 {
		inPanic := panicking(ejected, len(st.slots))
		for i, s := range st.slots {
			if !cs.mayUse(s) {
				continue
			}
			if out := s.r.ejectedUntil.Load() > now; out || s.r.onProbation() {
				cands.rankSlot(i, s, &rk, cs, now, retry, out && !inPanic || avoided&(1<<i) != 0, inPanic)
			}
		}
	}
	present := cands.present & (1<<below - 1)
	for present != 0 {
		rank := int8(bits.TrailingZeros32(present))
		present &^= 1 << rank
		// The capacities of the rank whose regions fail more of their
		// calls take what the others have no room for (prefer.go).
		held := cands.holdWorse(st, rank, now)
		for {
			c := cands.weighted(st, rank, &p.rnd)
			if c < 0 {
				if held {
					cands.unhold(rank)
					held = false
					continue
				}
				break
			}
			k := cands.k[c]
			s, l := st.slots[k/laneCount], k%laneCount
			probe := rank == rankProbe
			if probe && !s.r.takeProbe(now, st) {
				// Another call took this probe: it is only demoted.
				cands.rerank(c, rankDemoted)
				present |= 1 << rankDemoted
				continue
			}
			if charged, ok := p.admit(s, int(k/laneCount), l, cs, now, probe, rank%rankTried == rankDemoted, &ref); ok {
				switch {
				case probe:
					cs.probed |= 1 << cs.n
				case rank == rankDemoted:
					cs.resort |= 1 << cs.n
				}
				return s, l, charged, nil
			}
			cands.rerank(c, rankNone)
		}
	}
	if cands.n == 0 && cands.full == 0 && cands.late != 0 {
		// Every region the call may use would answer too late: nothing
		// to wait for.
		return nil, 0, 0, ErrTooLate
	}
	ref.metered |= cands.full
	ref.meterWaits(st, now)
	return nil, 0, 0, ref.err(cs.prio, st, cs.class)
}

// laneRanks is, for a call of priority pr, the rank of each lane of a region
// that is not ejected (or in panic) and not demoted, before the call's tries
// count: rankProvisioned for the PT, rankPayGo+i for the call's i-th
// pay-as-you-go tier, rankNone for a tier the call may not use. It depends
// on the call's priority alone, so choose works it out once per attempt
// rather than once per lane of every region.
func (st *poolState) laneRanks(pr Priority) laneRanks {
	rk := laneRanks{rank: [laneCount]int8{rankProvisioned, rankNone, rankNone, rankNone}, mask: 1 << laneProvisioned}
	for i, l := range st.payGo[pr] {
		// The first place of a tier is its rank (a tier listed twice
		// keeps it).
		if l < laneCount && rk.mask&(1<<l) == 0 {
			rk.rank[l] = int8(rankPayGo + i)
			rk.mask |= 1 << l
		}
	}
	return rk
}

// laneRanks are the ranks of a region's lanes for one call (poolState.laneRanks).
type laneRanks struct {
	rank [laneCount]int8
	mask uint8 // bit l: rank[l] != rankNone
}

// rankLane is the rank of lane l of region s for this attempt, from base,
// its rank for the call (laneRanks), once the call's tries count and
// whether the region ranks last: demoted, ejected or on probation (outside
// panic) or silent. The PT of a demoted region whose probe is due (probes:
// demoted and not silent), or any lane the call may use of a shared region
// on probation, ranks first on a first attempt; choose takes the probe when
// it picks the region (one call per probe: region.probe).
//
// A silent region gets no probe. A probe asks whether the region answers
// again; the calls it already holds ask the same, and its first answer (a
// success or an error it sends, not a refusal) ends the silence and lets
// the probes go again. A probe sent into the silence would only wait out
// its caller's deadline and learn nothing those calls will not tell: at a
// probe every half second (the pace's fastest) that is two calls a second
// lost for as long as a region hangs.
func rankLane(s *slot, l uint8, base int8, last, probes bool, cs *callState, now int64, retry bool) int8 {
	rank := base
	if last {
		rank = rankDemoted
		if probes && (l == laneProvisioned || !s.provisioned) && !retry && s.r.probeDue(now) {
			rank = rankProbe
		}
	}
	if retry && cs.hasTried(s.r, l) {
		rank += rankTried
	}
	return rank
}

// candidates are the lanes ranked for one attempt, in the order choose
// ranked them (regions in table order, lanes in lane order), with, per rank,
// the sum of their weights in that order.
type candidates struct {
	k    [maxCandidates]uint8 // slot × laneCount + lane
	rank [maxCandidates]int8
	n    int
	// present has bit r set when some candidate was ranked r.
	present uint32
	// total, count and last are, per rank, the sum of the weights of its
	// candidates, how many it has and the last of them (zero for a rank
	// that has none); valid for the ranks whose bit is clear in stale. They are summed as candidates are
	// added, in the same order as weighted would walk them, so a total is
	// the same number weighted would sum.
	total [rankCount]float64
	count [rankCount]uint8
	last  [rankCount]uint8
	stale uint32
	// full has bit i set when slot i's hinted lane was left out because its
	// meter is full (fullTick): a refusal, whose wait the error needs.
	full uint32
	// late has bit i set when slot i was left out because it would answer
	// after the call's deadline (quick.go).
	late uint32
	// below is choose's bound on the ranks the attempt may take.
	below int8
}

// rankSlot adds the lanes of region s (the i-th slot) that the call may use
// with their ranks. Only the lanes the region offers and the call may use
// are ranked: every other lane is rankNone whatever the region's state.
// last ranks the region as demoted (choose: it is ejected, or the call's
// caller fails alone in it), as does its being demoted, on probation after
// an ejection (unless panic: choose ignores ejections then) or silent
// (silence.go). A demoted region's probe goes to a call that last does not
// rank last: an ejected region gets none until its ejection ends, and a
// probe of a region the call's caller fails alone in says nothing of how
// it serves the others.
func (cs *candidates) rankSlot(i int, s *slot, rk *laneRanks, call *callState, now int64, retry, last, inPanic bool) {
	m := s.lanes & rk.mask
	if m == 0 {
		return
	}
	if call.deadline != 0 && !call.counting && s.r.tooSlowFor(call.deadline-now, call.deadline-call.begun, now, s.st) {
		// It would end after the call's deadline (quick.go).
		cs.late |= 1 << i
		return
	}
	d := s.r.demoted.Load()
	demoted := d != nil && (!inPanic || !d.ejected)
	silent := s.r.quiet.silent(now, &s.r.inFlight, &s.r.fails, s.st)
	// A counting call is no probe: its answer says nothing of the model
	// (Request.Counting).
	probes := demoted && !silent && !last && !call.counting
	last = last || demoted || silent
	for m != 0 {
		l := uint8(bits.TrailingZeros8(m))
		m &= m - 1
		base := rk.rank[l&(laneCount-1)]
		if s.overflowLane(l) {
			if last {
				// The overflow is for a PT that answers: a region ranked
				// last takes what nobody else has room for in its PT.
				continue
			}
			base = rankOverflow
		} else if !last && l == s.hinted && s.tokCost > 0 && !call.counting && s.r.aheadOfPace(now, s) {
			// Its window filled lately and it took its rate over the
			// last tenth of it: the pay-as-you-go quotas take what they
			// have room for first (pace.go). A region ranked last ranks
			// behind them anyway: its pace is not read.
			base = rankAhead
		}
		rank := rankLane(s, l, base, last, probes, call, now, retry)
		if l == s.hinted && !call.counting && s.metersReqs() && s.r.reqs.knownFull(now, s.reqCost) {
			// Its meter refused a call this tick: it refuses this one. A
			// full capacity the attempt may not take (below) is no room
			// the call waits for.
			if rank < cs.below {
				cs.full |= 1 << i
			}
			continue
		}
		c := cs.n
		cs.k[c] = uint8(i*laneCount) + l
		cs.rank[c] = rank
		cs.n++
		cs.present |= 1 << rank
		cs.total[rank] += s.laneWeight[l&(laneCount-1)]
		cs.count[rank]++
		cs.last[rank] = uint8(c)
	}
}

// rerank moves candidate c to rank (rankNone: no longer a candidate).
func (cs *candidates) rerank(c int, rank int8) {
	cs.stale |= 1 << cs.rank[c]
	cs.rank[c] = rank
	if rank != rankNone {
		cs.stale |= 1 << rank
	}
}

// sum works out again the total weight, count and last candidate of rank
// after a rerank.
func (cs *candidates) sum(st *poolState, rank int8) {
	var total float64
	var n, last uint8
	for c := range cs.n {
		if cs.rank[c] == rank {
			k := cs.k[c]
			total += st.slots[k/laneCount].laneWeight[k%laneCount]
			last = uint8(c)
			n++
		}
	}
	cs.total[rank], cs.count[rank], cs.last[rank] = total, n, last
	cs.stale &^= 1 << rank
}

// weighted draws one candidate of the given rank, in proportion to the
// lanes' weights, and returns its index in cs, or -1 when the rank has none.
// A lone candidate costs no draw.
func (cs *candidates) weighted(st *poolState, rank int8, rnd *rng) int {
	if cs.stale&(1<<rank) != 0 {
		cs.sum(st, rank)
	}
	switch cs.count[rank] {
	case 0:
		return -1
	case 1:
		return int(cs.last[rank])
	}
	x := rnd.float() * cs.total[rank]
	for c := range cs.n {
		if cs.rank[c] == rank {
			k := cs.k[c]
			if x -= st.slots[k/laneCount].laneWeight[k%laneCount]; x < 0 {
				return c
			}
		}
	}
	return int(cs.last[rank])
}

// admit takes a place for the call in lane l of region s if it has headroom:
// room in flight for the call's priority, a throttle draw of the lane that
// lets it through, a PT not known to be full, and room under the region's
// capacity hint (the hinted lane alone has one): in the last second, or in
// the PT's window for a PT's tokens. A probe
// of a demoted region skips the throttle: it is the trickle that sees
// recovery. Requests count when admitted. Tokens count in advance at the
// region's average per call: admit returns that charge, which done corrects
// when the call ends. On refusal it notes why in ref and takes nothing; a
// refusal of the region's meter (s is slot i) is noted by the slot, and its
// wait is worked out only if every candidate refuses (refusal.err).
//
// last says the region ranks last for the call (demoted, ejected, silent,
// or failing the call's caller alone): it takes what the regions that
// answer have no room for. If it is not answering, it takes that within
// the share of its bound it answers (slot.roomInFlight), under its AIMD
// limit as over it. A call it refuses waits for room where the calls are
// answered (Call.PickWaiting), or is refused; sent to a region answering
// none of them, it would fail for sure, and one that fails by running out
// its deadline leaves no time to retry: a demoted PT that hangs kept
// taking calls up to its limit's floor (its initial limit, 64 by default),
// each one lost, while the answering regions' quotas had room a moment
// later.
func (p *Pool) admit(s *slot, i int, l uint8, cs *callState, now int64, probe, last bool, ref *refusal) (charged int64, ok bool) {
	// The hinted lane alone has a meter, and a counting call meets none
	// (Request.Counting).
	metered := l == s.hinted && !cs.counting
	if !probe && metered && (s.tokCost > 0 || s.reqCost > 0) {
		if c, ok := s.r.outranked(cs.class); ok {
			// A call of a higher class waits for this room (reserve.go).
			ref.yield(i, c, cs.class, yieldWait(now))
			return 0, false
		}
	}
	r := s.r
	n := r.inFlight.Add(1)
	if n == 1 {
		r.quiet.busy(now)
	}
	if lim := ceiling(int64(r.limit.get()), cs.prio); (n > lim || last && !probe && !r.answering(now, s.st)) && !s.roomInFlight(l, n, now, cs.deadline, lim) {
		r.inFlight.Add(-1)
		// Shed: refused for the call's priority alone.
		ref.shed = ref.shed || n > lim && n <= int64(r.limit.get())
		ref.note(int64(time.Second))
		return 0, false
	}
	if q := r.lanes[l].throttleP(now, s.st); q > 0 && !probe && cs.throttleDraw(&p.rnd, i, l) < q {
		r.inFlight.Add(-1)
		ref.note(int64(time.Second))
		if s.overflowLane(l) && !cs.repick() {
			r.lanes[l].turnedAway(now)
		}
		return 0, false
	}
	asked := false
	if l == laneProvisioned {
		var ok bool
		var wait int64
		if ok, asked, wait = r.lanes[l].ptOpen(now); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	}
	if !metered {
		return 0, true
	}
	// A slot has a request cost or a token cost, never both (buildSlots), so
	// a refusal below never leaves tokens charged.
	taken := true
	switch {
	case s.tokCost > 0:
		charged = s.tokCharge()
		if taken = r.toks.take(now, charged, s.tokWidth); !taken {
			ref.metered |= 1 << i
			r.pace(now, s)
		}
	case s.reqCost > 0:
		taken = p.takeRequest(s, i, now, cs, ref)
	}
	if !taken {
		r.inFlight.Add(-1)
		if asked {
			r.lanes[l].unask(now)
		}
		return 0, false
	}
	return charged, true
}

// metersReqs reports whether the slot's hinted lane is held to its capacity
// by the region's one-second request meter (admit's second case).
func (s *slot) metersReqs() bool {
	return s.tokCost == 0 && s.reqCost > 0 && s.reqCost <= rateCapacity
}

// tokCharge is what a call is charged in advance on the slot's token meter:
// the region's average tokens per call, in the meter's costUnits.
func (s *slot) tokCharge() int64 { return int64(float64(s.r.tokEst.Load()) * s.tokCost) }

// roomInFlight reports whether a region over limit, its AIMD limit for the
// call's priority (or ranked last and not answering: admit), with n calls in
// flight counting the one being admitted, still has room for a call on lane
// l whose deadline is deadline: it does while it answers and n is within
// the calls its capacity can keep in flight before their deadlines
// (slot.littleLimit), whatever the call's priority, and while it does not
// answer, within the share of that bound it answers lately (see
// littleLimit), or of limit when the bound is not its capacity's.
// Priorities are shed first where a region is overloaded (its AIMD limit,
// shrunk by timeouts) or the pool is (maxInFlight), never where it is only
// slow.
func (s *slot) roomInFlight(l uint8, n, now, deadline, limit int64) bool {
	bound, known := s.littleLimit(l, now, deadline)
	if n > bound {
		return false
	}
	if s.r.answering(now, s.st) {
		return true
	}
	if !known {
		// Its AIMD limit is all that is known of what it holds.
		bound = limit
	}
	answered, failed := s.r.fails.sum(bucketOf(now, s.st.failWidth))
	if answered == 0 {
		// No attempt ended within the ejection interval: no evidence
		// either way. The region takes one call at a time, and only
		// while it holds no other. Lending it nothing left an ejected
		// region with no way back before its ejection ended: it gets
		// no probe while ejected, its failures age out of the window,
		// and with nothing sent nothing ends, so a region that had
		// recovered took none of the calls nobody else had room for
		// for the rest of an ejection that grows with each one (up to
		// maxEjectionTime), while they were refused. One call is the
		// least that asks: it is one the answering regions had no room
		// for (the region ranks last), its answer is the evidence (a
		// success lends it its share at once, a failure nothing for an
		// interval), and a region whose calls hang holds that one and
		// no more, as it holds a probe.
		return n == 1
	}
	return s.r.freshInFlight(n, now)*answered <= bound*(answered-failed)
}

// heldWidth is the width of the buckets that count a region's attempts in
// flight by when they were picked (region.held): its window spans 9 to 10 s
// of picks.
const heldWidth = int64(time.Second)

// freshInFlight is how many of the n attempts region r holds (the one being
// admitted among them) were picked at or after the latest pick it has
// answered (silence.front), by whole seconds of picks: the calls the share
// of its bound it answers is weighed against (slot.roomInFlight).
//
// The share is a measure of what a call sent now would meet: of the calls
// the region ended lately, the part it answered. The attempts it still
// holds that were picked before a call it has since answered are past that
// measure: the region has answered past them, and whether they end in time
// or not, the call being admitted is not queued behind them (an answer to a
// later pick came first). Counting them held a region that answers again
// to what it answered while it did not: a PT whose latency had run past its
// callers' deadline and came back held a deadline's worth of calls sent
// during the fault, each about to run out; those timeouts made it fail over
// half of what it ended, it was demoted, and its share of the bound (a
// third) was under the calls it held, so for up to a deadline it took
// nothing, neither the calls the quotas had no room for nor its probes,
// and those calls were shed while it answered every call it was sent in
// well under a second. A region that hangs answers nothing, its front does
// not move, and all it holds counts, as before; so does all of it when the
// front is older than the buckets reach.
func (r *region) freshInFlight(n, now int64) int64 {
	// A region that has answered nothing has its front at 0, older than
	// the buckets reach.
	cur, from := bucketOf(now, heldWidth), bucketOf(r.quiet.front.Load(), heldWidth)
	if from > cur || cur-from >= windowBuckets {
		return n
	}
	k, _ := r.held.sumSince(cur, from)
	// The attempt being admitted is in n and not yet in held.
	return min(n, k+1)
}

// answering reports whether the region answers the calls it holds: it is
// not demoted and not failing (its failure rate, the one that demotes and
// ejects it, under the threshold).
//
// A lane's 429s do not make it not answering, however many there are. A
// 429 refuses rate, answered at once before the model runs: the call it
// refused is not held in flight, and spills elsewhere outside the budget.
// What holds a region's calls in flight is the calls it serves, and those
// it answers. The rate has its own brakes (the meters, and the lane's
// throttle, at most twice what the lane accepts); cutting its in-flight
// bound as well compounds them, as shrinking its AIMD limit on 429s would
// (region.done). It starved a PT region's pay-as-you-go quota in a surge:
// the quota refused part of what it was sent, which made the region not
// answering, and the share of the AIMD limit left to it was already full
// of the PT's calls, so the quota took under one call a second of the
// twenty it grants.
func (r *region) answering(now int64, st *poolState) bool {
	return r.demoted.Load() == nil && !r.failing(now, st)
}
