package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestBudgetAllows checks the budget formula on known counts.
func TestBudgetAllows(t *testing.T) {
	now := int64(1_700_000_000) * int64(time.Second)
	for _, tc := range []struct {
		requests, retries  int
		percent, minPerSec int64
		want               bool
	}{
		{0, 0, 10, 0, false},
		{0, 9, 10, 1, true},
		{0, 10, 10, 1, false},
		{100, 19, 10, 1, true},
		{100, 20, 10, 1, false},
		{1000, 99, 10, 0, true},
		{1000, 100, 10, 0, false},
		{10, 10, 100, 0, false},
	} {
		b := NewBudget()
		for range tc.requests {
			b.request(now)
		}
		for range tc.retries {
			b.retry(now)
		}
		if got := b.allow(now, tc.percent, tc.minPerSec); got != tc.want {
			t.Errorf("%d requests, %d retries, %d%% + %d/s: allow = %v, want %v", tc.requests, tc.retries, tc.percent, tc.minPerSec, got, tc.want)
		}
	}
}

// TestBudgetShared checks that two pools given one budget spend it together.
func TestBudgetShared(t *testing.T) {
	clk := newClock()
	b := NewBudget()
	tp := pool(shared("europe-west1", 0), shared("europe-west2", 0))
	tp.Policy.Retry = table.Retry{MaxAttempts: 2, BudgetPercent: new(0), MinRetriesPerSecond: new(1)}
	var pools [2]*Pool
	for i := range pools {
		p, err := New(tp, Options{Now: clk.Now, Budget: b, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		pools[i] = p
	}
	retries := 0
	for i := range 40 {
		// Two calls that succeed for every one that fails, so that the
		// failures do not throttle the regions.
		once(t, pools[i%2], Success)
		once(t, pools[i%2], Success)
		a, err := retryAfter(t, pools[i%2], Failure)
		switch {
		case err == nil:
			retries++
			a.Done(Failure)
		case !errors.Is(err, ErrBudgetExhausted):
			t.Fatalf("retry: %v", err)
		}
	}
	if retries != 10 {
		t.Errorf("two pools sharing a budget of 1 retry/s made %d retries in one second, want 10 (the 10 s floor)", retries)
	}
}

// TestBudgetZeroValue checks that a Budget needs no constructor: its zero
// value counts and allows as NewBudget's does.
func TestBudgetZeroValue(t *testing.T) {
	now := int64(1_700_000_000) * int64(time.Second)
	var b Budget
	if !b.allow(now, 10, 1) {
		t.Fatal("an empty budget with a floor refuses a retry")
	}
	for range 10 {
		b.retry(now)
	}
	if b.allow(now, 10, 1) {
		t.Error("a zero-value budget allowed an eleventh retry over a floor of 10")
	}
	if s := b.snapshot(now); s.Retries != 10 || s.Requests != 0 {
		t.Errorf("snapshot %+v, want 10 retries", s)
	}
}
