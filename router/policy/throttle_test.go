package policy

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestThrottleProbability checks the SRE book's formula on known counts.
func TestThrottleProbability(t *testing.T) {
	for _, tc := range []struct {
		name               string
		answered, capacity int
		want               float64
	}{
		{"no 429 at all", 50, 0, 0},
		{"a third 429: under K", 30, 10, 0},
		{"all 429", 100, 100, 100.0 / 101},
		{"three quarters 429", 100, 75, (100 - 2*25) / 101.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			p := mustNew(t, pool(shared("europe-west1", 0)), clk)
			r := p.st.Load().slots[0].r
			for i := range tc.answered {
				o := Success
				if i < tc.capacity {
					o = Capacity
				}
				r.inFlight.Add(1)
				p.inFlight.Add(1)
				r.done(Report{Outcome: o})
			}
			if got := r.throttleP(p.nanos(), p.st.Load()); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("p = %v, want %v", got, tc.want)
			}
			clk.Advance(throttleWindow + time.Second)
			if got := r.throttleP(p.nanos(), p.st.Load()); got != 0 {
				t.Errorf("p a window later = %v, want 0", got)
			}
		})
	}
}

// TestCapacityNeverEjects sends only 429s to an ejectable region: it is
// throttled, but it is never ejected, and its in-flight limit stays (a 429
// refuses rate, which the throttle answers, not concurrency).
func TestCapacityNeverEjects(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0), shared("europe-west2", 0))
	p := mustNew(t, tp, clk)
	r := p.st.Load().slots[0].r
	limit := p.Snapshot().Regions[0].Limit
	for range 500 {
		r.inFlight.Add(1)
		p.inFlight.Add(1)
		r.done(Report{Outcome: Capacity})
		clk.Advance(10 * time.Millisecond)
	}
	rs := p.Snapshot().Regions[0]
	if rs.Ejected || rs.TimesEjected != 0 || rs.Answered != 0 {
		t.Errorf("after 500 429s: ejected %v (%d times), %d answered in the failure window; want none", rs.Ejected, rs.TimesEjected, rs.Answered)
	}
	if rs.ThrottleProbability < 0.9 || rs.Limit != limit {
		t.Errorf("throttle %.2f, limit %d; want throttled and the limit still %d", rs.ThrottleProbability, rs.Limit, limit)
	}
}

// TestSteady429sKeepTheRegionsConcurrency: a region that answers every other
// call 429 at once (Google's shared quota under contention) and the others
// after two seconds is sent 10 calls a second, 10 of them in flight at a
// time. Its 429s barely throttle it (it accepts half of what it answers, the
// throttle's K of 2: about 1% of calls turned away as the count swings) and
// must not shrink its in-flight limit: a limit cut by each 429 and grown by
// each success settles near three, and the calls the region would have
// served are refused here.
func TestSteady429sKeepTheRegionsConcurrency(t *testing.T) {
	clk := newClock()
	p := limitedRegion(t, clk, 20, 16, 64)
	type held struct {
		a   Attempt
		due time.Time
	}
	var inFlight []held
	refused, served, sent := 0, 0, 0
	for i := range 600 { // 60 s, a call every 100 ms
		now := clk.Now()
		k := 0
		for _, h := range inFlight {
			if h.due.After(now) {
				inFlight[k] = h
				k++
				continue
			}
			h.a.Done(Success)
			served++
		}
		inFlight = inFlight[:k]
		c := p.Start(Request{Deadline: now.Add(10 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			refused++
			clk.Advance(100 * time.Millisecond)
			continue
		}
		sent++
		if i%2 == 0 {
			a.Done(Capacity)
		} else {
			inFlight = append(inFlight, held{a, now.Add(2 * time.Second)})
		}
		clk.Advance(100 * time.Millisecond)
	}
	if refused > 18 {
		t.Errorf("%d of 600 calls refused before reaching a region that served %d of %d it was sent; want at most 3%% refused (limit now %d)",
			refused, served, sent, p.Snapshot().Regions[0].Limit)
	}
}

// TestThrottleDrawsOnceACall: a call the throttle turned away stays turned
// away when it picks again (a call waiting for a quota's room picks at each
// wake), while the throttle's probability holds: of 50 calls each picking
// up to five times, about 1 − p reach the lane. Drawn afresh at each pick,
// 1 − p^5 would (all but one in a few hundred), and a lane that accepts
// nothing would be asked by every waiting call at each wake.
func TestThrottleDrawsOnceACall(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0)), clk)
	report(p, 0, Success, 10)
	report(p, 0, Capacity, 20)
	q := p.st.Load().slots[0].r.throttleP(p.nanos(), p.st.Load())
	if q < 0.3 || q > 0.35 {
		t.Fatalf("throttle probability %.3f, want (30 - 2×10) / 31", q)
	}
	const calls = 50
	var held []Attempt
	for range calls {
		c := p.Start(Request{})
		for range 5 {
			a, err := c.Pick()
			if err == nil {
				held = append(held, a)
				break
			}
			if !errors.Is(err, ErrOverCapacity) {
				t.Fatalf("pick: %v, want over capacity (the throttle)", err)
			}
		}
	}
	t.Logf("%d of %d calls picking up to five times reached the lane throttled at %.3f", len(held), calls, q)
	if n := len(held); n > calls*85/100 || n < calls*45/100 {
		t.Errorf("%d of %d calls reached the lane, want about %.0f", n, calls, calls*(1-q))
	}
	for _, a := range held {
		a.Done(Cancelled)
	}
}

// TestThrottleDrawsApartForEachLane: a call's draws at two lanes are
// independent, so of the calls that find two regions throttled at p each,
// about p² are turned away from both, not p: one draw shared by the lanes
// would refuse a call whenever it refused it anywhere.
func TestThrottleDrawsApartForEachLane(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0), shared("europe-west2", 0)), clk)
	for i := range 2 {
		report(p, i, Success, 10)
		report(p, i, Capacity, 20)
	}
	q := p.st.Load().slots[0].r.throttleP(p.nanos(), p.st.Load())
	const calls = 400
	refused := 0
	for range calls {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			refused++
			continue
		}
		a.Done(Cancelled)
	}
	t.Logf("%d of %d calls turned away from both regions, each throttled at %.3f", refused, calls, q)
	if max, min := calls*q*q*2, calls*q*q/2; float64(refused) > max || float64(refused) < min {
		t.Errorf("%d of %d calls turned away from both, want about %.0f (p²), not %.0f (p)", refused, calls, calls*q*q, calls*q)
	}
}
