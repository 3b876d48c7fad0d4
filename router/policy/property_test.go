package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

var propertyLocations = []string{
	"europe-west1", "europe-west2", "europe-west3", "europe-west4", "europe-north1",
	"us-central1", "us-east4", "asia-northeast1", "global", "eu", "us",
}

// randomPool is a pool of 1 to 8 regions, 0 to 2 of them provisioned, with
// random capacities and a random, small-scale policy.
func randomPool(rnd *rand.Rand) table.Pool {
	n := 1 + rnd.IntN(8)
	k := rnd.IntN(min(2, n) + 1)
	names := rnd.Perm(len(propertyLocations))[:n]
	tp := pool()
	for i, j := range names {
		r := shared(propertyLocations[j], 0)
		r.Ejectable = rnd.IntN(5) > 0
		if rnd.IntN(2) == 0 {
			r.Capacity.RequestsPerSecond = float64(1 + rnd.IntN(20))
		}
		for _, pt := range table.PayGoTiers {
			if rnd.IntN(3) == 0 {
				r.PayGoTiers = append(r.PayGoTiers, pt)
			}
		}
		if i < k {
			r.Tier = table.TierProvisioned
			r.Ejectable = false
			switch rnd.IntN(3) {
			case 0:
				r.Capacity = table.Capacity{}
			case 1:
				r.Capacity = table.Capacity{TokensPerSecond: float64(100 + rnd.IntN(1000))}
			}
		}
		tp.Regions = append(tp.Regions, r)
	}
	e := &tp.Policy.Ejection
	e.FailureRateThreshold = 0.1 + 0.9*rnd.Float64()
	e.MinRequests = 1 + rnd.IntN(10)
	e.Interval.Duration = time.Duration(1+rnd.IntN(20)) * time.Second
	e.BaseEjectionTime.Duration = time.Duration(1+rnd.IntN(30)) * time.Second
	e.MaxEjectionTime.Duration = e.BaseEjectionTime.Duration * time.Duration(1+rnd.IntN(10))
	e.MaxEjectedPercent = new(rnd.IntN(100))
	tp.Policy.Retry = table.Retry{MaxAttempts: 1 + rnd.IntN(5), BudgetPercent: new(rnd.IntN(101)), MinRetriesPerSecond: new(rnd.IntN(4))}
	c := &tp.Policy.Concurrency
	c.MaxInFlight = 1 + rnd.IntN(12)
	c.RegionInitialLimit = 1 + rnd.IntN(4)
	c.RegionMaxLimit = c.RegionInitialLimit + rnd.IntN(8)
	if rnd.IntN(2) == 0 {
		tp.Policy.Provisioned.RequestType = table.RequestTypeDedicated
	}
	return tp
}

// mutatePool changes one thing of a pool, as a table reload might: a region's
// tier, a region removed or added, or the ejection cap.
func mutatePool(rnd *rand.Rand, tp table.Pool) table.Pool {
	tp.Regions = append([]table.Region(nil), tp.Regions...)
	i := rnd.IntN(len(tp.Regions))
	switch rnd.IntN(4) {
	case 0:
		r := &tp.Regions[i]
		if r.Tier == table.TierProvisioned {
			r.Tier, r.Ejectable, r.Source = table.TierShared, true, table.SourceSpec
		} else {
			r.Tier, r.Ejectable, r.Source = table.TierProvisioned, false, table.SourceDeclared
		}
	case 1:
		if len(tp.Regions) > 1 {
			tp.Regions = append(tp.Regions[:i], tp.Regions[i+1:]...)
		}
	case 2:
		for _, j := range rnd.Perm(len(propertyLocations)) {
			name := propertyLocations[j]
			if !hasRegion(tp, name) {
				tp.Regions = append(tp.Regions, shared(name, 0))
				break
			}
		}
	default:
		tp.Policy.Ejection.MaxEjectedPercent = new(rnd.IntN(100))
	}
	return tp
}

func hasRegion(tp table.Pool, name string) bool {
	for _, r := range tp.Regions {
		if r.Name == name {
			return true
		}
	}
	return false
}

// randomOutcome leans to failures and 429s, to drive ejection and throttling.
func randomOutcome(rnd *rand.Rand, failRate float64) Outcome {
	x := rnd.Float64()
	switch {
	case x < failRate:
		return Failure
	case x < failRate+0.2:
		return Capacity
	case x < failRate+0.25:
		return CallerFault
	case x < failRate+0.3:
		return Cancelled
	case x < failRate+0.35:
		return ProvisionedFull
	default:
		return Success
	}
}

// checkInvariants checks what must hold of a pool at any time.
func checkInvariants(p *Pool) error {
	st := p.st.Load()
	now := p.nanos()
	ejected := 0
	for _, s := range st.slots {
		until := s.r.ejectedUntil.Load()
		if until > now {
			ejected++
			if s.provisioned {
				return fmt.Errorf("provisioned region %s is ejected", s.name)
			}
			if !s.ejectable {
				return fmt.Errorf("non-ejectable region %s is ejected", s.name)
			}
		}
		if l := s.r.limit.get(); l < limitMin || l > st.maxLimit {
			return fmt.Errorf("region %s: limit %v outside [1, %v]", s.name, l, st.maxLimit)
		}
	}
	if ejected*100 > st.maxEjectedPct*len(st.slots) {
		return fmt.Errorf("%d of %d regions ejected, over maxEjectedPercent %d", ejected, len(st.slots), st.maxEjectedPct)
	}
	return nil
}

// hasHeadroom reports whether some region could surely take a call of
// priority pr now: it offers a capacity the call may use (its PT, not known
// to be full, or one of the call's pay-as-you-go tiers), and it is not
// ejected (or in panic), under its in-flight ceiling, not ranked last for
// want of answering (demoted, or failing and silent), not throttled at all
// and under its capacities. A first attempt is never too slow for a region
// (quick.go: it has all the time its caller gave).
func hasHeadroom(p *Pool, pr Priority) bool {
	st := p.st.Load()
	now := p.nanos()
	if p.inFlight.Load()+1 > ceiling(st.maxInFlight, pr) {
		return false
	}
	panicking := st.inPanic(now)
	for _, s := range st.slots {
		r := s.r
		// A region ranked last offers no overflow (rankSlot).
		last := r.demoted.Load() != nil || r.quiet.silent(now, &r.inFlight, &r.fails, st)
		usable := s.provisioned && r.lanes[laneProvisioned].fullUntil.Load() == 0
		for _, l := range st.payGo[pr] {
			usable = usable || s.offers(l) && (!last || !s.overflowLane(l))
		}
		switch {
		case !usable:
		case r.ejectedUntil.Load() > now && !panicking:
		case r.inFlight.Load()+1 > ceiling(int64(r.limit.get()), pr):
		case r.demoted.Load() != nil, r.failing(now, st) && r.quiet.silent(now, &r.inFlight, &r.fails, st):
			// Ranked last and not answering: it takes only the share of
			// its bound it answers (Pool.admit).
		case r.throttleP(now, st) > 0:
		case s.tokCost > 0 && !fits(r.toks.sum(now, s.tokWidth), int64(float64(r.tokEst.Load())*s.tokCost)):
		case s.reqCost > 0 && s.reqCost <= rateCapacity && !fits(r.reqs.m.sum(now, meterWidth), s.reqCost):
		case s.reqCost > rateCapacity && r.slow.next.Load() > now:
		default:
			return true
		}
	}
	return false
}

// runsOf is a property test's number of runs: full, or short under -short.
func runsOf(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// TestPropertyInvariants drives random pools through random outcomes, clock
// steps, concurrent attempts and table updates, and checks after every step:
// Pick fails only with over-capacity or shed (carrying a Retry-After, and only
// when no region surely had headroom), or with a deadline, budget or attempts
// error, never for lack of regions; a provisioned region is never ejected;
// ejected regions never exceed maxEjectedPercent; in-flight counts return to
// zero.
func TestPropertyInvariants(t *testing.T) {
	runs := runsOf(100_000, 10_000)
	rnd := rand.New(rand.NewPCG(2026, 11))
	clk := newClock()
	type pending struct {
		a *Attempt
		o Outcome
	}
	var held []pending
	errCount := map[string]int{}
	var ejections int64
	var panics int
	for run := range runs {
		tp := randomPool(rnd)
		p, err := New(tp, Options{Now: clk.Now, Seed: uint64(run), Logger: quiet})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		failRate := rnd.Float64()
		steps := 5 + rnd.IntN(20)
		for step := range steps {
			if rnd.IntN(30) == 0 {
				tp = mutatePool(rnd, tp)
				if err := p.Update(tp); err != nil {
					t.Fatalf("run %d step %d: update: %v", run, step, err)
				}
			}
			req := Request{Priority: Priority(rnd.IntN(3))}
			if rnd.IntN(4) == 0 {
				req.Deadline = clk.Now().Add(time.Duration(rnd.IntN(3000)) * time.Millisecond)
			}
			c := &Call{}
			*c = p.Start(req)
			for range 6 {
				first := c.Attempts() == 0
				room := hasHeadroom(p, req.Priority)
				a, err := c.Pick()
				if err != nil {
					errCount[errName(err)]++
					var ce *CapacityError
					switch {
					case errors.As(err, &ce):
						if ce.RetryAfter < time.Second {
							t.Fatalf("run %d step %d: %v: Retry-After %v, want >= 1s", run, step, err, ce.RetryAfter)
						}
						if first && room {
							t.Fatalf("run %d step %d: %v while a region had headroom", run, step, err)
						}
					case errors.Is(err, ErrDeadlineExceeded), errors.Is(err, ErrBudgetExhausted), errors.Is(err, ErrAttemptsExhausted):
					default:
						t.Fatalf("run %d step %d: unexpected error %v", run, step, err)
					}
					break
				}
				o := randomOutcome(rnd, failRate)
				if rnd.IntN(4) == 0 {
					held = append(held, pending{&a, o})
					if rnd.IntN(2) == 0 {
						continue
					}
					break
				}
				a.Finish(Report{Outcome: o, Tokens: int64(rnd.IntN(200)), Timeout: rnd.IntN(8) == 0, OnDemand: rnd.IntN(4) == 0})
				if !o.Retryable() {
					break
				}
			}
			if rnd.IntN(3) == 0 {
				for _, h := range held {
					h.a.Done(h.o)
				}
				held = held[:0]
			}
			switch rnd.IntN(10) {
			case 0:
				clk.Advance(time.Duration(rnd.IntN(300)) * time.Second)
			case 1, 2, 3:
				clk.Advance(time.Duration(rnd.IntN(3000)) * time.Millisecond)
			default:
				clk.Advance(time.Duration(rnd.IntN(100)) * time.Millisecond)
			}
			if p.st.Load().inPanic(p.nanos()) {
				panics++
			}
			if err := checkInvariants(p); err != nil {
				t.Fatalf("run %d step %d: %v\npool: %+v", run, step, err, tp)
			}
		}
		for _, h := range held {
			h.a.Done(h.o)
		}
		held = held[:0]
		if n := p.inFlight.Load(); n != 0 {
			t.Fatalf("run %d: %d calls in flight after every attempt was reported", run, n)
		}
		for _, s := range p.st.Load().slots {
			ejections += s.r.timesEjected.Load()
			if n := s.r.inFlight.Load(); n != 0 {
				t.Fatalf("run %d: region %s has %d calls in flight after every attempt was reported", run, s.name, n)
			}
		}
	}
	t.Logf("%d runs: %d ejections, %d steps in panic; pick errors: %v", runs, ejections, panics, errCount)
	if ejections == 0 || panics == 0 {
		t.Errorf("the runs never ejected a region or never panicked: the invariants were not exercised")
	}
}

// demotedDue returns the indexes of the demoted provisioned regions whose
// probe is due at now, and reports whether each of them surely admits a call
// (nothing in flight, room under its capacity).
func demotedDue(p *Pool, now int64) (due []int, sure bool) {
	sure = true
	st := p.st.Load()
	for i, s := range st.slots {
		r := s.r
		d := r.demoted.Load()
		// The call about to start is one of the calls a probe waits for.
		if d == nil || r.probe.next.Load() > now || p.calls.Load()+1 < r.probeAt.Load() {
			continue
		}
		if d.ejected && (r.ejectedUntil.Load() > now || st.inPanic(now)) {
			// Ejected: no probe until its ejection ends; in panic its
			// probation is ignored.
			continue
		}
		due = append(due, i)
		switch {
		case d.ejected && s.lanes&(1<<laneStandard) == 0: // a call's priority may not use its tiers
		case r.inFlight.Load() != 0:
		case r.lanes[laneProvisioned].fullUntil.Load() != 0: // a full PT is not asked
		case s.tokCost > 0 && !fits(r.toks.sum(now, s.tokWidth), int64(float64(r.tokEst.Load())*s.tokCost)):
		case s.reqCost > 0 && s.reqCost <= rateCapacity && !fits(r.reqs.m.sum(now, meterWidth), s.reqCost):
		case s.reqCost > rateCapacity && r.slow.next.Load() > now:
		default:
			continue
		}
		sure = false
	}
	return due, sure
}

// TestPropertyDemotion drives random pools holding a provisioned region
// through random outcome sequences in which that region often fails, then
// lets it recover, and checks: a demoted provisioned region is never removed
// (never ejected, and Pick never fails for lack of regions); it gets its
// probes (a first attempt whose probe is due goes to it whenever it can take
// the call); and once it answers again it is restored within restoreAfter
// probes, which is within one ejection interval unless its own capacity is
// slower than the probes (then it is probed as fast as its capacity allows).
func TestPropertyDemotion(t *testing.T) {
	runs := runsOf(3_000, 500)
	rnd := rand.New(rand.NewPCG(2026, 13))
	clk := newClock()
	var demotions, restorations, probes int
	for run := range runs {
		tp := randomPool(rnd)
		if tp.Regions[0].Tier != table.TierProvisioned {
			r := &tp.Regions[0]
			r.Tier, r.Ejectable, r.Capacity = table.TierProvisioned, false, table.Capacity{}
		}
		pt := tp.Regions[0].Name
		tp.Policy.Concurrency.MaxInFlight = 1 + rnd.IntN(12) + len(tp.Regions)
		p, err := New(tp, Options{Now: clk.Now, Seed: uint64(run), Logger: quiet})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		st := p.st.Load()
		ps := st.slots[slotIndex(p, pt)]
		ptFail := 0.5 + 0.5*rnd.Float64()
		otherFail := rnd.Float64()
		// call makes one call; the provisioned region fails with
		// probability fail, the others as randomOutcome says.
		call := func(step string, fail float64) {
			now := p.nanos()
			due, sure := demotedDue(p, now)
			c := p.Start(Request{Priority: Priority(rnd.IntN(3))})
			for first := true; ; first = false {
				a, err := c.Pick()
				if err != nil {
					switch {
					case errors.Is(err, ErrOverCapacity), errors.Is(err, ErrShed), errors.Is(err, ErrBudgetExhausted), errors.Is(err, ErrAttemptsExhausted):
					default:
						t.Fatalf("run %d %s: unexpected error %v", run, step, err)
					}
					if first && len(due) > 0 && sure {
						t.Fatalf("run %d %s: a due probe of %s was refused: %v", run, step, st.slots[due[0]].name, err)
					}
					return
				}
				if first && len(due) > 0 && sure {
					if !slices.Contains(due, slotIndex(p, a.Region)) {
						t.Fatalf("run %d %s: probe of %s due, first attempt went to %s", run, step, st.slots[due[0]].name, a.Region)
					}
					probes++
				}
				o := randomOutcome(rnd, otherFail)
				if a.Region == pt {
					o = Success
					if rnd.Float64() < fail {
						o = Failure
					}
				}
				a.Finish(Report{Outcome: o, Tokens: int64(rnd.IntN(200))})
				if o != Failure && o != Capacity {
					return
				}
			}
		}
		wasDemoted := false
		for step := range 40 + rnd.IntN(200) {
			call(fmt.Sprintf("step %d", step), ptFail)
			clk.Advance(time.Duration(rnd.IntN(int(st.interval/time.Millisecond)/5+1)) * time.Millisecond)
			if s := ps; s.r.ejectedUntil.Load() > p.nanos() {
				t.Fatalf("run %d step %d: provisioned region %s is ejected", run, step, pt)
			}
			wasDemoted = wasDemoted || ps.r.demoted.Load() != nil
		}
		if !wasDemoted {
			continue
		}
		demotions++
		if ps.r.demoted.Load() == nil {
			continue // restored already, by a run of successes
		}
		// It recovers: calls at three times the probe rate of every region
		// until it is restored, within restoreAfter probes of the probe
		// pace and its own capacity.
		gap := st.probeEvery
		// A capacity admits a call when the sliding second has room for
		// its cost: one every cost, or every 2 × cost when the bucket
		// boundaries fall badly; a probe that finds no room is lost, and
		// the next comes an interval later.
		if s := ps; s.reqCost > 0 {
			gap += 2*s.reqCost*costUnit + meterWidth
		} else if s.tokCost > 0 {
			gap += 2*int64(200*s.tokCost)*s.tokWindow/rateCapacity + s.tokWidth // calls report up to 200 tokens
		}
		// A probe also waits for probeCalls of the pool's calls, which
		// come every step.
		step := gap / int64(3*len(st.slots))
		gap = max(gap, (st.probeCalls+1)*step)
		need := ps.r.restoreAfter(ps, p.nanos())
		bound := (need + 2) * gap
		begin := p.nanos()
		for p.nanos()-begin <= bound && ps.r.demoted.Load() != nil {
			call("recovery", 0)
			clk.Advance(time.Duration(step))
		}
		if d := ps.r.demoted.Load(); d != nil {
			t.Fatalf("run %d: %s answers every call, still demoted %s after it recovered (restore after %d, probes every %s and %d calls)\npool: %+v",
				run, pt, time.Duration(p.nanos()-begin), need, time.Duration(gap), st.probeCalls, tp)
		}
		restorations++
	}
	t.Logf("%d runs: %d with a demotion, %d restorations watched, %d due probes taken", runs, demotions, restorations, probes)
	if demotions < runs/10 || restorations == 0 || probes == 0 {
		t.Errorf("too few demotions (%d), restorations (%d) or probes (%d): the properties were not exercised", demotions, restorations, probes)
	}
}

// slotIndex is the index of the region named name in p's slots.
func slotIndex(p *Pool, name string) int {
	for i, s := range p.st.Load().slots {
		if s.name == name {
			return i
		}
	}
	return -1
}
