package policy

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Options are the parts of a router that tests inject.
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
}

// Pool is the adaptive policy for one pool of regions: provisioned regions
// first up to their capacity, spill to shared regions by their capacity hints,
// a throttle per region fed by 429s, failure-rate ejection of shared regions,
// budgeted retries and adaptive in-flight limits. It is safe for concurrent
// use; Pick and Done take no lock.
type Pool struct {
	now    func() time.Time
	rnd    rng
	budget *Budget

	_        [64]byte
	inFlight atomic.Int64 // calls in flight in the whole pool
	_        [56]byte
	st       atomic.Pointer[poolState]

	mu sync.Mutex // serializes Update and ejections
}

var _ Router = (*Pool)(nil)

// poolState is one version of a pool's config, in the units the hot path
// uses. It never changes once published; Update publishes a new one.
type poolState struct {
	pool  table.Pool
	slots []*slot

	threshold     float64 // failure rate that ejects, in (0, 1]
	minRequests   uint64
	interval      time.Duration
	baseEjection  int64
	maxEjection   int64
	maxEjectedPct int
	maxAttempts   int
	budgetPct     int64
	minRetries    int64
	maxInFlight   int64
	initialLimit  float64
	maxLimit      float64
}

// slot is a region as one config version sees it: its live state and its
// config. A slot never changes once published.
type slot struct {
	r  *region
	st *poolState

	name        string
	endpoint    string
	tier        table.Tier
	header      string
	provisioned bool
	ejectable   bool
	weight      float64 // share of traffic within the region's tier
	reqCost     int64   // nanoseconds per request at the RPS hint; 0: no hint
	tokCost     float64 // nanoseconds per token at TokensPerSecond; 0: none
}

// region is the live state of one region, kept across table updates.
type region struct {
	p   *Pool
	cfg atomic.Pointer[slot] // the slot of the latest config that holds the region

	inFlight     atomic.Int64
	limit        aimd
	reqs         meter                  // requests admitted, in nanoseconds of the region's RPS
	slow         pacer                  // requests, for an RPS under one call per rateWindow
	toks         meter                  // tokens admitted or consumed, in nanoseconds of its TokensPerSecond
	tokEst       atomic.Int64           // tokens a successful call consumes, on average (EWMA)
	fails        atomic.Pointer[window] // a: answered, b: failed; over the ejection interval
	thr          window                 // a: answered, b: accepted (not 429); over throttleWindow
	lastCapacity atomic.Int64           // when the region last answered 429
	ejectedUntil atomic.Int64           // 0 or a time; ejected while in the future
	timesEjected atomic.Int64
	multiplier   int64 // ejection multiplier (gRFC A50). Guarded by p.mu.
}

// New returns the adaptive policy for pool tp. The pool is defaulted and
// validated; an invalid pool is an error.
func New(tp table.Pool, o Options) (*Pool, error) {
	p := &Pool{now: o.Now, budget: o.Budget}
	if p.now == nil {
		p.now = time.Now
	}
	if p.budget == nil {
		p.budget = NewBudget()
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
	return &poolState{
		pool:          tp,
		threshold:     pol.Ejection.FailureRateThreshold,
		minRequests:   uint64(pol.Ejection.MinRequests),
		interval:      pol.Ejection.Interval.Duration,
		baseEjection:  int64(pol.Ejection.BaseEjectionTime.Duration),
		maxEjection:   int64(pol.Ejection.MaxEjectionTime.Duration),
		maxEjectedPct: *pol.Ejection.MaxEjectedPercent,
		maxAttempts:   pol.Retry.MaxAttempts,
		budgetPct:     int64(*pol.Retry.BudgetPercent),
		minRetries:    int64(*pol.Retry.MinRetriesPerSecond),
		maxInFlight:   int64(pol.Concurrency.MaxInFlight),
		initialLimit:  float64(pol.Concurrency.RegionInitialLimit),
		maxLimit:      float64(pol.Concurrency.RegionMaxLimit),
	}
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
			header:      tp.Policy.Provisioned.Header(r.Tier),
			provisioned: r.Tier == table.TierProvisioned,
			ejectable:   r.Ejectable && r.Tier != table.TierProvisioned,
		}
		c := r.Capacity
		switch {
		case c.RequestsPerSecond > 0:
			s.reqCost = max(int64(float64(time.Second)/c.RequestsPerSecond), 1)
		case s.provisioned && c.TokensPerSecond > 0:
			s.tokCost = float64(time.Second) / c.TokensPerSecond
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
		st.slots = append(st.slots, s)
	}
}

// Update applies a new config for the pool. Regions still present keep their
// live state: failure counts, ejection, throttle, in-flight limit and rate.
// A region that is no longer ejectable (it became provisioned, or the table
// says so) is un-ejected at once; if the new pool has fewer regions, ejections
// are lifted, soonest-ending first, until at most maxEjectedPercent remain. A
// region whose ejection interval changed starts its failure count afresh.
// An invalid pool is an error and changes nothing.
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
		if r.fails.Load().width != bucketWidth(st.interval) {
			r.fails.Store(newWindow(st.interval))
		}
		r.limit.clamp(st.maxLimit)
		if !s.ejectable && r.ejectedUntil.Load() > now {
			r.ejectedUntil.Store(now)
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
	r.fails.Store(newWindow(st.interval))
	r.thr.init(throttleWindow)
	return r
}

// Start begins a call.
func (p *Pool) Start(req Request) Call { return Call{r: p, st: start(req)} }

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
	if retry && !p.budget.allow(now, st.budgetPct, st.minRetries) && !fallbackRetry(&cs, now) {
		return cs, Attempt{}, ErrBudgetExhausted
	}
	if g := p.inFlight.Add(1); g > ceiling(st.maxInFlight, cs.prio) {
		p.inFlight.Add(-1)
		ref := refusal{shed: g <= st.maxInFlight}
		return cs, Attempt{}, ref.err(cs.prio)
	}
	s, charged, err := p.choose(st, &cs, now, retry)
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
	return cs, Attempt{Region: s.name, Endpoint: s.endpoint, Tier: s.tier, RequestType: s.header, n: n}, nil
}

// fallbackRetry reports whether a retry is the fallback of reserved capacity
// that fails intermittently, which the retry budget does not bound: the last
// attempt failed (not 429) on a provisioned region that answers most of its
// calls, at least minRequests over the ejection interval with a failure rate
// under failureRateThreshold. That is the outage this project exists for: the
// provisioned region keeps its first attempts, and the calls it drops in a
// cluster of failures must still be served, even when a burst of them outruns
// the budget. Such retries cannot multiply load on anything that struggles:
// they are bounded by maxAttempts and the deadline, go to other regions first,
// and every receiver still admits them only within its capacity and in-flight
// limit. Once the provisioned region fails at or over the threshold (or
// answers 429), its retries spend the budget like any other.
func fallbackRetry(cs *callState, now int64) bool {
	if cs.last != Failure || cs.n == 0 {
		return false
	}
	r, ok := cs.targets[cs.n-1].(*region)
	if !ok {
		return false
	}
	s := r.cfg.Load()
	if !s.provisioned {
		return false
	}
	answered, failed := r.fails.Load().sum(now)
	return answered >= s.st.minRequests && float64(failed) < s.st.threshold*float64(answered)
}

// panicThreshold is Envoy's healthy panic threshold, in percent: when fewer
// than this share of a pool's regions are not ejected, ejections are ignored
// and every region takes traffic again.
const panicThreshold = 50

// Ranks of regions for one attempt, best first. A region the call already
// tried ranks after every untried one (rank + rankTried).
const (
	rankProvisioned = iota // provisioned, or on a retry provisioned and not failing
	rankShared             // shared, not ejected (or in panic)
	rankFailing            // on a retry, a provisioned region that is failing
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
// charged the region in advance. When none does it returns a *CapacityError.
func (p *Pool) choose(st *poolState, cs *callState, now int64, retry bool) (*slot, int64, error) {
	var ranks [table.MaxRegions]int8
	var ref refusal
	ejected := 0
	for i, s := range st.slots {
		r := s.r
		if until := r.ejectedUntil.Load(); until > now {
			ejected++
			ranks[i] = rankNone
			ref.note(until - now)
			continue
		}
		ranks[i] = rankOf(s, st, cs, now, retry)
	}
	if panicking(ejected, len(st.slots)) {
		for i, s := range st.slots {
			if ranks[i] == rankNone {
				ranks[i] = rankOf(s, st, cs, now, retry)
			}
		}
	}
	for rank := int8(0); rank < rankCount; rank++ {
		for {
			i := p.weighted(st, &ranks, rank)
			if i < 0 {
				break
			}
			s := st.slots[i]
			if charged, ok := p.admit(s, cs.prio, now, &ref); ok {
				return s, charged, nil
			}
			ranks[i] = rankNone
		}
	}
	return nil, 0, ref.err(cs.prio)
}

// rankOf is the rank of a region that is not ejected (or in panic) for this
// attempt.
func rankOf(s *slot, st *poolState, cs *callState, now int64, retry bool) int8 {
	rank := int8(rankShared)
	if s.provisioned {
		rank = rankProvisioned
		if retry && s.r.failing(now, st) {
			rank = rankFailing
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
// room under its in-flight limit for the call's priority, a throttle draw that
// lets it through, and room under its capacity in the last second. Requests
// count when admitted. Tokens count in advance at the region's average per
// call: admit returns that charge, which done corrects when the call ends. On
// refusal it notes why in ref and takes nothing.
func (p *Pool) admit(s *slot, pr Priority, now int64, ref *refusal) (charged int64, ok bool) {
	r := s.r
	limit := int64(r.limit.get())
	if n := r.inFlight.Add(1); n > ceiling(limit, pr) {
		r.inFlight.Add(-1)
		ref.shed = ref.shed || n <= limit
		ref.note(int64(time.Second))
		return 0, false
	}
	if q := r.throttleP(now); q > 0 && p.rnd.float() < q {
		r.inFlight.Add(-1)
		ref.note(int64(time.Second))
		return 0, false
	}
	// A slot has a request cost or a token cost, never both (buildSlots), so
	// a refusal below never leaves tokens charged.
	if s.tokCost > 0 {
		charged = int64(float64(r.tokEst.Load()) * s.tokCost)
		if ok, wait := r.toks.take(now, charged); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	}
	if s.reqCost > 0 {
		take := r.reqs.take
		if s.reqCost > rateWindow {
			take = r.slow.take
		}
		if ok, wait := take(now, s.reqCost); !ok {
			r.inFlight.Add(-1)
			ref.note(wait)
			return 0, false
		}
	}
	return charged, true
}

// done learns from an attempt's outcome. Success and 429 feed the throttle;
// success and failure feed the failure rate; 429 and timeouts shrink the
// in-flight limit and success grows it; caller faults and cancellations only
// free the attempt's place.
//
// A provisioned region's limit never shrinks below the initial limit: its
// capacity is paid for, and intermittent 504s during an upstream incident
// must not starve it down to one call at a time while most calls succeed.
func (r *region) done(rep Report) {
	p := r.p
	now := p.nanos()
	n := r.inFlight.Add(-1) + 1
	p.inFlight.Add(-1)
	s := r.cfg.Load()
	switch rep.Outcome {
	case Success:
		r.fails.Load().add(now, 1, 0)
		r.thr.add(now, 1, 1)
		r.limit.grow(n, s.st.maxLimit)
	case Capacity:
		r.thr.add(now, 1, 0)
		r.lastCapacity.Store(now)
		r.limit.shrink(s.limitFloor())
	case Failure:
		r.fails.Load().add(now, 1, 1)
		if rep.Timeout {
			r.limit.shrink(s.limitFloor())
		}
		if s.ejectable {
			p.maybeEject(r, now)
		}
	}
	if s.tokCost > 0 {
		r.settleTokens(s, rep, now)
	}
}

// tokEstShift sets the weight of a call in the average of tokens per call: 1/8.
const tokEstShift = 3

// settleTokens corrects the token cost charged in advance for an attempt
// with what it consumed: the difference when the call reports its tokens, a
// refund when it failed, was refused or was cancelled (it consumed none that
// the region counts), and nothing when it succeeded without saying (the
// estimate stands).
func (r *region) settleTokens(s *slot, rep Report, now int64) {
	switch {
	case rep.Outcome == Success && rep.Tokens > 0:
		cost := int64(float64(rep.Tokens) * s.tokCost)
		if d := cost - rep.charged; d >= 0 {
			r.toks.add(now, d)
		} else {
			r.toks.refund(rep.chargedAt, now, -d)
		}
		est := r.tokEst.Load()
		if est == 0 {
			r.tokEst.Store(rep.Tokens)
		} else {
			r.tokEst.Store(est + (rep.Tokens-est)>>tokEstShift)
		}
	case rep.Outcome == Success:
	default:
		r.toks.refund(rep.chargedAt, now, rep.charged)
	}
}

// limitFloor is the lowest the region's adaptive in-flight limit may go.
func (s *slot) limitFloor() float64 {
	if s.provisioned {
		return s.st.initialLimit
	}
	return limitMin
}

// rng draws random numbers without a lock: SplitMix64 over an atomic counter,
// so a seed fixes the whole sequence.
type rng struct {
	seed uint64
	_    [56]byte
	n    atomic.Uint64
	_    [56]byte
}

// next returns the next 64 random bits.
func (g *rng) next() uint64 {
	z := g.seed + g.n.Add(1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a random number in [0, 1).
func (g *rng) float() float64 { return float64(g.next()>>11) / (1 << 53) }
