package share

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestControllerGrowsAfterThePTWindow: a pool with a 2-GSU PT, which Google
// counts over 40 s or more, grows into a lost router's share of the PT only
// once what that router admitted has left the PT's 40 s window, not after
// the grow delay of a one-second window, while its pay-as-you-go region,
// counted over one second, grows after the grow delay; both still shrink at
// once.
func TestControllerGrowsAfterThePTWindow(t *testing.T) {
	var n counter
	n.n.Store(2)
	var a applied
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Options{Apply: a.apply, Replicas: &n, Now: func() time.Time { return now }, GrowDelay: time.Second, Interval: 250 * time.Millisecond})
	tp := testPool()
	tp.Regions[0].Capacity.GSUs = 2
	tp.Policy.Provisioned.Window = table.Duration{} // the window of its size
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{tp}}); err != nil {
		t.Fatal(err)
	}
	pt := func() float64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return capacityOf(a.last.Pools[0], "europe-west1").TokensPerSecond
	}
	step := func(d time.Duration) {
		now = now.Add(d)
		_ = c.refresh(now)
	}
	if got := pt(); got != 7500 {
		t.Fatalf("2 replicas: the PT metered at %v tokens/s, want 7500 of 15000", got)
	}
	n.n.Store(1) // the other router is lost: seen at the next recompute
	step(time.Second)
	if got := a.rps(); got != 3 {
		t.Fatalf("the target for 1 s: europe-west4 metered at %v, want still 3 (the grow delay is 1 s, plus an interval)", got)
	}
	step(time.Second)
	if got := a.rps(); got != 6 {
		t.Fatalf("the target for 2 s: europe-west4 metered at %v, want 6: its window is one second, whatever the PT's", got)
	}
	for range 39 {
		step(time.Second)
	}
	if got := pt(); got != 7500 {
		t.Fatalf("the target for 40 s: the PT metered at %v, want still 7500 (its window is 40 s, plus an interval)", got)
	}
	step(time.Second)
	if got := pt(); got != 15000 {
		t.Fatalf("the target for 41 s: the PT metered at %v, want 15000", got)
	}
	n.n.Store(3)
	step(10 * time.Millisecond)
	if got, w4 := pt(), a.rps(); got != 5000 || w4 != 2 {
		t.Fatalf("3 replicas: the PT metered at %v and europe-west4 at %v, want 5000 and 2 at once", got, w4)
	}
}
