package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestAIMD checks additive increase while the limit is in use, none while idle,
// and multiplicative decrease to the floor.
func TestAIMD(t *testing.T) {
	var l aimd
	l.set(10)
	l.grow(2, 100) // under half used: no change
	if got := l.get(); got != 10 {
		t.Errorf("grow while idle: %v, want 10", got)
	}
	for range 10 {
		l.grow(10, 100)
	}
	if got := l.get(); got < 10.9 || got > 11 {
		t.Errorf("ten successes at full use: %v, want about 11", got)
	}
	l.grow(20, 11)
	if got := l.get(); got != 11 {
		t.Errorf("grow over max: %v, want 11", got)
	}
	l.shrink(limitMin)
	if got := l.get(); got != 11*limitDecrease {
		t.Errorf("shrink: %v, want %v", got, 11*limitDecrease)
	}
	for range 100 {
		l.shrink(limitMin)
	}
	if got := l.get(); got != limitMin {
		t.Errorf("shrink to the floor: %v, want %v", got, limitMin)
	}
	l.set(2.5)
	l.grow(1, 100)
	if got := l.get(); got <= 2.5 {
		t.Errorf("a limit of 2.5 with one call in flight did not grow: %v", got)
	}
	l.set(30)
	for range 100 {
		l.shrink(8)
	}
	if got := l.get(); got != 8 {
		t.Errorf("shrink to a floor of 8: %v, want 8", got)
	}
}

// TestProvisionedLimitSurvivesTimeouts replays an upstream incident's
// intermittent 504s (timeouts) on a provisioned and a shared region: the
// shared region's in-flight limit shrinks, the provisioned region's never
// goes below its initial limit, so it keeps taking concurrent calls.
func TestProvisionedLimitSurvivesTimeouts(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west1", table.Capacity{GSUs: 6}), shared("europe-west4", 0))
	tp.Regions[1].Ejectable = false
	tp.Policy.Concurrency = table.Concurrency{MaxInFlight: 1000, RegionInitialLimit: 16, RegionMaxLimit: 64}
	p := mustNew(t, tp, clk)
	for i := range 200 {
		for _, s := range p.st.Load().slots {
			s.r.inFlight.Add(1)
			p.inFlight.Add(1)
			s.r.done(Report{Outcome: Failure, Timeout: true})
		}
		if i%10 == 0 {
			clk.Advance(time.Second)
		}
	}
	limits := map[string]int64{}
	for _, r := range p.Snapshot().Regions {
		limits[r.Name] = r.Limit
	}
	if limits["europe-west1"] < 16 {
		t.Errorf("provisioned region's limit fell to %d after timeouts; want at least its initial 16", limits["europe-west1"])
	}
	if limits["europe-west4"] >= 16 {
		t.Errorf("shared region's limit stayed at %d after timeouts; want it shrunk", limits["europe-west4"])
	}
}

// TestShedding fills the in-flight limit of a region that is not answering
// (failing: half its calls fail, which neither ejects it, as the table says,
// nor throttles it) and checks that sheddable calls are refused first, then
// default ones, and critical ones last, with ErrShed while a higher priority
// still fits and ErrOverCapacity at the limit.
func TestShedding(t *testing.T) {
	clk := newClock()
	p := limitedRegion(t, clk, 0, 20, 50)
	report(p, 0, Success, 10)
	report(p, 0, Failure, 10)
	if rs := p.Snapshot().Regions[0]; !rs.Failing || rs.ThrottleProbability != 0 {
		t.Fatalf("region %+v, want failing and not throttled", rs)
	}
	var held []*Attempt
	admitted := map[Priority]int{}
	var firstErr = map[Priority]error{}
	for _, pr := range []Priority{PrioritySheddable, PriorityDefault, PriorityCritical} {
		for {
			c := p.Start(Request{Priority: pr})
			a, err := c.Pick()
			if err != nil {
				firstErr[pr] = err
				break
			}
			held = append(held, &a)
			admitted[pr]++
		}
	}
	if admitted[PrioritySheddable] != 15 || admitted[PriorityDefault] != 3 || admitted[PriorityCritical] != 2 {
		t.Errorf("admitted %v, want sheddable to 75%% (15), default to 90%% (3 more), critical to 100%% (2 more)", admitted)
	}
	if !errors.Is(firstErr[PrioritySheddable], ErrShed) || !errors.Is(firstErr[PriorityDefault], ErrShed) {
		t.Errorf("refusals below the limit: %v, %v; want ErrShed", firstErr[PrioritySheddable], firstErr[PriorityDefault])
	}
	if err := firstErr[PriorityCritical]; !errors.Is(err, ErrOverCapacity) {
		t.Errorf("refusal at the limit: %v, want ErrOverCapacity", err)
	}
	if d, ok := RetryAfter(firstErr[PriorityCritical]); !ok || d < 1e9 {
		t.Errorf("Retry-After = %v, %v; want at least 1s", d, ok)
	}
	for _, a := range held {
		a.Done(Cancelled)
	}
	if n := p.Snapshot().InFlight; n != 0 {
		t.Errorf("%d in flight after every attempt ended", n)
	}
}

// TestGlobalCap checks that the pool-wide cap sheds before any region's limit
// is reached.
func TestGlobalCap(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0), shared("europe-west2", 0))
	tp.Policy.Concurrency = table.Concurrency{MaxInFlight: 10, RegionInitialLimit: 100, RegionMaxLimit: 100}
	p := mustNew(t, tp, clk)
	n := 0
	var err error
	for ; n < 100; n++ {
		c := p.Start(Request{Priority: PriorityCritical})
		if _, err = c.Pick(); err != nil {
			break
		}
	}
	if n != 10 || !errors.Is(err, ErrOverCapacity) {
		t.Errorf("admitted %d critical calls then %v; want 10 then ErrOverCapacity", n, err)
	}
}

// TestSlowIsNotOverloaded holds every call to a region that answers slowly:
// at 40 calls a second (under its quota of 50), each held 4 s, 160 calls are
// in flight, far over the AIMD limit of 64 it starts with; none is shed,
// since the region answers and 50/s × (10 s deadline + 1 s) bounds them.
// Once the same region fails every call it ends, it is held to its AIMD
// limit again; once it answers some of them, it keeps that share of the
// bound (slot.roomInFlight), and a call finds room again with 80 in flight.
// A table's regionMaxLimit under the 160 changes none of it: it caps the AIMD
// limit, not the bound of the region's capacity.
func TestSlowIsNotOverloaded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		region table.Region
		most   int // the table's regionMaxLimit, when set
	}{
		{"shared, 50 requests/s", shared("europe-west1", 50), 0},
		{"provisioned, 25,000 tokens/s", provisioned("europe-west4", table.Capacity{TokensPerSecond: 25_000}), 0},
		{"shared, 50 requests/s, regionMaxLimit 100", shared("europe-west1", 50), 100},
		{"provisioned, 25,000 tokens/s, regionMaxLimit 100", provisioned("europe-west4", table.Capacity{TokensPerSecond: 25_000}), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tp := pool(tc.region)
			tp.Regions[0].Ejectable = false
			tp.Policy.Concurrency.RegionMaxLimit = tc.most
			p := mustNew(t, tp, clk)
			var held []Attempt
			once := func() Attempt {
				c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
				a, err := c.Pick()
				if err != nil {
					t.Fatalf("with %d in flight: %v", len(held), err)
				}
				return a
			}
			// The provisioned region learns its calls' size: 500 tokens.
			a := once()
			a.DoneTokens(Success, 500)
			clk.Advance(time.Second)
			for range 160 {
				held = append(held, once())
				clk.Advance(25 * time.Millisecond)
			}
			if n := p.Snapshot().Regions[0].InFlight; n != 160 {
				t.Fatalf("%d in flight, want 160", n)
			}
			// It fails now, every call it ends: no longer answering, and
			// answering nothing.
			for _, a := range held[:40] {
				a.DoneTokens(Failure, 500)
			}
			c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
			if _, err := c.Pick(); !errors.Is(err, ErrOverCapacity) {
				t.Errorf("region failing every call with %d in flight over its limit %d: Pick = %v, want ErrOverCapacity",
					p.Snapshot().Regions[0].InFlight, p.Snapshot().Regions[0].Limit, err)
			}
			// It answers half of the next 40, every other one (a demoted
			// PT is not restored by them): a quarter of what it ended
			// lately. With 80 in flight, over its limit of 64, there is
			// room for one more call: a quarter of 50/s × 11 s is 137.
			for i, a := range held[40:80] {
				o := Failure
				if i%2 == 0 {
					o = Success
				}
				a.DoneTokens(o, 500)
			}
			if rs := p.Snapshot().Regions[0]; !rs.Failing || rs.InFlight <= rs.Limit {
				t.Fatalf("region %+v, want failing with more in flight than its limit", rs)
			}
			c = p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
			a, err := c.Pick()
			if err != nil {
				t.Fatalf("region answering a quarter of its calls with %d in flight: Pick = %v, want room", p.Snapshot().Regions[0].InFlight, err)
			}
			a.Done(Cancelled)
			for _, a := range held[80:] {
				a.Done(Cancelled)
			}
		})
	}
}

// TestOnlyLateTimeoutsShrinkTheLimit: a DEADLINE_EXCEEDED answered sooner
// than the region's slowest recent answer leaves its in-flight limit alone
// (it still counts as a failure); one that came after longer than that
// shrinks it.
func TestOnlyLateTimeoutsShrinkTheLimit(t *testing.T) {
	clk := newClock()
	p := limitedRegion(t, clk, 1000, 16, 64)
	// attempt makes one attempt that the region answers after took.
	attempt := func(took time.Duration, rep Report) {
		t.Helper()
		_, a := pick(t, p, PriorityDefault)
		clk.Advance(took)
		a.Finish(rep)
	}
	limit := func() int64 { return p.Snapshot().Regions[0].Limit }
	attempt(time.Second, Report{Outcome: Success})
	for range 10 {
		attempt(10*time.Millisecond, Report{Outcome: Failure, Timeout: true})
		attempt(10*time.Millisecond, Report{Outcome: Success})
	}
	if got := limit(); got != 16 {
		t.Fatalf("after 10 DEADLINE_EXCEEDED answered in 10 ms by a region whose slowest answer took 1 s: limit %d, want 16", got)
	}
	if fails := p.Snapshot().Regions[0].FailureRate; fails < 0.45 {
		t.Errorf("failure rate %v: the fast timeouts must still count as failures", fails)
	}
	attempt(2*time.Second, Report{Outcome: Failure, Timeout: true})
	if got := limit(); got != 14 {
		t.Fatalf("after a timeout that took 2 s: limit %d, want 14 (16 x 0.9)", got)
	}
}

// TestHangingDemotedRegionLendsNothing: a demoted PT whose calls all hang
// ends none of them for longer than the ejection interval, and its failure
// window empties; no answer is no evidence of answering, and it is lent
// nothing of its Little's-law bound (ranked last, nothing at all:
// TestLastResortTakesTheShareItAnswers).
func TestHangingDemotedRegionLendsNothing(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{TokensPerSecond: 25_000})), clk)
	_, a := pick(t, p, PriorityDefault)
	a.DoneTokens(Success, 500)
	// Half its calls fail: demoted, and not throttled (a throttle sends
	// twice what a region accepts).
	for i := 0; p.Snapshot().Regions[0].Demotion == nil; i++ {
		clk.Advance(10 * time.Millisecond)
		c := p.Start(Request{Deadline: clk.Now().Add(time.Minute)})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		o := Failure
		if i%2 == 1 {
			o = Success
		}
		a.DoneTokens(o, 500)
	}
	var held []Attempt
	for len(held) < 64 {
		clk.Advance(25 * time.Millisecond)
		c := p.Start(Request{Deadline: clk.Now().Add(time.Minute), Priority: PriorityCritical})
		a, err := c.Pick()
		if err != nil {
			t.Fatalf("with %d in flight: %v", len(held), err)
		}
		held = append(held, a)
	}
	clk.Advance(11 * time.Second)
	if rs := p.Snapshot().Regions[0]; rs.Demotion == nil || rs.Answered != 0 {
		t.Fatalf("region %+v, want demoted with nothing answered in the interval", rs)
	}
	c := p.Start(Request{Deadline: clk.Now().Add(time.Minute), Priority: PriorityCritical})
	if _, err := c.Pick(); !errors.Is(err, ErrOverCapacity) {
		t.Errorf("hanging demoted region with %d in flight at its limit: Pick = %v, want ErrOverCapacity", len(held), err)
	}
	for _, a := range held {
		a.Done(Cancelled)
	}
}

// TestLastResortTakesTheShareItAnswers: a demoted PT takes what the
// answering region has no room for within the share of its bound it
// answers, under its AIMD limit as over it. Answering none of its calls, it
// takes none, and the call waits for the answering region's room, while its
// probes still go; answering half, half its limit (no deadline: its
// Little's-law bound is not known).
func TestLastResortTakesTheShareItAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered int // of every 2 calls the PT ends
		want     int // calls it takes at last resort
	}{
		{"answering none", 0, 0},
		{"answering half", 1, 28}, // 64 x 0.9 for the default priority, halved
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 2)), clk)
			for i := range 40 {
				o := Failure
				if i%2 < tc.answered {
					o = Success
				}
				report(p, 0, o, 1)
			}
			if regionOf(t, p, "europe-west4").Demotion == nil {
				t.Fatal("the PT was not demoted")
			}
			regions := map[string]int{}
			var held []Attempt
			var err error
			for err == nil && len(held) < 100 {
				c := p.Start(Request{})
				var a Attempt
				if a, err = c.Pick(); err == nil {
					regions[a.Region]++
					held = append(held, a)
				}
			}
			if !errors.Is(err, ErrOverCapacity) {
				t.Errorf("once no region had room: %v, want ErrOverCapacity", err)
			}
			if regions["europe-west1"] != 2 || regions["europe-west4"] != tc.want {
				t.Errorf("calls taken %v, want 2 by the answering region's quota and %d by the demoted PT", regions, tc.want)
			}
			clk.Advance(time.Second)
			startCalls(p, p.st.Load().probeCalls)
			if _, a := pick(t, p, PriorityDefault); a.Region != "europe-west4" {
				t.Errorf("a second and ten calls later the first call went to %s, want the demoted PT's probe", a.Region)
			}
			for _, a := range held {
				a.Done(Cancelled)
			}
		})
	}
}

// TestQuotaRefusalsLeaveTheBound: a PT region's pay-as-you-go quota that
// answers 429 for part of what it is sent, while the PT's calls hold the
// region over its AIMD limit, still takes calls beyond that limit, within
// what its throttle lets through. A 429 is a refusal of rate, answered at
// once: it holds no call in flight, and the lane's throttle already bounds
// its rate. Counted as the region not answering, it left the quota the
// share of the AIMD limit its answers earn, which the PT's calls had filled:
// in a surge, a dedicated PT region's standard quota took under a call a
// second of the twenty it grants.
func TestQuotaRefusalsLeaveTheBound(t *testing.T) {
	clk := newClock()
	tp := pool(offering(provisioned("europe-west4", table.Capacity{}), table.PayGoStandard))
	tp.Policy.Provisioned.RequestType = table.RequestTypeDedicated
	p := mustNew(t, tp, clk)
	var held []Attempt
	hold := func(n int, lane table.PayGoTier) {
		t.Helper()
		for range n {
			_, a := pick(t, p, PriorityDefault)
			if a.PayGo != lane {
				t.Fatalf("attempt on %q, want %q", a.PayGo, lane)
			}
			held = append(held, a)
		}
	}
	// The PT's calls: more than the AIMD limit of 64 in flight, which a
	// region that answers admits (slow is not overloaded).
	hold(70, "")
	_, a := pick(t, p, PriorityDefault)
	a.Done(ProvisionedFull)
	// The PT is full: calls go to the standard quota, which refuses two
	// in three.
	hold(30, table.PayGoStandard)
	for i, a := range held[70:] {
		o := Success
		if i%3 != 0 {
			o = Capacity
		}
		a.Done(o)
	}
	held = held[:70]
	if rs := regionOf(t, p, "europe-west4"); rs.ThrottleProbability <= 0 || rs.InFlight <= rs.Limit {
		t.Fatalf("region %+v, want its quota throttled and more in flight than its limit", rs)
	}
	admitted := 0
	for range 40 {
		c := p.Start(Request{})
		if a, err := c.Pick(); err == nil {
			if a.PayGo != table.PayGoStandard {
				t.Fatalf("attempt on %q while the PT is full", a.PayGo)
			}
			admitted++
			held = append(held, a)
		}
	}
	// The throttle turns away about a third ((30 - 2×10) / 31); the rest
	// go. Over the limit and not counted as answering, none would.
	if admitted < 15 {
		t.Errorf("%d of 40 calls admitted to the throttled quota, want about two thirds", admitted)
	}
	for _, a := range held {
		a.Done(Cancelled)
	}
}

// TestAnswerPastHeldCallsLendsTheShare: a PT whose latency ran past its
// callers' deadline holds the calls picked meanwhile, each about to run
// out; once it has answered a call picked after them, and their timeouts
// have demoted it, it takes what the answering quota has no room for
// within the share of its bound it answers, counted on the calls picked
// since that answer (region.freshInFlight): it answered past the calls it
// holds. The same region holding calls picked after its last answer takes
// none of them: nothing says it answers those.
func TestAnswerPastHeldCallsLendsTheShare(t *testing.T) {
	for _, tc := range []struct {
		name         string
		answeredLast bool // the quick answers were picked after the held calls
		probed       bool // the PT takes its probe
	}{
		{"answered past its held calls", true, true},
		{"held calls picked after its last answer", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{TokensPerSecond: 100_000}), shared("europe-west1", 2)), clk)
			deadline := func() time.Time { return clk.Now().Add(20 * time.Second) }
			hold := func(n int, every time.Duration) []Attempt {
				var out []Attempt
				for range n {
					clk.Advance(every)
					c := p.Start(Request{Deadline: deadline()})
					a, err := c.Pick()
					if err != nil {
						t.Fatalf("with %d held: %v", len(out), err)
					}
					if a.Region != "europe-west4" {
						a.Done(Cancelled)
						continue
					}
					out = append(out, a)
				}
				return out
			}
			answer := func(as []Attempt) {
				for _, a := range as {
					a.DoneTokens(Success, 500)
				}
			}
			// Two calls answered near their deadline, as the latency
			// rises, and 200 picked meanwhile that will run out.
			slow := hold(2, 10*time.Millisecond)
			hung := hold(200, 30*time.Millisecond)
			clk.Advance(12 * time.Second)
			if !tc.answeredLast {
				answer(hold(2, 10*time.Millisecond))
			}
			held := hold(100, 10*time.Millisecond)
			clk.Advance(900 * time.Millisecond)
			answer(slow) // its tokens per call: 500, 200 calls a second
			// Held calls are told apart by the whole second they were
			// picked in.
			clk.Advance(100 * time.Millisecond)
			if tc.answeredLast {
				answer(hold(2, 10*time.Millisecond))
			}
			// The quota's second has passed: its two calls a second are free.
			clk.Advance(1100 * time.Millisecond)
			for _, a := range hung {
				a.Finish(Report{Outcome: Failure, Timeout: true})
			}
			if rs := regionOf(t, p, "europe-west4"); rs.Demotion == nil {
				t.Fatalf("region %+v, want demoted", rs)
			}
			// Its probe comes due.
			probeWait(p, clk)
			_, a := pick(t, p, PriorityDefault)
			if got := a.Region == "europe-west4"; got != tc.probed {
				t.Errorf("with %d held, the call a probe is due for went to %s; want the PT's probe: %t", len(held), a.Region, tc.probed)
			}
			a.Done(Cancelled)
			for _, a := range held {
				a.Done(Cancelled)
			}
		})
	}
}
