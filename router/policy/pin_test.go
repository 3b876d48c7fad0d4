package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestPinnedCallUsesItsRegionAlone: a call pinned to a shared region of two
// calls a second goes there, its retry too, and is refused when the region
// has no room, though the provisioned region that takes first attempts has
// plenty. Pin moves an unsent first attempt there and gives back what it
// took: its place in flight and its count in the retry budget.
func TestPinnedCallUsesItsRegionAlone(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 2)), clk)

	pinned := p.Start(Request{Region: "europe-west4"})
	a, err := pinned.Pick()
	if err != nil || a.Region != "europe-west4" {
		t.Fatalf("a pinned call went to %q (%v), want europe-west4", a.Region, err)
	}
	a.Done(Failure)
	if a, err := pinned.Pick(); err != nil || a.Region != "europe-west4" {
		t.Fatalf("its retry went to %q (%v), want europe-west4 again", a.Region, err)
	} else {
		a.Done(Success)
	}

	clk.Advance(2 * time.Second) // the shared region's meter forgets the two calls
	c, first := pick(t, p, PriorityDefault)
	if first.Region != "europe-west1" {
		t.Fatalf("an unpinned call went to %s, want the provisioned region", first.Region)
	}
	moved, err := c.Pin(first, "europe-west4")
	if err != nil || moved.Region != "europe-west4" {
		t.Fatalf("Pin moved the first attempt to %q (%v), want europe-west4", moved.Region, err)
	}
	snap := p.Snapshot()
	if snap.Regions[0].InFlight != 0 || snap.Regions[1].InFlight != 1 {
		t.Errorf("in flight after Pin: provisioned %d, shared %d; want 0 and 1", snap.Regions[0].InFlight, snap.Regions[1].InFlight)
	}
	if snap.RetryBudget.Requests != 2 {
		t.Errorf("the retry budget counts %d first attempts, want 2 (the pinned call's and the moved one's, once)", snap.RetryBudget.Requests)
	}

	second := p.Start(Request{Region: "europe-west4"})
	if _, err := second.Pick(); err != nil {
		t.Fatalf("the second pinned call of the second: %v", err)
	}
	full := p.Start(Request{Region: "europe-west4"})
	_, err = full.Pick()
	var ce *CapacityError
	if !errors.As(err, &ce) {
		t.Errorf("a pinned call to a full region: %v, want a capacity refusal, not another region", err)
	}
}
