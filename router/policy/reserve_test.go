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

	if !p.startWaiting(PriorityCritical, true) {
		t.Fatal("no waiting place")
	}
	if _, err := admitted(p); !errors.Is(err, ErrShed) || m.asked["europe-west4"] != 0 {
		t.Fatalf("critical waiting: %v, meter asked %d times; want shed, not asked", err, m.asked["europe-west4"])
	}
	p.stopWaiting(PriorityCritical, true)
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
	if !p.startWaiting(PriorityCritical, true) {
		t.Fatal("no waiting place")
	}
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
			p.stopWaiting(PriorityCritical, true) // the critical call was served elsewhere
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
	if !p.startWaiting(PriorityCritical, true) {
		t.Fatal("no waiting place")
	}
	defer p.stopWaiting(PriorityCritical, true)
	d = p.Start(Request{Priority: PriorityDefault, Deadline: clk.Now().Add(10 * time.Second)})
	var waited time.Duration
	_, err = d.PickWaiting(context.Background(), func(_ context.Context, w time.Duration) error { waited += w; clk.Advance(w); return nil })
	if !errors.Is(err, ErrShed) || waited > MaxHeadroomWait || waited < MaxHeadroomWait-25*time.Millisecond {
		t.Errorf("default call behind a critical one that never leaves: %v after %v; want shed after about %v", err, waited, MaxHeadroomWait)
	}
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
	c := p.Start(Request{Priority: PriorityCritical, Region: "europe-west1", Deadline: clk.Now().Add(10 * time.Second)})
	first, err := c.Pick()
	if err != nil {
		t.Fatal(err)
	}
	first.Done(Success) // europe-west1 is full for a second
	c = p.Start(Request{Priority: PriorityCritical, Region: "europe-west1", Deadline: clk.Now().Add(10 * time.Second)})
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
