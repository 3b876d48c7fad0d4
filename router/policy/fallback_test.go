package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestFallbackRetryOfReservedCapacity spends the whole retry budget and then
// checks which retries are still allowed: a failure on a provisioned region
// that answers most of its calls, or that answered too few to be judged,
// falls back to another region, as does the failed probe of a demoted one
// (the router chose to send it there), and a 429 on any region spills to a
// capacity the call has not tried (Google refused it before the model ran:
// the spill repeats no work); a failure on a demoted provisioned region that
// took the call for want of room elsewhere falls back too, but only to a
// region that answers, once one has room (lastResortRetry), and a failure on
// a shared region stays bound by the budget.
func TestFallbackRetryOfReservedCapacity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     int     // region index of the first attempt's failure: 0 provisioned, 1 shared
		outcome   Outcome // how the first attempt ended
		history   float64 // the first region's failure share over the interval so far
		answers   int     // how many answers that history holds; 0: 100
		full      bool    // the shared regions have no room: a demoted region takes the call
		wantRetry bool
	}{
		{name: "provisioned failing 8%", outcome: Failure, history: 0.08, wantRetry: true},
		{name: "provisioned failing 60%, its probe", outcome: Failure, history: 0.6, wantRetry: true},
		{name: "provisioned failing 60%, a call no other region has room for", outcome: Failure, history: 0.6, full: true, wantRetry: true},
		{name: "provisioned failing every call of too few to judge", outcome: Failure, history: 1, answers: 10, wantRetry: true},
		{name: "provisioned answering 429", outcome: Capacity, history: 0.08, wantRetry: true},
		{name: "shared answering 429", first: 1, outcome: Capacity, history: 0.08, wantRetry: true},
		{name: "shared failing 8%", first: 1, outcome: Failure, history: 0.08},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			rps := 0.0
			if tc.full {
				rps = 1
			}
			tp := pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", rps), shared("europe-north1", rps))
			tp.Policy.Retry = table.Retry{MaxAttempts: 2, BudgetPercent: new(0), MinRetriesPerSecond: new(0)}
			tp.Regions[1].Ejectable, tp.Regions[2].Ejectable = false, false
			first := tc.first
			if first == 1 {
				// Without a provisioned region, first attempts go to shared ones.
				tp.Regions, first = tp.Regions[1:], 0
			}
			p := mustNew(t, tp, clk)
			// The region's recent history: the given share of its answers
			// failed, the failures last.
			answers := cmp.Or(tc.answers, 100)
			failed := int(tc.history * float64(answers))
			report(p, first, Success, answers-failed)
			report(p, first, Failure, failed)
			if tc.full {
				// Before the demoted region's next probe is due, the
				// shared regions' quotas are taken.
				for range 2 {
					if _, a := pick(t, p, PriorityDefault); a.Region == tp.Regions[first].Name {
						t.Fatalf("a call went to the demoted region while the others had room")
					}
				}
			}

			// A call whose first attempt lands on the region under test.
			var c Call
			var a Attempt
			for range 2 * probeCallsOf(*tp.Policy.Retry.BudgetPercent) {
				c = p.Start(Request{})
				var err error
				if a, err = c.Pick(); err != nil {
					t.Fatal(err)
				}
				if a.Region == tp.Regions[first].Name {
					break
				}
				a.Done(Success)
				clk.Advance(100 * time.Millisecond) // a demoted region gets only probes, one per 100 calls at a budget of 0
			}
			if a.Region != tp.Regions[first].Name {
				t.Fatalf("no first attempt reached %s", tp.Regions[first].Name)
			}
			a.Done(tc.outcome)
			if tc.full {
				// The regions that answer are still full: the retry waits
				// for their room, not for the failing region.
				_, err := c.Pick()
				if !errors.Is(err, ErrOverCapacity) || !err.(*CapacityError).waits() {
					t.Fatalf("retry while the regions that answer are full: %v; want over capacity, with a wait for room", err)
				}
				clk.Advance(err.(*CapacityError).Headroom)
			}
			retry, err := c.Pick()
			switch {
			case tc.wantRetry && err != nil:
				t.Fatalf("retry refused: %v; want a fallback to another region", err)
			case tc.wantRetry && retry.Region == a.Region && retry.Tier == a.Tier && retry.PayGo == a.PayGo:
				t.Fatalf("retry went back to the capacity it tried (%s %s %s); want another", retry.Region, retry.Tier, retry.PayGo)
			case !tc.wantRetry && !errors.Is(err, ErrBudgetExhausted):
				t.Fatalf("retry: region %q, err %v; want ErrBudgetExhausted", retry.Region, err)
			}
			if err == nil {
				retry.Done(Success)
			}
		})
	}
}

// TestSpillAfter429GoesOnlyToUntriedCapacity: with no retry budget left, a
// call whose attempts each answer 429 spills to every capacity it has not
// tried, and then stops with a capacity error: it never goes back to a
// capacity that refused it, so a call makes at most one attempt per
// capacity however many attempts it is allowed.
func TestSpillAfter429GoesOnlyToUntriedCapacity(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west4", 0), shared("europe-north1", 0))
	tp.Policy.Retry = table.Retry{MaxAttempts: 5, BudgetPercent: new(0), MinRetriesPerSecond: new(0)}
	p := mustNew(t, tp, clk)
	c := p.Start(Request{})
	seen := map[string]bool{}
	for range 2 {
		a, err := c.Pick()
		if err != nil {
			t.Fatalf("attempt %d: %v; want a spill to a region not tried", c.Attempts()+1, err)
		}
		if seen[a.Region] {
			t.Fatalf("attempt %d went back to %s, which answered 429", c.Attempts(), a.Region)
		}
		seen[a.Region] = true
		a.Done(Capacity)
	}
	a, err := c.Pick()
	var ce *CapacityError
	if !errors.As(err, &ce) {
		t.Fatalf("third attempt: region %q, err %v; want a capacity error (every capacity tried)", a.Region, err)
	}
	// A failure is still a retry the budget bounds.
	if a, err = retryAfter(t, p, Failure); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("retry after a failure: region %q, err %v; want ErrBudgetExhausted", a.Region, err)
	}
}

// TestRetryAfter429WithNoCapacityLeftToTry: in a pool of one capacity (the
// global endpoint alone, say), a call answered 429 has no capacity it has
// not tried to spill to; it may still retry the one it tried, as any retry
// may, within the retry budget, and not beyond it.
func TestRetryAfter429WithNoCapacityLeftToTry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		floor     int
		wantRetry bool
	}{
		{"budget left", 1, true},
		{"no budget", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tp := pool(shared("global", 0))
			tp.Policy.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(0), MinRetriesPerSecond: new(tc.floor)}
			a, err := retryAfter(t, mustNew(t, tp, clk), Capacity)
			switch {
			case tc.wantRetry && err != nil:
				t.Fatalf("retry after a 429: %v; want a retry of global within the budget", err)
			case tc.wantRetry && a.Region != "global":
				t.Fatalf("retry went to %q", a.Region)
			case !tc.wantRetry && err == nil:
				t.Fatalf("retry to %q with no budget and no capacity left to try", a.Region)
			}
		})
	}
}

// TestLastResortRetryNeedsARegionThatAnswers: with no retry budget left, a
// call that a demoted PT took because every other region is ejected gets no
// retry: no region answers, and the exception for a last resort's retry
// goes only to one that does, so in a total outage the budget alone bounds
// retries, as it always has.
func TestLastResortRetryNeedsARegionThatAnswers(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 0))
	tp.Policy.Retry = table.Retry{MaxAttempts: 2, BudgetPercent: new(0), MinRetriesPerSecond: new(0)}
	p := mustNew(t, tp, clk)
	report(p, 0, Success, 40)
	report(p, 0, Failure, 60)
	report(p, 1, Failure, 100)
	if sl := p.st.Load().slots; sl[0].r.demoted.Load() == nil || sl[1].r.ejectedUntil.Load() <= clk.Now().UnixNano() {
		t.Fatal("the PT is not demoted, or the shared region not ejected")
	}
	for range 200 {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if a.Region != "europe-west1" || c.st.probed != 0 {
			a.Done(Failure)
			continue
		}
		a.Done(Failure)
		if retry, err := c.Pick(); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("retry of a last resort with no region answering: %q, %v; want ErrBudgetExhausted", retry.Region, err)
		}
		return
	}
	t.Fatal("no call went to the demoted PT but as its probe")
}

// TestSpillWaitsForUntriedRoom: a call answered 429 where the only capacity
// it has not tried is full for a moment waits for that capacity's room
// (PickWaiting), rather than go back, within the retry budget, to the
// capacity that has just refused it, and spend its last attempt there. A
// call that does not wait (Pick) still retries the capacity it tried,
// within the budget.
func TestSpillWaitsForUntriedRoom(t *testing.T) {
	for _, waits := range []bool{true, false} {
		t.Run(fmt.Sprintf("waits %v", waits), func(t *testing.T) {
			clk := newClock()
			tp := pool(shared("europe-west4", 0), shared("europe-north1", 1))
			tp.Regions[0].Ejectable, tp.Regions[1].Ejectable = false, false
			p := mustNew(t, tp, clk)
			// europe-north1's quota of one call a second is taken.
			for filled := false; !filled; {
				_, a := pick(t, p, PriorityDefault)
				filled = a.Region == "europe-north1"
				a.Done(Success)
			}
			c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
			noWait := func(context.Context, time.Duration) error {
				t.Fatal("the first attempt waited")
				return nil
			}
			a, err := c.PickWaiting(context.Background(), noWait)
			if err != nil || a.Region != "europe-west4" {
				t.Fatalf("first attempt: %q %v, want europe-west4 (europe-north1 is full)", a.Region, err)
			}
			a.Done(Capacity)
			var slept time.Duration
			if waits {
				a, err = c.PickWaiting(context.Background(), func(_ context.Context, d time.Duration) error {
					slept += d
					clk.Advance(d)
					return nil
				})
			} else {
				a, err = c.Pick()
			}
			switch {
			case err != nil:
				t.Fatalf("retry after the 429: %v", err)
			case waits && (a.Region != "europe-north1" || slept == 0 || slept > MaxHeadroomWait):
				t.Fatalf("retry went to %s after waiting %v; want europe-north1 once it has room, within %v", a.Region, slept, MaxHeadroomWait)
			case !waits && a.Region != "europe-west4":
				t.Fatalf("retry without waiting went to %s; want europe-west4 again, within the budget", a.Region)
			}
		})
	}
}

// TestSpillGoesBackWhenTheRoomIsTaken: the case the wait must not make
// worse. Many calls wait for one small quota's room, and another call takes
// it while this one sleeps: the next room would come past MaxHeadroomWait of
// waiting, so the call stops waiting and goes back, within the budget, to
// the capacity that refused it, as it did before it waited, rather than
// fail.
func TestSpillGoesBackWhenTheRoomIsTaken(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west4", 0), shared("europe-north1", 1))
	tp.Regions[0].Ejectable, tp.Regions[1].Ejectable = false, false
	p := mustNew(t, tp, clk)
	// takeNorth makes calls of priority pr until one is admitted by
	// europe-north1's quota of one call a second.
	takeNorth := func(pr Priority) {
		for range 100 {
			_, a := pick(t, p, pr)
			a.Done(Success)
			if a.Region == "europe-north1" {
				return
			}
		}
		t.Fatal("no call reached europe-north1")
	}
	takeNorth(PriorityDefault)
	c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
	a, err := c.Pick()
	if err != nil || a.Region != "europe-west4" {
		t.Fatalf("first attempt: %q %v, want europe-west4 (europe-north1 is full)", a.Region, err)
	}
	a.Done(Capacity)
	var slept time.Duration
	a, err = c.PickWaiting(context.Background(), func(_ context.Context, d time.Duration) error {
		slept += d
		clk.Advance(d)
		// A critical call, which a default retry's wait does not hold
		// back (reserve.go), takes the room it waited for.
		takeNorth(PriorityCritical)
		return nil
	})
	if err != nil || a.Region != "europe-west4" || slept == 0 || slept > MaxHeadroomWait {
		t.Fatalf("retry: %q %v after waiting %v; want europe-west4 again, within the budget, after one wait of at most %v", a.Region, err, slept, MaxHeadroomWait)
	}
}

// TestRefusedAttemptsDoNotCount: an attempt answered 429 (a quota or a PT
// full) does not count toward maxAttempts, as gRPC's transparent retries do
// not: Google refused it before the model ran. A call whose attempts were
// refused so goes on to a capacity it has not tried, at most once to each,
// and never back past maxAttempts; attempts that failed count as before.
func TestRefusedAttemptsDoNotCount(t *testing.T) {
	regions := []string{"europe-west4", "europe-north1", "europe-west1"}
	for _, tc := range []struct {
		name        string
		maxAttempts int
		outcomes    []Outcome // how each attempt ends
		want        int       // attempts the call makes
	}{
		{"two 429s", 2, []Outcome{Capacity, Capacity, Success}, 3},
		{"three 429s, no capacity left", 2, []Outcome{Capacity, Capacity, Capacity}, 3},
		{"a failure then a 429", 2, []Outcome{Failure, Capacity, Success}, 3},
		{"a 429 then a failure", 2, []Outcome{Capacity, Failure, Success}, 3},
		{"a 429 then two failures", 2, []Outcome{Capacity, Failure, Failure}, 3},
		{"two failures", 2, []Outcome{Failure, Failure}, 2},
		{"one attempt, a 429", 1, []Outcome{Capacity, Success}, 2},
		{"one attempt, a failure", 1, []Outcome{Failure}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tp := pool(shared(regions[0], 0), shared(regions[1], 0), shared(regions[2], 0))
			tp.Policy.Retry.MaxAttempts = tc.maxAttempts
			p := mustNew(t, tp, clk)
			c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
			tried := map[string]bool{}
			n := 0
			var err error
			for {
				var a Attempt
				if a, err = c.Pick(); err != nil {
					break
				}
				if tried[a.Region] {
					t.Fatalf("attempt %d went back to %s, tried before", n+1, a.Region)
				}
				tried[a.Region] = true
				if n == len(tc.outcomes) {
					t.Fatalf("attempt %d picked (%s); want %d attempts", n+1, a.Region, tc.want)
				}
				a.Done(tc.outcomes[n])
				n++
				if tc.outcomes[n-1] == Success {
					break
				}
			}
			if n != tc.want {
				t.Fatalf("%d attempts, want %d", n, tc.want)
			}
			if tc.outcomes[n-1] != Success && !errors.Is(err, ErrAttemptsExhausted) {
				t.Fatalf("after %d attempts: %v, want %v", n, err, ErrAttemptsExhausted)
			}
		})
	}
}

// TestRefusalStormIsBoundedByTheThrottle: with 429s out of maxAttempts
// (TestRefusedAttemptsDoNotCount), what bounds a storm of them is each
// capacity's throttle and the one attempt a call may make to each. Five
// regions with no hint (no meter to foresee the refusals) answer every call
// 429, as when Google's shared pool has no room anywhere: a call makes at
// most one attempt per region outside the retry budget, and once the throttles have
// minRequests answers (10 calls a second over five regions and more), the
// calls make fewer attempts than calls, as before 429s stopped counting. At 2
// calls a second the throttles never judge, and each call asks all five
// regions once: 10 refused attempts a second, where it made 2 when 429s
// counted.
func TestRefusalStormIsBoundedByTheThrottle(t *testing.T) {
	for _, tc := range []struct {
		rps    int
		atMost float64 // attempts per call over the storm's second half
	}{{2, 5}, {10, 1.2}, {100, 0.3}, {1000, 0.1}} {
		clk := newClock()
		p := mustNew(t, pool(shared("europe-west1", 0), shared("europe-west2", 0), shared("europe-west3", 0),
			shared("europe-west4", 0), shared("europe-north1", 0)), clk)
		var attempts, calls int
		simulate(p, clk, tc.rps, time.Minute, func(string, time.Time) Outcome { return Capacity }, func(el time.Duration, tried []string) {
			if el > 30*time.Second {
				attempts += len(tried)
				calls++
			}
		})
		if got := float64(attempts) / float64(calls); got > tc.atMost {
			t.Errorf("%d calls/s, every region answering 429: %.3f attempts per call, want at most %v", tc.rps, got, tc.atMost)
		}
	}
}

// TestSpilloverPTRefusalTriesTheWholeRegion: the converse of a quota's 429
// leaving its region's other capacities untried (callState.hasTried). A PT
// called in spillover mode that answers 429 says that the PT and its
// location's pay-as-you-go, where Google spilled the call, are both full:
// the call's spill goes elsewhere, never to that region's overflow, the
// same pay-as-you-go under another name. With no retry budget and the
// other region's quota taken, the spill has nowhere to go.
func TestSpilloverPTRefusalTriesTheWholeRegion(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west4", table.Capacity{RequestsPerSecond: 50}), shared("europe-west1", 1))
	tp.Policy.Retry.BudgetPercent, tp.Policy.Retry.MinRetriesPerSecond = new(0), new(0)
	p := mustNew(t, tp, clk)
	// europe-west1's one call a second, taken by a call held to it.
	held := p.Start(Request{Region: "europe-west1"})
	w, err := held.Pick()
	if err != nil || w.Region != "europe-west1" {
		t.Fatalf("held to europe-west1: %+v, %v", w, err)
	}
	w.Done(Success)
	c := p.Start(Request{})
	a, err := c.Pick()
	if err != nil || a.Region != "europe-west4" || a.Tier != table.TierProvisioned {
		t.Fatalf("first attempt %+v, %v: want europe-west4's PT", a, err)
	}
	a.Done(Capacity)
	if b, err := c.Pick(); err == nil && b.Region == "europe-west4" {
		t.Errorf("after the spillover PT's 429 the call went back to its region: %+v", b)
	}
}
