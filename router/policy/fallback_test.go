package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestFallbackRetryOfReservedCapacity spends the whole retry budget and then
// checks which retries are still allowed: a failure on a provisioned region
// that answers most of its calls falls back to another region; a failure on a
// shared region, a 429 on the provisioned one, and a failure on a provisioned
// region failing at the ejection threshold (demoted: its first attempts are
// then probes) all stay bound by the budget.
func TestFallbackRetryOfReservedCapacity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     int     // region index of the first attempt's failure: 0 provisioned, 1 shared
		outcome   Outcome // how the first attempt ended
		history   float64 // the first region's failure share over the interval so far
		wantRetry bool
	}{
		{"provisioned failing 8%", 0, Failure, 0.08, true},
		{"provisioned failing 60%", 0, Failure, 0.6, false},
		{"provisioned answering 429", 0, Capacity, 0.08, false},
		{"shared failing 8%", 1, Failure, 0.08, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tp := pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 0), shared("europe-north1", 0))
			tp.Policy.Retry = table.Retry{MaxAttempts: 2, BudgetPercent: new(0), MinRetriesPerSecond: new(0)}
			tp.Regions[1].Ejectable, tp.Regions[2].Ejectable = false, false
			first := tc.first
			if first == 1 {
				// Without a provisioned region, first attempts go to shared ones.
				tp.Regions, first = tp.Regions[1:], 0
			}
			p := mustNew(t, tp, clk)
			// The region's recent history: 100 answers, the given share
			// failed, the failures last.
			failed := int(tc.history * 100)
			report(p, first, Success, 100-failed)
			report(p, first, Failure, failed)

			// A call whose first attempt lands on the region under test.
			var c Call
			var a Attempt
			for range 50 {
				c = p.Start(Request{})
				var err error
				if a, err = c.Pick(); err != nil {
					t.Fatal(err)
				}
				if a.Region == tp.Regions[first].Name {
					break
				}
				a.Done(Success)
				clk.Advance(100 * time.Millisecond) // a demoted region gets only probes
			}
			if a.Region != tp.Regions[first].Name {
				t.Fatalf("no first attempt reached %s", tp.Regions[first].Name)
			}
			a.Done(tc.outcome)
			retry, err := c.Pick()
			switch {
			case tc.wantRetry && err != nil:
				t.Fatalf("retry refused: %v; want a fallback to another region", err)
			case tc.wantRetry && retry.Region == a.Region:
				t.Fatalf("retry went back to %s; want another region", retry.Region)
			case !tc.wantRetry && !errors.Is(err, ErrBudgetExhausted):
				t.Fatalf("retry: region %q, err %v; want ErrBudgetExhausted", retry.Region, err)
			}
			if err == nil {
				retry.Done(Success)
			}
		})
	}
}
