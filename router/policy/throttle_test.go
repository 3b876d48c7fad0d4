package policy

import (
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
// throttled, its limit shrinks, but it is never ejected.
func TestCapacityNeverEjects(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0), shared("europe-west2", 0))
	p := mustNew(t, tp, clk)
	r := p.st.Load().slots[0].r
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
	if rs.ThrottleProbability < 0.9 || rs.Limit != 1 {
		t.Errorf("throttle %.2f, limit %d; want throttled and the limit at its floor", rs.ThrottleProbability, rs.Limit)
	}
}
