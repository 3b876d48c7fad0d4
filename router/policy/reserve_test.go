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
// priority waiting, every priority takes room first come, as before.
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

	for _, tc := range []struct {
		waiter, other Priority
		held          bool // the room is held for the waiter
	}{
		{PriorityCritical, PriorityDefault, true},
		{PriorityCritical, PrioritySheddable, true},
		{PriorityDefault, PrioritySheddable, true},
		{PriorityDefault, PriorityCritical, false},
		{PrioritySheddable, PriorityDefault, false},
		{PriorityDefault, PriorityDefault, false},
	} {
		otherErr, waiterErr := waitBeside(tc.waiter, tc.other)
		switch {
		case tc.held && (!errors.Is(otherErr, ErrShed) || waiterErr != nil):
			t.Errorf("%s waiting, %s asking: %v, waiter %v; want the other shed and the waiter admitted", tc.waiter, tc.other, otherErr, waiterErr)
		case !tc.held && (otherErr != nil || !errors.Is(waiterErr, ErrOverCapacity)):
			t.Errorf("%s waiting, %s asking: %v, waiter %v; want the other admitted first and the waiter over capacity", tc.waiter, tc.other, otherErr, waiterErr)
		}
		// Fill the quota again for the next case, a second later.
		clk.Advance(2 * time.Second)
		once(t, p, Success)
		clk.Advance(500 * time.Millisecond)
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

	if !p.startWaiting(PriorityCritical) {
		t.Fatal("no waiting place")
	}
	if _, err := admitted(p); !errors.Is(err, ErrShed) || m.asked["europe-west4"] != 0 {
		t.Fatalf("critical waiting: %v, meter asked %d times; want shed, not asked", err, m.asked["europe-west4"])
	}
	p.stopWaiting(PriorityCritical)
	if ok, err := admitted(p); !ok || m.asked["europe-west4"] != 1 {
		t.Fatalf("after the wait: admitted %v (%v), meter asked %d times; want admitted by it", ok, err, m.asked["europe-west4"])
	}
}
