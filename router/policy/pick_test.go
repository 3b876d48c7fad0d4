package policy

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestTiers sends 100 calls per second for 20 s to a provisioned region of 50
// requests per second and shared regions hinted 30 and 10: the provisioned
// region takes its capacity, the overflow splits 3:1 over the shared regions,
// no region gets more than its capacity in any second (so over 20 s at most
// 21 s of it: the windows at both ends), and the rest is refused as over
// capacity. The PT is called dedicated: in spillover mode its location's
// pay-as-you-go would take the rest (TestOverflowTakesWhatNoOtherCapacityCan).
func TestTiers(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west4", table.Capacity{RequestsPerSecond: 50}), shared("europe-west1", 30), shared("europe-west2", 10))
	tp.Policy.Provisioned.RequestType = table.RequestTypeDedicated
	p := mustNew(t, tp, clk)
	const secs = 20
	s := simulate(p, clk, 100, secs*time.Second, func(string, time.Time) Outcome { return Success }, nil)
	t.Logf("calls in %d s: %v, refused %d", secs, s.byRegion, s.errs[ErrOverCapacity.Error()])
	for _, tc := range []struct {
		region string
		rps    int
	}{{"europe-west4", 50}, {"europe-west1", 30}, {"europe-west2", 10}} {
		if got, hi := s.byRegion[tc.region], (secs+1)*tc.rps+1; got > hi || got < secs*tc.rps*9/10 {
			t.Errorf("%s took %d calls in %d s, want about %d and at most %d", tc.region, got, secs, secs*tc.rps, hi)
		}
	}
	if got, want := s.errs[ErrOverCapacity.Error()], s.requests-(secs+1)*90-3; got < want {
		t.Errorf("%d calls refused over capacity, want at least %d", got, want)
	}
}

// TestAttemptTier checks that an attempt names its region's endpoint and
// tier, from which its caller derives the request-type header.
func TestAttemptTier(t *testing.T) {
	for _, rt := range []table.RequestType{table.RequestTypeSpillover, table.RequestTypeDedicated} {
		tp := pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0))
		tp.Policy.Provisioned.RequestType = rt
		tp.Policy.Retry.BudgetPercent = new(100)
		p := mustNew(t, tp, newClock())
		c, a := pick(t, p, PriorityDefault)
		if a.Region != "europe-west4" || a.Tier != table.TierProvisioned || a.Endpoint != "europe-west4-aiplatform.googleapis.com:443" {
			t.Errorf("%s: first attempt %+v, want europe-west4, provisioned, at its default endpoint", rt, a)
		}
		a.Done(Capacity)
		b, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if b.Region != "europe-west1" || b.Tier != table.TierShared || b.Number() != 2 {
			t.Errorf("%s: retry %+v, want europe-west1, shared, attempt 2", rt, b)
		}
	}
}

// TestRetryRules checks when a call may retry and where.
func TestRetryRules(t *testing.T) {
	regions := []table.Region{shared("europe-west1", 0), shared("europe-west2", 0), shared("europe-west3", 0)}
	for _, tc := range []struct {
		name     string
		outcomes []Outcome
		wantErr  error
	}{
		{"caller fault is final", []Outcome{CallerFault}, ErrNotRetryable},
		{"cancelled is final", []Outcome{Cancelled}, ErrNotRetryable},
		{"success is final", []Outcome{Success}, ErrNotRetryable},
		{"failures up to maxAttempts", []Outcome{Failure, Capacity, Failure}, ErrAttemptsExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := pool(regions...)
			tp.Policy.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(100), MinRetriesPerSecond: new(10)}
			p := mustNew(t, tp, newClock())
			c := p.Start(Request{})
			seen := map[string]bool{}
			for _, o := range tc.outcomes {
				a, err := c.Pick()
				if err != nil {
					t.Fatal(err)
				}
				if seen[a.Region] {
					t.Errorf("retried %s while an untried region was free", a.Region)
				}
				seen[a.Region] = true
				a.Done(o)
				a.Done(Success) // a second report is ignored
			}
			if _, err := c.Pick(); !errors.Is(err, tc.wantErr) {
				t.Errorf("Pick after %v = %v, want %v", tc.outcomes, err, tc.wantErr)
			}
			if n := p.Snapshot().InFlight; n != 0 {
				t.Errorf("%d in flight after every attempt ended", n)
			}
		})
	}
}

// TestDeadline checks that no attempt starts past the call's deadline, and that
// the error matches context.DeadlineExceeded.
func TestDeadline(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0), shared("europe-west2", 0)), clk)
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Second))
	defer cancel()
	c := p.Start(NewRequest(ctx, PriorityCritical))
	a, err := c.Pick()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	a.Done(Failure)
	_, err = c.Pick()
	if !errors.Is(err, ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("retry past the deadline: %v, want ErrDeadlineExceeded", err)
	}
}

// TestTokenCapacity checks that a provisioned region with only a token limit
// takes calls while the tokens reported fit in its second, then spills: calls
// are charged their expected tokens when they start, so the region does not
// take more than its capacity even before any of them ends.
func TestTokenCapacity(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{TokensPerSecond: 1000}), shared("europe-west1", 0)), clk)
	var byRegion = map[string]int{}
	for range 100 {
		_, a := pick(t, p, PriorityDefault)
		byRegion[a.Region]++
		a.DoneTokens(Success, 100)
		clk.Advance(50 * time.Millisecond)
	}
	// 5 s at 1000 tokens/s: 10 calls of 100 tokens a second, about 50.
	if got := byRegion["europe-west4"]; math.Abs(float64(got)-50) > 2 {
		t.Errorf("provisioned region took %d calls of 100 tokens in 5 s at 1000 tokens/s, want about 50 (%v)", got, byRegion)
	}

	// Calls that have not ended yet count at the region's average: 20 calls
	// start in the same instant, and only 10 (1000 tokens) go to the region.
	clk.Advance(2 * time.Second)
	var open []Attempt
	byRegion = map[string]int{}
	for range 20 {
		_, a := pick(t, p, PriorityDefault)
		byRegion[a.Region]++
		open = append(open, a)
	}
	if got := byRegion["europe-west4"]; got != 10 {
		t.Errorf("20 calls starting at once: provisioned region took %d, want 10 of 100 tokens at 1000 tokens/s (%v)", got, byRegion)
	}
	// A call that fails consumed nothing: its charge is refunded, and the
	// region has room for one more (the next call goes to the shared
	// region all the same: the PT's window filled, and it took its rate
	// over the last tenth of it: pace.go).
	for i := range open {
		if open[i].Region == "europe-west4" {
			open[i].Done(Failure)
			break
		}
	}
	if used := p.Snapshot().Regions[0].ProvisionedWindowUsed; math.Abs(used-0.9) > 0.01 {
		t.Errorf("after a refund the PT's window is %.3f used, want 0.9", used)
	}
	// A call the region held until a deadline ran out (its own 504, or the
	// call's) was let into the PT: its charge stays, as Google's does.
	var pt []*Attempt
	for i := range open {
		if open[i].Region == "europe-west4" {
			pt = append(pt, &open[i])
		}
	}
	pt[1].Finish(Report{Outcome: Failure, Timeout: true})
	if used := p.Snapshot().Regions[0].ProvisionedWindowUsed; math.Abs(used-0.9) > 0.01 {
		t.Errorf("after a timeout the PT's window is %.3f used, want 0.9 (no refund)", used)
	}
}

// TestOverCapacityRetryAfter checks the Retry-After of a refusal: when the only
// region is over its hint, it says when the hint has room again.
func TestOverCapacityRetryAfter(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0.25)), clk)
	once(t, p, Success)
	c := p.Start(Request{})
	_, err := c.Pick()
	d, ok := RetryAfter(err)
	if !errors.Is(err, ErrOverCapacity) || !ok || d != 4*time.Second {
		t.Errorf("second call at 0.25/s: %v (Retry-After %v), want over capacity, Retry-After 4s", err, d)
	}
}

// TestTokenEstimate checks the average of tokens per call: seeded by the
// first call, then moved an eighth of the way toward each call.
func TestTokenEstimate(t *testing.T) {
	var r region
	for _, tc := range []struct{ tokens, want int64 }{{800, 800}, {0, 700}, {1500, 800}, {800, 800}} {
		r.learnTokens(tc.tokens)
		if got := r.tokEst.Load(); got != tc.want {
			t.Errorf("after a call of %d tokens: average %d, want %d", tc.tokens, got, tc.want)
		}
	}
}

// TestFullMeterSkippedForOneTick: once a region's meter refuses, picks in the
// same 25 ms tick leave it out, and the first pick of the next tick finds the
// room that tick freed: two calls at a 2/s quota at the start of a bucket
// leave the window when the first quarter of the bucket one second later
// ends (1.025 s), not when that bucket does (1.1 s).
func TestFullMeterSkippedForOneTick(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	p := mustNew(t, pool(shared("europe-west1", 2)), clk)
	once(t, p, Success)
	once(t, p, Success)
	for _, at := range []time.Duration{500 * time.Millisecond, 1010 * time.Millisecond, 1020 * time.Millisecond} {
		clk.Advance(start.Add(at).Sub(clk.Now()))
		c := p.Start(Request{})
		_, err := c.Pick()
		if d, _ := RetryAfter(err); !errors.Is(err, ErrOverCapacity) || d != time.Second {
			t.Fatalf("%v after two calls at 2/s: %v, want over capacity, Retry-After 1s", at, err)
		}
	}
	clk.Advance(5 * time.Millisecond)
	if r := once(t, p, Success); r != "europe-west1" {
		t.Fatalf("1.025 s after two calls at 2/s: %s", r)
	}
}

// TestPickWaitingWaitsForHeadroom: a first attempt refused because the only
// region's quota is full waits until the quota has room, when that is soon
// and leaves time before the deadline, and is refused at once otherwise; the
// pool lets no more calls wait than its in-flight cap.
func TestPickWaitingWaitsForHeadroom(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	tp := pool(shared("europe-west1", 2))
	tp.Policy.Concurrency.MaxInFlight = 1
	p := mustNew(t, tp, clk)
	once(t, p, Success)
	once(t, p, Success)
	clk.Advance(500 * time.Millisecond)

	// Deadline 0.9 s away: a wait of 0.525 s would leave less than that.
	c := p.Start(Request{Deadline: clk.Now().Add(900 * time.Millisecond)})
	slept := time.Duration(0)
	sleep := func(_ context.Context, d time.Duration) error { slept += d; clk.Advance(d); return nil }
	if _, err := c.PickWaiting(context.Background(), sleep); !errors.Is(err, ErrOverCapacity) || slept != 0 {
		t.Fatalf("deadline 0.9 s away: %v after sleeping %v; want over capacity at once", err, slept)
	}

	// The two calls leave the window at 1.025 s (the end of the quarter of
	// their bucket): a call at 0.5 s with a 10 s deadline waits 0.525 s.
	// While it waits, the pool's one waiting place is taken: another call
	// is refused at once.
	var other error
	sleep = func(_ context.Context, d time.Duration) error {
		slept += d
		o := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
		_, other = o.PickWaiting(context.Background(), func(context.Context, time.Duration) error {
			t.Error("a second call waited beside the first, over the in-flight cap of 1")
			return nil
		})
		clk.Advance(d)
		return nil
	}
	c = p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
	a, err := c.PickWaiting(context.Background(), sleep)
	if err != nil || slept != 525*time.Millisecond || clk.Now().Sub(start) != 1025*time.Millisecond {
		t.Fatalf("deadline 10 s away: %v after sleeping %v, at %v; want an attempt after 0.525 s, at 1.025 s", err, slept, clk.Now().Sub(start))
	}
	a.Done(Success)
	if !errors.Is(other, ErrOverCapacity) {
		t.Errorf("the call that found no waiting place: %v, want over capacity", other)
	}

	// A sleep cut short (the caller gone) returns the refusal.
	once(t, p, Success) // the quota is full again
	c = p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
	if _, err := c.PickWaiting(context.Background(), func(context.Context, time.Duration) error { return context.Canceled }); !errors.Is(err, ErrOverCapacity) {
		t.Errorf("sleep cancelled: %v, want over capacity", err)
	}
}

// TestRetryWaitsForHeadroom: a retry after a failed attempt that finds the
// quota full waits for it to have room too, rather than lose the call.
func TestRetryWaitsForHeadroom(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	p := mustNew(t, pool(shared("europe-west1", 2)), clk)
	c := p.Start(Request{Deadline: clk.Now().Add(10 * time.Second)})
	a, err := c.Pick()
	if err != nil {
		t.Fatal(err)
	}
	once(t, p, Success) // the quota is full
	clk.Advance(500 * time.Millisecond)
	a.Done(Failure)
	sleep := func(_ context.Context, d time.Duration) error { clk.Advance(d); return nil }
	if _, err := c.PickWaiting(context.Background(), sleep); err != nil || clk.Now().Sub(start) != 1025*time.Millisecond {
		t.Fatalf("retry at 0.5 s of a full 2/s quota: %v at %v; want an attempt at 1.025 s", err, clk.Now().Sub(start))
	}
}

// TestKnownFullIsForItsCost: a region known full for the rest of a tick is
// known full only for calls that cost as much as the one it refused: a table
// that raises its quota within the tick (a larger share as a peer router
// leaves, say) gets the new room at once.
//
// At 2.5 calls a second two calls hold 80% of the second and a third does
// not fit; at 5 a second a call costs 20% of it, and fits.
func TestKnownFullIsForItsCost(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 2.5))
	p := mustNew(t, tp, clk)
	once(t, p, Success)
	once(t, p, Success)
	clk.Advance(500 * time.Millisecond)
	c := p.Start(Request{})
	if _, err := c.Pick(); !errors.Is(err, ErrOverCapacity) {
		t.Fatalf("third call at 2.5/s: %v, want over capacity", err)
	}
	tp.Regions[0].Capacity.RequestsPerSecond = 5
	if err := p.Update(tp); err != nil {
		t.Fatal(err)
	}
	if r := once(t, p, Success); r != "europe-west1" {
		t.Fatalf("in the same tick, after the quota went to 5/s: %s", r)
	}
}

// TestOverflowTakesWhatNoOtherCapacityCan: a PT called in spillover mode,
// whose region lists no pay-as-you-go tiers, overflows into its location's
// standard pay-as-you-go (where Google would spill it) only once its PT and
// every other capacity are full: at 100 calls a second against 50 + 30 + 10
// of hinted capacity, the PT, europe-west1 and europe-west2 take theirs and
// the location's pay-as-you-go the remaining ten a second, none refused.
// That lane has no hint: its 429s throttle it, and never the PT, and in a
// surge it is sent about twice what it accepts, however many calls come.
func TestOverflowTakesWhatNoOtherCapacityCan(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{RequestsPerSecond: 50}), shared("europe-west1", 30), shared("europe-west2", 10)), clk)
	run := func(secs int, overflow func() Outcome) map[string]int {
		got := map[string]int{}
		for range secs * 100 {
			c := p.Start(Request{})
			a, err := c.Pick()
			switch {
			case err != nil:
				got[errName(err)]++
			case a.Region == "europe-west4" && a.Tier == table.TierShared:
				if a.PayGo != table.PayGoStandard {
					t.Fatalf("overflow attempt %+v, want standard pay-as-you-go", a)
				}
				got["overflow"]++
				a.Done(overflow())
			default:
				got[a.Region]++
				a.Done(Success)
			}
			clk.Advance(10 * time.Millisecond)
		}
		return got
	}
	const secs = 20
	always := func(o Outcome) func() Outcome { return func() Outcome { return o } }
	got := run(secs, always(Success))
	t.Logf("%d s at 100/s: %v", secs, got)
	for region, rps := range map[string]int{"europe-west4": 50, "europe-west1": 30, "europe-west2": 10} {
		if n := got[region]; n < secs*rps*9/10 || n > (secs+1)*rps+1 {
			t.Errorf("%s took %d calls in %d s, want about %d", region, n, secs, secs*rps)
		}
	}
	// The shared regions' one-second windows leave a little unused at
	// times: the overflow takes that too.
	if n := got["overflow"]; n < secs*10*9/10 || n > secs*10*3/2 {
		t.Errorf("the overflow took %d calls in %d s, want about %d", n, secs, secs*10)
	}
	if n := got[errName(ErrOverCapacity)]; n > 0 {
		t.Errorf("%d calls refused while the location's pay-as-you-go took every one it was sent", n)
	}
	// The location's pay-as-you-go answers 429: its throttle turns the
	// overflow away (refused here), and the PT keeps its share.
	run(10, always(Capacity)) // its successes leave the throttle's window
	got = run(secs, always(Capacity))
	t.Logf("%d s at 100/s, the overflow refused: %v", secs, got)
	if n := got["overflow"]; n > secs*10/4 {
		t.Errorf("the overflow took %d calls in %d s while it answered only 429s", n, secs)
	}
	if n := got["europe-west4"]; n < secs*50*9/10 {
		t.Errorf("the PT took %d calls in %d s, want about %d: the overflow's 429s are not the PT's", n, secs, secs*50)
	}
	// A surge: 80 calls a second have no room but in the overflow, which
	// accepts one a second. It is sent about twice that (throttleK), not
	// the share of the surge a throttle that forgot its refusals would let
	// through.
	p = mustNew(t, pool(provisioned("europe-west4", table.Capacity{RequestsPerSecond: 10}), shared("europe-west1", 5), shared("europe-west2", 5)), clk)
	var accepted, sec int
	oneASecond := func() Outcome {
		if s := int(p.nanos() / int64(time.Second)); s != sec {
			sec, accepted = s, 0
		}
		if accepted++; accepted <= 1 {
			return Success
		}
		return Capacity
	}
	run(10, oneASecond)
	got = run(secs, oneASecond)
	t.Logf("%d s at 100/s, the overflow accepting one a second: %v", secs, got)
	if n := got["overflow"]; n > secs*3 {
		t.Errorf("the overflow took %d calls in %d s, accepting one a second", n, secs)
	}
}

// TestNoOverflowFromADemotedPT: the overflow is for a PT that answers. A
// PT demoted for its failures, in an overload (the other region full every
// second), takes what nobody else has room for in its PT alone, within the
// share it answers: its location's pay-as-you-go, which fails with it, is
// sent nothing.
func TestNoOverflowFromADemotedPT(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{RequestsPerSecond: 50}), shared("europe-west1", 10)), clk)
	report(p, 0, Success, 50)
	report(p, 0, Failure, 50)
	if regionOf(t, p, "europe-west4").Demotion == nil {
		t.Fatal("not demoted at half its calls failing")
	}
	// The region goes on failing every other call, so it stays demoted.
	got, fail := map[string]int{}, false
	for range 500 {
		clk.Advance(10 * time.Millisecond)
		c := p.Start(Request{})
		a, err := c.Pick()
		o := Success
		switch {
		case err != nil:
			got[errName(err)]++
			continue
		case a.Region == "europe-west4":
			got[string(a.Tier)]++
			if fail = !fail; fail {
				o = Failure
			}
		default:
			got[a.Region]++
		}
		a.Done(o)
	}
	if regionOf(t, p, "europe-west4").Demotion == nil {
		t.Fatal("restored while it fails half its calls")
	}
	t.Logf("5 s at 100/s: %v", got)
	if got[string(table.TierShared)] != 0 {
		t.Errorf("the demoted PT's overflow took %d calls", got[string(table.TierShared)])
	}
	if got[string(table.TierProvisioned)] == 0 {
		t.Errorf("the demoted PT took nothing of what europe-west1 had no room for: %v", got)
	}
}
