package policy

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
)

// quickPool is europe-west1, which answers in 100 ms, and europe-west4, in
// a second or more, each given 10 successes (minRequests) that took that
// long; both shared, without hints. within starts a call that must end
// within d and picks its first attempt.
func quickPool(t *testing.T) (p *Pool, clk *clocktest.Clock, within func(d time.Duration) (Attempt, error)) {
	t.Helper()
	clk = newClock()
	tp := pool(shared("europe-west1", 0), shared("europe-west4", 0))
	tp.Policy.Ejection.MinRequests = 10
	p = mustNew(t, tp, clk)
	within = func(d time.Duration) (Attempt, error) {
		c := p.Start(Request{Deadline: clk.Now().Add(d)})
		return c.Pick()
	}
	// Batches of calls in flight together, so that the successes fall
	// within one ejection interval.
	ok := map[string]int{}
	for range 10 {
		if ok["europe-west1"] >= 10 && ok["europe-west4"] >= 10 {
			return p, clk, within
		}
		var quick, slow []Attempt
		for range 20 {
			a, err := within(time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if a.Region == "europe-west1" {
				quick = append(quick, a)
			} else {
				slow = append(slow, a)
			}
		}
		clk.Advance(100 * time.Millisecond)
		for _, a := range quick {
			a.Done(Success)
		}
		clk.Advance(900 * time.Millisecond)
		for _, a := range slow {
			a.Done(Success)
		}
		ok["europe-west1"] += len(quick)
		ok["europe-west4"] += len(slow)
	}
	t.Fatalf("successes after 200 calls: %v, want 10 in each region", ok)
	return nil, nil, nil
}

// TestAttemptNotSentWhereItCannotEndInTime: a call whose time left is
// shorter than a region's quickest recent success goes elsewhere, and
// where no region is quick enough it ends at once with a deadline error;
// a call with the time goes anywhere, as does a counting call.
func TestAttemptNotSentWhereItCannotEndInTime(t *testing.T) {
	p, clk, within := quickPool(t)
	b, err := json.Marshal(p.Snapshot().Regions)
	if err != nil {
		t.Fatal(err)
	}
	var quickest []struct{ QuickestSuccess string }
	if err := json.Unmarshal(b, &quickest); err != nil {
		t.Fatal(err)
	}
	if len(quickest) != 2 || quickest[0].QuickestSuccess != "100ms" || quickest[1].QuickestSuccess != "1s" {
		t.Errorf("snapshot's quickestSuccess %+v, want 100ms and 1s: %s", quickest, b)
	}

	// spread is where 40 calls with left to go went.
	spread := func(left time.Duration) map[string]int {
		got := map[string]int{}
		for range 40 {
			a, err := within(left)
			if err != nil {
				t.Fatalf("a call with %v left: %v", left, err)
			}
			got[a.Region]++
			a.Done(Cancelled)
		}
		return got
	}
	if got := spread(500 * time.Millisecond); got["europe-west4"] != 0 {
		t.Errorf("calls with 0.5 s left went %v, want none to europe-west4, whose quickest success took 1 s", got)
	}
	if got := spread(2 * time.Second); got["europe-west4"] == 0 || got["europe-west1"] == 0 {
		t.Errorf("calls with 2 s left went %v, want some to each region", got)
	}

	_, err = within(50 * time.Millisecond)
	if !errors.Is(err, ErrTooLate) || !errors.Is(err, ErrDeadlineExceeded) {
		t.Errorf("a call with 50 ms left: %v, want ErrTooLate, a deadline error", err)
	}
	c := p.Start(Request{Deadline: clk.Now().Add(50 * time.Millisecond), Counting: true})
	if a, err := c.Pick(); err != nil {
		t.Errorf("a counting call with 50 ms left: %v, want an attempt", err)
	} else {
		a.Done(Cancelled)
	}
}

// TestRetryNotSentWhereItCannotEndInTime: the retry of a call whose first
// attempt failed slowly, with less time left than one region's quickest
// success, goes to the other region; with less than either's, the call ends
// with its failure (the retry refused with a deadline error).
func TestRetryNotSentWhereItCannotEndInTime(t *testing.T) {
	for _, tc := range []struct {
		left time.Duration
		want string // "": refused
	}{{500 * time.Millisecond, "europe-west1"}, {50 * time.Millisecond, ""}} {
		p, clk, _ := quickPool(t)
		var calls []*Call
		var firsts []Attempt
		for range 6 {
			c := p.Start(Request{Deadline: clk.Now().Add(5 * time.Second)})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			calls, firsts = append(calls, &c), append(firsts, a)
		}
		clk.Advance(5*time.Second - tc.left)
		for i, c := range calls {
			firsts[i].Done(Failure)
			r, err := c.Pick()
			switch {
			case tc.want == "" && !errors.Is(err, ErrTooLate):
				t.Errorf("retry with %v left after %s: %q %v, want ErrTooLate", tc.left, firsts[i].Region, r.Region, err)
			case tc.want != "" && (err != nil || r.Region != tc.want):
				t.Errorf("retry with %v left after %s: %q %v, want %s", tc.left, firsts[i].Region, r.Region, err, tc.want)
			case err == nil:
				r.Done(Cancelled)
			}
		}
	}
}

// TestQuickestIsRecentAndNeedsEvidence: a region is judged too slow only
// on minRequests successes, by the quickest of the last one to two
// ejection intervals: before the tenth success and once two intervals pass
// with none, a call with little time left is sent; a quicker success
// counts at once.
func TestQuickestIsRecentAndNeedsEvidence(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0))
	tp.Policy.Ejection.MinRequests = 10
	p := mustNew(t, tp, clk)
	try := func(left time.Duration) error {
		c := p.Start(Request{Deadline: clk.Now().Add(left)})
		a, err := c.Pick()
		if err == nil {
			a.Done(Cancelled)
		}
		return err
	}
	succeed := func(took time.Duration) {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(took)
		a.Done(Success)
	}
	for i := range 9 {
		succeed(time.Second)
		if err := try(500 * time.Millisecond); err != nil {
			t.Fatalf("after %d successes of 1 s: %v, want an attempt (too little evidence)", i+1, err)
		}
	}
	succeed(time.Second)
	if err := try(500 * time.Millisecond); !errors.Is(err, ErrTooLate) {
		t.Fatalf("after 10 successes of 1 s, a call with 0.5 s left: %v, want ErrTooLate", err)
	}
	succeed(400 * time.Millisecond)
	if err := try(500 * time.Millisecond); err != nil {
		t.Errorf("after a success of 0.4 s, a call with 0.5 s left: %v, want an attempt", err)
	}
	if err := try(300 * time.Millisecond); !errors.Is(err, ErrTooLate) {
		t.Errorf("after a success of 0.4 s, a call with 0.3 s left: %v, want ErrTooLate", err)
	}
	clk.Advance(20 * time.Second) // two ejection intervals
	if err := try(300 * time.Millisecond); err != nil {
		t.Errorf("two intervals after the last success: %v, want an attempt", err)
	}
}
