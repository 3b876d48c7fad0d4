package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestBlocklistRemoves checks the baseline's rule: 6 failures (429s included)
// within 60 s remove a region for 60 s; 5, or 6 spread wider, do not.
func TestBlocklistRemoves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		spacing time.Duration
		o       Outcome
		want    bool
	}{
		{"five failures", 5, time.Second, Failure, false},
		{"six failures in 50 s", 6, 10 * time.Second, Failure, true},
		{"six 429s", 6, time.Second, Capacity, true},
		{"six failures over 72 s", 6, 12*time.Second + time.Second/2, Failure, false},
		{"caller faults", 20, time.Second, CallerFault, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			b, err := NewBlocklist(pool(shared("europe-west1", 0), shared("europe-west2", 0)), Options{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			for range tc.n {
				b.st.Load().slots[0].r.done(Report{Outcome: tc.o})
				clk.Advance(tc.spacing)
			}
			if got := b.Snapshot().Regions[0].Ejected; got != tc.want {
				t.Errorf("removed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBlocklistNoRegions checks the outage's end state: every region removed,
// every call fails with "no regions to run"; with the allowlist the
// provisioned region is never removed.
func TestBlocklistNoRegions(t *testing.T) {
	tp := pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0))
	for _, tc := range []struct {
		name string
		new  func(table.Pool, Options) (*Blocklist, error)
		want error
	}{
		{"blocklist", NewBlocklist, ErrNoRegions},
		{"allowlist", NewAllowlist, nil},
	} {
		clk := newClock()
		b, err := tc.new(tp, Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		for range 12 {
			c := b.Start(Request{})
			if a, err := c.Pick(); err == nil {
				a.Done(Failure)
			}
		}
		c := b.Start(Request{})
		a, err := c.Pick()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Pick after 12 failures = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && a.Region != "europe-west4" {
			t.Errorf("%s: picked %s, want the provisioned region", tc.name, a.Region)
		}
		clk.Advance(blocklistDuration)
		if tc.want != nil {
			c := b.Start(Request{})
			if _, err := c.Pick(); err != nil {
				t.Errorf("%s: a minute later: %v, want the regions back", tc.name, err)
			}
		}
	}
}
