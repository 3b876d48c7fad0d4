package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// baselinePool is a provisioned region and a shared one.
func baselinePool() table.Pool {
	return table.Pool{Project: "proj", Publisher: "google", Model: "gemini-2.5-flash", Policy: table.DefaultPolicy(), Regions: []table.Region{
		{Name: "europe-west4", Tier: table.TierProvisioned},
		{Name: "europe-west1", Tier: table.TierShared, Ejectable: true},
	}}
}

// TestBlocklistRemoves checks the baseline's rule: 6 failures (429s included)
// within 60 s remove a region for 60 s; 5, or 6 spread wider, do not.
func TestBlocklistRemoves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		spacing time.Duration
		o       policy.Outcome
		want    bool
	}{
		{"five failures", 5, time.Second, policy.Failure, false},
		{"six failures in 50 s", 6, 10 * time.Second, policy.Failure, true},
		{"six 429s", 6, time.Second, policy.Capacity, true},
		{"six failures over 72 s", 6, 12*time.Second + time.Second/2, policy.Failure, false},
		{"caller faults", 20, time.Second, policy.CallerFault, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.At(epoch)
			b, err := newBlocklist(baselinePool(), clk.Now, false)
			if err != nil {
				t.Fatal(err)
			}
			r := b.regions[1]
			for range tc.n {
				r.done(tc.o)
				clk.Advance(tc.spacing)
			}
			if got := r.removed(clk.Now().Add(-tc.spacing).UnixNano()); got != tc.want {
				t.Errorf("removed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBlocklistNoRegions checks the outage's end state: every region removed,
// every call fails with "no regions to run"; with the allowlist the
// provisioned region is never removed.
func TestBlocklistNoRegions(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
		want error
	}{
		{"blocklist", false, ErrNoRegions},
		{"allowlist", true, nil},
	} {
		clk := clocktest.At(epoch)
		b, err := newBlocklist(baselinePool(), clk.Now, tc.keep)
		if err != nil {
			t.Fatal(err)
		}
		for range 12 {
			if a, err := b.Start(time.Time{}, table.PriorityDefault).Pick(); err == nil {
				a.Done(policy.Report{Outcome: policy.Failure})
			}
		}
		a, err := b.Start(time.Time{}, table.PriorityDefault).Pick()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Pick after 12 failures = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && (a.Region != "europe-west4" || a.Tier != table.TierProvisioned) {
			t.Errorf("%s: picked %s (%s), want the provisioned region", tc.name, a.Region, a.Tier)
		}
		clk.Advance(blocklistDuration)
		if tc.want != nil {
			if _, err := b.Start(time.Time{}, table.PriorityDefault).Pick(); err != nil {
				t.Errorf("%s: a minute later: %v, want the regions back", tc.name, err)
			}
		}
	}
}

// TestBlocklistRetries checks the baseline's retries: after a failure, to a
// region the call has not tried; none after a success; none past maxAttempts
// or the deadline.
func TestBlocklistRetries(t *testing.T) {
	clk := clocktest.At(epoch)
	b, err := newBlocklist(baselinePool(), clk.Now, false)
	if err != nil {
		t.Fatal(err)
	}
	c := b.Start(clk.Now().Add(time.Second), table.PriorityDefault)
	a, _ := c.Pick()
	a.Done(policy.Report{Outcome: policy.Failure})
	r, err := c.Pick()
	if err != nil || r.Region != "europe-west1" || c.Attempts() != 2 {
		t.Fatalf("retry = %s, %v after %d attempts; want europe-west1", r.Region, err, c.Attempts())
	}
	r.Done(policy.Report{Outcome: policy.Failure})
	if _, err := c.Pick(); !errors.Is(err, policy.ErrAttemptsExhausted) {
		t.Errorf("third attempt with maxAttempts 2: %v, want ErrAttemptsExhausted", err)
	}
	c = b.Start(clk.Now().Add(time.Second), table.PriorityDefault)
	a, _ = c.Pick()
	a.Done(policy.Report{Outcome: policy.Success})
	if _, err := c.Pick(); !errors.Is(err, policy.ErrNotRetryable) {
		t.Errorf("retry after a success: %v, want ErrNotRetryable", err)
	}
	c = b.Start(clk.Now().Add(time.Second), table.PriorityDefault)
	clk.Advance(time.Second)
	if _, err := c.Pick(); !errors.Is(err, policy.ErrDeadlineExceeded) {
		t.Errorf("pick past the deadline: %v, want ErrDeadlineExceeded", err)
	}
}
