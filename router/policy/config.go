package policy

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Options are the parts of a router that callers inject.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Seed seeds every random choice: weighted picks, throttle draws and
	// ejection jitter. Two routers with the same seed, table, clock and
	// sequence of calls make the same choices.
	Seed uint64
	// Budget is the retry budget. Routers given the same Budget share it, as
	// a process should. Nil: the router has a budget of its own.
	Budget *Budget
	// Logger hears the changes an operator must know of: a provisioned
	// region demoted, and restored. Nil logs to slog.Default().
	Logger *slog.Logger
}

// New returns the adaptive policy for pool tp. The pool is defaulted and
// validated; an invalid pool is an error.
func New(tp table.Pool, o Options) (*Pool, error) {
	p := &Pool{now: o.Now, budget: o.Budget, log: o.Logger}
	if p.now == nil {
		p.now = time.Now
	}
	if p.budget == nil {
		p.budget = NewBudget()
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.rnd.seed = o.Seed
	if err := p.Update(tp); err != nil {
		return nil, err
	}
	return p, nil
}

// nanos is the clock's reading in nanoseconds since the Unix epoch.
func (p *Pool) nanos() int64 { return p.now().UnixNano() }

// prepare copies, defaults and validates a pool from a table.
func prepare(tp table.Pool) (table.Pool, error) {
	tp.Regions = append([]table.Region(nil), tp.Regions...)
	tp.Default()
	if err := tp.Validate(); err != nil {
		return table.Pool{}, fmt.Errorf("pool %s/%s/%s: %w", tp.Project, tp.Publisher, tp.Model, err)
	}
	return tp, nil
}

// newState converts a prepared pool's policy into hot-path units.
func newState(tp table.Pool) *poolState {
	pol := tp.Policy
	e := pol.Ejection
	return &poolState{
		pool:          tp,
		threshold:     e.FailureRateThreshold,
		minRequests:   int64(e.MinRequests),
		interval:      e.Interval.Duration,
		failWidth:     max(int64(e.Interval.Duration)/windowBuckets, 1),
		baseEjection:  int64(e.BaseEjectionTime.Duration),
		maxEjection:   int64(e.MaxEjectionTime.Duration),
		maxEjectedPct: *e.MaxEjectedPercent,
		probeEvery:    max(int64(e.Interval.Duration)/int64(max(e.MinRequests, 1)), 1),
		probeCalls:    probeCallsOf(*pol.Retry.BudgetPercent),
		maxAttempts:   pol.Retry.MaxAttempts,
		budgetPct:     int64(*pol.Retry.BudgetPercent),
		minRetries:    int64(*pol.Retry.MinRetriesPerSecond),
		maxInFlight:   int64(pol.Concurrency.MaxInFlight),
		initialLimit:  float64(pol.Concurrency.RegionInitialLimit),
		maxLimit:      float64(pol.Concurrency.RegionMaxLimit),
		payGo: [3][]uint8{
			PriorityDefault:   payGoLanes(pol.PayGo.Tiers(table.PriorityDefault)),
			PriorityCritical:  payGoLanes(pol.PayGo.Tiers(table.PriorityCritical)),
			PrioritySheddable: payGoLanes(pol.PayGo.Tiers(table.PrioritySheddable)),
		},
	}
}

// maxWindowTokens is the most tokens a PT's meter counts over its window:
// ten per cost unit (a window holds rateCapacity units), so that a call of
// a hundred tokens costs ten units or more and a cost rounded down to whole
// units loses under a tenth of it.
const maxWindowTokens = 10 * rateCapacity

// meterWindow is the window over which a PT of tps tokens a second is
// metered: w, shortened where tps × w would be more than maxWindowTokens,
// never under one second. A large order with a long window set would
// otherwise cost a call less than one unit, rounded to nothing, and the
// meter would never refuse. A shorter window is always safe: it never
// admits a burst that the longer one refuses (table.DefaultProvisionedWindow);
// it only absorbs smaller ones.
func meterWindow(w time.Duration, tps float64) time.Duration {
	if lim := time.Duration(float64(maxWindowTokens) / tps * float64(time.Second)); w > lim {
		return max(lim.Truncate(time.Second), time.Second)
	}
	return w
}

// payGoLanes are the lanes of pay-as-you-go tiers ts, in their order.
func payGoLanes(ts []table.PayGoTier) []uint8 {
	out := make([]uint8, 0, len(ts))
	for _, t := range ts {
		out = append(out, laneOf(t))
	}
	return out
}

// probeCallsOf is how many of the pool's calls come between two probes of a
// demoted region, at least, under a retry budget of budgetPercent: 100/budgetPercent,
// rounded up (a budget of 0 as one of 1%: a demoted region that is never
// probed comes back only when the others are full).
//
// Why the calls and not only the clock (demote.go): a probe goes to a region
// known to fail at least failureRateThreshold of its calls, and a failed
// probe is retried outside the retry budget (fallbackRetry), or lost when
// its failure comes too late for a retry. The clock's pace alone, minRequests
// probes an interval, is the same in a pool of a thousand calls a second and
// in one of six: in the first it is a tenth of a percent of the calls, in
// the second a third of them, sent to a region failing most of what it
// gets while the others have room. Counted in calls, the probes that fail
// are at most budgetPercent of the pool's calls, the share of extra
// attempts the pool's budget already grants its retries, at any rate.
func probeCallsOf(budgetPercent int) int64 {
	pct := int64(max(budgetPercent, 1))
	return (100 + pct - 1) / pct
}

// restoreMiss is the chance that a region still failing at the threshold
// strings together, within an ejection interval, a run of successes long
// enough to restore it (restoreAfter).
const restoreMiss = 0.01

// restoreAfter is how many successes in a row restore a demoted region that
// failed failed times over the last ejection interval: the fewest that a
// region failing at the threshold θ strings together by chance, in any of
// the runs its failures begin, with a chance under restoreMiss. Each failure
// ends a run and the success after it may begin the next, so a region that
// failed n times in an interval had n tries at a run, and the chance that
// one of them reached k is at most n(1−θ)^k: k = ⌈ln(restoreMiss/n)/ln(1−θ)⌉
// (at the default θ = 0.5: 7 for one failure, 11 for 20, the most a region
// that takes only its probes fails in an interval, 14 for 110). Never more
// than minRequests, the evidence the failure rate itself is judged on, and
// at least one.
//
// Why per interval, not per run. A run of 7 is what a region failing half
// its calls strings together once in 128 tries. Seven for any count kept
// that chance a run, not an interval: a region that takes only its probes
// (at most minRequests of them fail an interval) was restored by luck about
// one interval in six, and a demoted region also takes every call the
// regions that answer have no room for, each failure a try. One failing
// half of, say, 22 calls a second that the quotas cannot take fails 11 a
// second and would be restored by chance about every 12 s,
// taking every first attempt (and leaving the quotas' room unused) until
// its next minRequests answers demote it again; at 110 failures an
// interval it now needs 14 in a row, once in about 25 minutes. The runs
// count in the order the calls were sent (successRun), which already kept
// a region that fails its calls late from being restored by its quick
// answers; this bounds the luck of a region that fails them early. A region
// that recovers pays a few more successes: a success makes its next call a
// probe at once (region.succeeded), so they come as fast as the calls do.
// Every failure counts as a try, though failures that come in bursts (an
// incident's runs of 504s) or belong to calls sent before the run began
// begin fewer runs: the count errs toward restoring later, the cheap side
// (a recovered region left demoted costs the pay-as-you-go price of what
// the others serve, and still takes what they have no room for).
//
// A threshold of 1 demotes only a region that fails every call: one success
// restores it.
func (st *poolState) restoreAfter(failed int64) int64 {
	if st.threshold >= 1 {
		return 1
	}
	k := math.Ceil(math.Log(restoreMiss/float64(max(failed, 1))) / math.Log(1-st.threshold))
	return int64(min(max(k, 1), float64(max(st.minRequests, 1))))
}

// buildSlots builds the slots of state st from its pool, reusing live regions
// by name through find.
func (st *poolState) buildSlots(find func(name string) *region) {
	tp := st.pool
	var hinted, hintSum float64
	for _, r := range tp.Regions {
		if r.Tier != table.TierProvisioned && r.Capacity.RequestsPerSecond > 0 {
			hinted++
			hintSum += r.Capacity.RequestsPerSecond
		}
	}
	unhinted := 1.0
	if hinted > 0 {
		unhinted = hintSum / hinted
	}
	st.slots = make([]*slot, 0, len(tp.Regions))
	for _, r := range tp.Regions {
		s := &slot{
			r:           find(r.Name),
			st:          st,
			name:        r.Name,
			endpoint:    r.Endpoint,
			tier:        r.Tier,
			provisioned: r.Tier == table.TierProvisioned,
			ejectable:   r.Ejectable && r.Tier != table.TierProvisioned,
		}
		s.hinted = laneStandard
		if s.provisioned {
			s.hinted = laneProvisioned
			s.lanes |= 1 << laneProvisioned
		}
		for _, t := range r.PayGoTiers {
			s.lanes |= 1 << laneOf(t)
		}
		if s.provisioned && len(r.PayGoTiers) == 0 && tp.Policy.Provisioned.RequestType != table.RequestTypeDedicated {
			// The PT's overflow (rankOverflow).
			s.lanes |= 1 << laneStandard
			s.overflow = true
		}
		c := r.Capacity
		switch {
		case c.RequestsPerSecond > 0:
			s.rps = c.RequestsPerSecond
			s.reqCost = max(int64(float64(rateCapacity)/c.RequestsPerSecond), 1)
		case s.provisioned && c.TokensPerSecond > 0:
			// Google counts a PT's tokens over a window that depends on
			// its size: the meter holds TokensPerSecond × window of them.
			w := meterWindow(tp.Policy.Provisioned.WindowFor(c.GSUs), c.TokensPerSecond)
			s.tokWindow, s.tokWidth = int64(w), int64(w)/windowBuckets
			s.tokCost = float64(rateCapacity) / (c.TokensPerSecond * w.Seconds())
		}
		switch {
		case c.RequestsPerSecond > 0:
			s.weight = c.RequestsPerSecond
		case !s.provisioned:
			s.weight = unhinted
		case c.TokensPerSecond > 0:
			s.weight = c.TokensPerSecond
		case c.GSUs > 0:
			s.weight = float64(c.GSUs)
		default:
			s.weight = 1
		}
		for l := range s.laneWeight {
			s.laneWeight[l] = unhinted
		}
		s.laneWeight[s.hinted] = s.weight
		st.slots = append(st.slots, s)
	}
}

// Update applies a new config for the pool. Regions still present keep their
// live state: failure counts, ejection, demotion, throttle, in-flight limit
// and rate. A region that is no longer ejectable (it became provisioned, or
// the table says so) is un-ejected, and off probation, at once, and one no
// longer provisioned is no longer demoted; if the new pool has fewer
// regions, ejections and probations are lifted, soonest-ending first, until
// at most maxEjectedPercent remain. A region
// whose ejection interval changed starts its failure count afresh. An invalid
// pool is an error and changes nothing.
func (p *Pool) Update(tp table.Pool) error {
	tp, err := prepare(tp)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.nanos()
	old := p.st.Load()
	st := newState(tp)
	st.buildSlots(func(name string) *region {
		if old != nil {
			for _, s := range old.slots {
				if s.name == name {
					return s.r
				}
			}
		}
		return p.newRegion(st)
	})
	for _, s := range st.slots {
		r := s.r
		if prev := r.cfg.Load(); prev != nil && prev.st.failWidth != st.failWidth {
			r.fails.reset()
		}
		if prev := r.cfg.Load(); prev != nil && prev.tokWidth != s.tokWidth {
			// Its buckets mean other spans now. Forgetting what it
			// admitted lets through at most one window's worth again,
			// once, when a table changes the window.
			r.toks.w.reset()
		}
		r.limit.clamp(st.maxLimit)
		if !s.ejectable && r.ejectedUntil.Load() > now {
			r.ejectedUntil.Store(now)
		}
		if d := r.demoted.Load(); d != nil {
			switch {
			case d.ejected && !s.ejectable:
				r.restore(s, now, "the region is no longer ejectable")
			case !d.ejected && !s.provisioned:
				r.restore(s, now, "the region is no longer provisioned")
			}
		}
		if !s.provisioned {
			r.lanes[laneProvisioned].reopen()
		}
		r.cfg.Store(s)
	}
	st.capEjections(now)
	p.st.Store(st)
	return nil
}

// newRegion returns the live state of a region new to the pool.
func (p *Pool) newRegion(st *poolState) *region {
	r := &region{p: p}
	r.limit.set(st.initialLimit)
	return r
}
