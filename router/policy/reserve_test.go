package policy

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitingHigherPriorityGoesFirst: while a critical call waits for a
// full quota's room, the room that frees goes to it: a default or sheddable
// call that comes first is shed (ErrShed, not over capacity) though the
// quota has room, and the waiting call is admitted when it wakes. A default
// call waiting holds room from sheddable calls alone; with nobody of a higher
// priority waiting, every priority takes room first come, as before (all nine
// pairs of a waiter and a caller).
func TestWaitingHigherPriorityGoesFirst(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 1)), clk)
	once(t, p, Success) // the quota is full until 1.025 s
	clk.Advance(500 * time.Millisecond)

	// waitBeside has a call of priority waiter wait for the room, and while
	// it sleeps past the moment the room frees, a call of priority other
	// asks for it. It returns other's error and the waiter's.
	waitBeside := func(waiter, other Priority) (otherErr, waiterErr error) {
		t.Helper()
		c := p.Start(Request{Priority: waiter, Deadline: clk.Now().Add(10 * time.Second)})
		sleep := func(_ context.Context, d time.Duration) error {
			clk.Advance(d) // the room is free now; the waiter has not woken yet
			o := p.Start(Request{Priority: other})
			a, err := o.Pick()
			if err == nil {
				a.Done(Success)
			}
			otherErr = err
			return nil
		}
		a, err := c.PickWaiting(context.Background(), sleep)
		if err == nil {
			a.Done(Success)
		}
		return otherErr, err
	}

	// Every pair of priorities: the room is held for the waiter from the
	// priorities below its own, and from no other.
	all := []Priority{PriorityCritical, PriorityDefault, PrioritySheddable}
	for _, waiter := range all {
		for _, other := range all {
			held := other.Rank() < waiter.Rank()
			otherErr, waiterErr := waitBeside(waiter, other)
			switch {
			case held && (!errors.Is(otherErr, ErrShed) || waiterErr != nil):
				t.Errorf("%s waiting, %s asking: %v, waiter %v; want the other shed and the waiter admitted", waiter, other, otherErr, waiterErr)
			case !held && (otherErr != nil || !errors.Is(waiterErr, ErrOverCapacity)):
				t.Errorf("%s waiting, %s asking: %v, waiter %v; want the other admitted first and the waiter over capacity", waiter, other, otherErr, waiterErr)
			}
			// Fill the quota again for the next pair, a second later.
			clk.Advance(2 * time.Second)
			once(t, p, Success)
			clk.Advance(500 * time.Millisecond)
		}
	}

	// Nobody waits: a sheddable call takes the room.
	clk.Advance(2 * time.Second)
	if _, a := pick(t, p, PrioritySheddable); a.Region != "europe-west1" {
		t.Fatalf("sheddable call with nobody waiting went to %s", a.Region)
	}
}

// TestYieldingCallAsksNoSharedMeter: while a critical call waits, a default
// call is shed without asking the shared meter (the room is not its to
// take, in any router's count); once nobody waits, the meter is asked again.
func TestYieldingCallAsksNoSharedMeter(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west4", 2)), clk)
	m := &scriptedMeter{v: SharedAdmitted, asked: map[string]int{}}
	p.SetSharedMeter(m)

	stop := waitEverywhere(t, p, PriorityCritical)
	if _, err := admitted(p); !errors.Is(err, ErrShed) || m.asked["europe-west4"] != 0 {
		t.Fatalf("critical waiting: %v, meter asked %d times; want shed, not asked", err, m.asked["europe-west4"])
	}
	stop()
	if ok, err := admitted(p); !ok || m.asked["europe-west4"] != 1 {
		t.Fatalf("after the wait: admitted %v (%v), meter asked %d times; want admitted by it", ok, err, m.asked["europe-west4"])
	}
}

// TestCallThatGaveWayWaitsItsTurn: a default call that gives way to a
// waiting critical call waits in steps of a meter's tick rather than being
// shed at once, and sheddable calls give way to it while it waits; once the
// critical call is served, the default call takes the room at its next
// step. Shed only when its wait runs out.
func TestCallThatGaveWayWaitsItsTurn(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 1)), clk)
	clk.Advance(10 * time.Millisecond) // between two ticks of the meter
	stop := waitEverywhere(t, p, PriorityCritical)
	d := p.Start(Request{Priority: PriorityDefault, Deadline: clk.Now().Add(10 * time.Second)})
	var steps []time.Duration
	var sheddable error
	sleep := func(_ context.Context, w time.Duration) error {
		steps = append(steps, w)
		if len(steps) == 1 {
			// The default call waits: a sheddable call gives way to it.
			_, sheddable = pick1(p, PrioritySheddable)
		}
		if len(steps) == 3 {
			stop() // the critical call was served elsewhere
		}
		clk.Advance(w)
		return nil
	}
	a, err := d.PickWaiting(context.Background(), sleep)
	if err != nil {
		t.Fatalf("default call after the critical one: %v", err)
	}
	a.Done(Success)
	if len(steps) != 3 || steps[0] != 15*time.Millisecond || steps[1] != 25*time.Millisecond {
		t.Errorf("waited %v; want three steps to the meter's ticks: 15ms, 25ms, 25ms", steps)
	}
	if !errors.Is(sheddable, ErrShed) {
		t.Errorf("sheddable call while the default one waited: %v, want shed", sheddable)
	}

	// A critical call that waits longer than the default one may: the
	// default one is shed when its wait runs out.
	clk.Advance(2 * time.Second)
	defer waitEverywhere(t, p, PriorityCritical)()
	d = p.Start(Request{Priority: PriorityDefault, Deadline: clk.Now().Add(10 * time.Second)})
	var waited time.Duration
	_, err = d.PickWaiting(context.Background(), func(_ context.Context, w time.Duration) error { waited += w; clk.Advance(w); return nil })
	if !errors.Is(err, ErrShed) || waited > MaxHeadroomWait || waited < MaxHeadroomWait-25*time.Millisecond {
		t.Errorf("default call behind a critical one that never leaves: %v after %v; want shed after about %v", err, waited, MaxHeadroomWait)
	}
}

// waitEverywhere has a first attempt of priority pr wait for the room of
// every region of p, as PickWaiting would after every region refused it for
// want of room, until the function it returns is called.
func waitEverywhere(t *testing.T, p *Pool, pr Priority) func() {
	t.Helper()
	if !p.startWaiting(pr) {
		t.Fatal("no waiting place")
	}
	st := p.st.Load()
	var w waitPlace
	w.move(waitPlace{st: st, slots: 1<<len(st.slots) - 1, c: ClassOf(pr, false)})
	return func() {
		w.release()
		p.stopWaiting()
	}
}

// fill has a call pinned to region take one request of its quota.
func fill(t *testing.T, p *Pool, region string) {
	t.Helper()
	c := p.Start(Request{Region: region})
	a, err := c.Pick()
	if err != nil {
		t.Fatalf("filling %s: %v", region, err)
	}
	a.Done(Success)
}

// pick1 starts a call of priority pr, picks its first attempt and ends it
// with a success if it was admitted.
func pick1(p *Pool, pr Priority) (Attempt, error) {
	c := p.Start(Request{Priority: pr})
	a, err := c.Pick()
	if err == nil {
		a.Done(Success)
	}
	return a, err
}

// TestPinnedWaitHoldsNoRoom: a call pinned to one region (a cached content)
// that waits for that region's room does not make lower priorities give way
// in every region: they still take the room of the others.
func TestPinnedWaitHoldsNoRoom(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 1), shared("europe-west4", 1)), clk)
	fill(t, p, "europe-west1") // full for a second
	c := p.Start(Request{Priority: PriorityCritical, Region: "europe-west1", Deadline: clk.Now().Add(10 * time.Second)})
	var other error
	a, err := c.PickWaiting(context.Background(), func(_ context.Context, d time.Duration) error {
		_, other = pick1(p, PriorityDefault) // europe-west4 has room
		clk.Advance(d)
		return nil
	})
	if err != nil || a.Region != "europe-west1" {
		t.Fatalf("pinned critical call: %v in %s, want europe-west1 after its wait", err, a.Region)
	}
	a.Done(Success)
	if other != nil {
		t.Errorf("default call while a pinned critical call waited: %v, want europe-west4's room", other)
	}
}

// TestWaitingRetryGoesBeforeFirstAttempts: a default call's retry that
// waits for the one quota it has not tried gets its room when it frees,
// though a default call's first attempt asks for it first; the first
// attempt is over capacity (it gave way to its own priority: not shed).
// The other way round, a waiting first attempt holds no room from a retry
// of its priority.
func TestWaitingRetryGoesBeforeFirstAttempts(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 1), shared("europe-west4", 1)), clk)
	fill(t, p, "europe-west4")
	clk.Advance(500 * time.Millisecond)
	c := p.Start(Request{Priority: PriorityDefault, Deadline: clk.Now().Add(10 * time.Second)})
	a, err := c.Pick()
	if err != nil || a.Region != "europe-west1" {
		t.Fatalf("first attempt: %v in %q, want europe-west1, the quota with room", err, a.Region)
	}
	a.Done(Failure) // europe-west1 is full now too, and the call retries
	var first error
	sleep := func(_ context.Context, d time.Duration) error {
		clk.Advance(d) // europe-west4 has room; the retry has not woken yet
		_, first = pick1(p, PriorityDefault)
		return nil
	}
	r, err := c.PickWaiting(context.Background(), sleep)
	if err != nil || r.Region != "europe-west4" {
		t.Fatalf("retry: %v in %q, want europe-west4 after its wait", err, r.Region)
	}
	r.Done(Success)
	if !errors.Is(first, ErrOverCapacity) {
		t.Errorf("first attempt while the retry waited: %v, want over capacity", first)
	}

	// A first attempt waiting for every quota: a retry takes the room.
	clk.Advance(2 * time.Second)
	fill(t, p, "europe-west4")
	stop := waitEverywhere(t, p, PriorityDefault)
	defer stop()
	c = p.Start(Request{Priority: PriorityDefault})
	a, err = c.Pick()
	if err != nil || a.Region != "europe-west1" {
		t.Fatalf("first attempt: %v in %q, want europe-west1", err, a.Region)
	}
	a.Done(Failure)
	clk.Advance(1100 * time.Millisecond) // europe-west4 has room again
	if r, err := c.Pick(); err != nil || r.Region != "europe-west4" {
		t.Errorf("retry while a first attempt waits: %v in %q, want europe-west4's room", err, r.Region)
	}
}

// TestWaitHoldsOnlyTheRoomItWaitsFor: a critical call's spill (its first
// attempt was answered 429) that waits for the one quota it has not tried
// holds that quota's room alone: a sheddable call still takes the room of
// the quota the spill may not use (no retry budget: it may not go back).
func TestWaitHoldsOnlyTheRoomItWaitsFor(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 10), shared("europe-west4", 1))
	tp.Policy.Retry.BudgetPercent, tp.Policy.Retry.MinRetriesPerSecond = new(0), new(0)
	p := mustNew(t, tp, clk)
	fill(t, p, "europe-west4") // full for a second
	clk.Advance(500 * time.Millisecond)
	for range 4 { // europe-west1 answers: one 429 will not throttle it
		if a, err := pick1(p, PriorityDefault); err != nil || a.Region != "europe-west1" {
			t.Fatalf("filling: %v in %q", err, a.Region)
		}
	}
	c := p.Start(Request{Priority: PriorityCritical, Deadline: clk.Now().Add(10 * time.Second)})
	a, err := c.Pick()
	if err != nil || a.Region != "europe-west1" {
		t.Fatalf("first attempt: %v in %q, want europe-west1", err, a.Region)
	}
	a.Done(Capacity) // a 429: the spill goes only where the call has not been
	var other Attempt
	var otherErr error
	r, err := c.PickWaiting(context.Background(), func(_ context.Context, d time.Duration) error {
		other, otherErr = pick1(p, PrioritySheddable)
		clk.Advance(d)
		return nil
	})
	if err != nil || r.Region != "europe-west4" {
		t.Fatalf("critical spill: %v in %q, want europe-west4 after its wait", err, r.Region)
	}
	r.Done(Success)
	if otherErr != nil || other.Region != "europe-west1" {
		t.Errorf("sheddable call while the spill waited for europe-west4: %v in %q, want europe-west1's room", otherErr, other.Region)
	}
}

// TestGivingWayInTheStoreSaysToWhom: the shared meter is asked with the
// attempt's class (a retry one above a first attempt of its priority), and a
// call that gave way in the store to a claim of its own priority is over
// capacity, to one of a higher priority shed; both wait for their turn.
func TestGivingWayInTheStoreSaysToWhom(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west4", 2)), clk)
	m := &scriptedMeter{v: SharedAdmitted, wait: int64(10 * time.Millisecond), asked: map[string]int{}}
	p.SetSharedMeter(m)

	c := p.Start(Request{Priority: PriorityDefault})
	a, err := c.Pick()
	if err != nil || m.class != ClassOf(PriorityDefault, false) {
		t.Fatalf("first attempt: %v, asked as class %d; want admitted as %d", err, m.class, ClassOf(PriorityDefault, false))
	}
	a.Done(Failure)
	if a, err = c.Pick(); err != nil || m.class != ClassOf(PriorityDefault, true) {
		t.Fatalf("retry: %v, asked as class %d; want admitted as %d", err, m.class, ClassOf(PriorityDefault, true))
	}
	a.Done(Success)

	for _, tc := range []struct {
		claimant Class
		want     error
	}{
		{ClassOf(PriorityDefault, true), ErrOverCapacity},
		{ClassOf(PriorityCritical, false), ErrShed},
	} {
		m.claimant = &tc.claimant
		_, err := admitted(p)
		var ce *CapacityError
		if !errors.Is(err, tc.want) || !errors.As(err, &ce) || !ce.waits() {
			t.Errorf("default first attempt, claim of class %d in the store: %v; want %v, waiting its turn", tc.claimant, err, tc.want)
		}
	}
}

// TestLateRetryHoldsNoRoom: a retry too close to its deadline to wait for
// the room it needs (a region slow to fail the first attempt) does not wait,
// so it holds no room from first attempts: it is refused at once, and the
// room that frees goes to the next call that asks.
func TestLateRetryHoldsNoRoom(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 1), shared("europe-west4", 1)), clk)
	fill(t, p, "europe-west4") // full until about a second from now
	c := p.Start(Request{Priority: PriorityDefault, Deadline: clk.Now().Add(time.Second)})
	a, err := c.Pick()
	if err != nil || a.Region != "europe-west1" {
		t.Fatalf("first attempt: %v in %q, want europe-west1", err, a.Region)
	}
	clk.Advance(600 * time.Millisecond) // the region takes its time to fail
	a.Done(Failure)
	slept := false
	if _, err := c.PickWaiting(context.Background(), func(context.Context, time.Duration) error { slept = true; return nil }); !errors.Is(err, ErrOverCapacity) || slept {
		t.Fatalf("retry with 0.4 s left for a wait of 0.4 s: %v, slept %v; want over capacity at once", err, slept)
	}
	clk.Advance(500 * time.Millisecond) // europe-west4 has room
	if a, err := pick1(p, PriorityDefault); err != nil || a.Region != "europe-west4" {
		t.Errorf("first attempt after the late retry gave up: %v in %q, want europe-west4's room", err, a.Region)
	}
}
