package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
// priority pr now: not ejected (or in panic), under its in-flight ceiling, not
// throttled at all and under its capacities.
func hasHeadroom(p *Pool, pr Priority) bool {
	st := p.st.Load()
	now := p.nanos()
	if p.inFlight.Load()+1 > ceiling(st.maxInFlight, pr) {
		return false
	}
	panicking := st.inPanic(now)
	for _, s := range st.slots {
		r := s.r
		switch {
		case r.ejectedUntil.Load() > now && !panicking:
		case r.inFlight.Load()+1 > ceiling(int64(r.limit.get()), pr):
		case r.throttleP(now) > 0:
		case s.tokCost > 0 && !fits(r.toks.sum(now), int64(float64(r.tokEst.Load())*s.tokCost)):
		case s.reqCost > 0 && s.reqCost <= rateWindow && !fits(r.reqs.sum(now), s.reqCost):
		case s.reqCost > rateWindow && r.slow.next.Load() > now:
		default:
			return true
		}
	}
	return false
}

// TestPropertyInvariants drives random pools through random outcomes, clock
// steps, concurrent attempts and table updates, and checks after every step:
// Pick fails only with over-capacity or shed (carrying a Retry-After, and only
// when no region surely had headroom), or with a deadline, budget or attempts
// error, never for lack of regions; a provisioned region is never ejected;
// ejected regions never exceed maxEjectedPercent; in-flight counts return to
// zero.
func TestPropertyInvariants(t *testing.T) {
	runs := 100_000
	if testing.Short() {
		runs = 10_000
	}
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
		p, err := New(tp, Options{Now: clk.Now, Seed: uint64(run)})
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
				a.Finish(Report{Outcome: o, Tokens: int64(rnd.IntN(200)), Timeout: rnd.IntN(8) == 0})
				if o != Failure && o != Capacity {
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
