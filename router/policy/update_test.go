package policy

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestUpdateKeepsLiveState reloads a table and checks that regions still
// present keep their counters, ejection, throttle and limit; a region that
// became provisioned is un-ejected at once; a new region starts fresh; an
// invalid pool changes nothing.
func TestUpdateKeepsLiveState(t *testing.T) {
	clk := newClock()
	tp := ejectPool(50)
	p := mustNew(t, tp, clk)
	report(p, 0, Failure, 10)  // europe-west1 ejected
	report(p, 1, Failure, 10)  // europe-west2 ejected
	report(p, 2, Capacity, 50) // europe-west3 throttled, limit shrunk
	report(p, 3, Success, 3)
	before := p.Snapshot()
	if !before.Regions[0].Ejected || !before.Regions[1].Ejected {
		t.Fatalf("setup: %+v", before.Regions)
	}

	next := tp
	next.Regions = append([]table.Region(nil), tp.Regions...)
	next.Regions[1].Tier, next.Regions[1].Ejectable = table.TierProvisioned, false // europe-west2
	next.Regions = append(next.Regions, shared("us-central1", 0))
	if err := p.Update(next); err != nil {
		t.Fatal(err)
	}
	after := map[string]RegionSnapshot{}
	for _, rs := range p.Snapshot().Regions {
		after[rs.Name] = rs
	}
	if rs := after["europe-west1"]; !rs.Ejected || rs.EjectedUntil != before.Regions[0].EjectedUntil || rs.TimesEjected != 1 {
		t.Errorf("europe-west1 lost its ejection: %+v", rs)
	}
	if rs := after["europe-west2"]; rs.Ejected || rs.Tier != table.TierProvisioned || rs.TimesEjected != 1 {
		t.Errorf("europe-west2 became provisioned but is %+v, want un-ejected", rs)
	}
	if rs := after["europe-west3"]; rs.ThrottleProbability != before.Regions[2].ThrottleProbability || rs.Limit != before.Regions[2].Limit {
		t.Errorf("europe-west3 lost its throttle or limit: %+v, before %+v", rs, before.Regions[2])
	}
	if rs := after["europe-west4"]; rs.Answered != 3 {
		t.Errorf("europe-west4 lost its counts: %+v", rs)
	}
	if rs := after["us-central1"]; rs.Answered != 0 || rs.Limit != table.DefaultRegionInitialLimit {
		t.Errorf("new region us-central1 does not start fresh: %+v", rs)
	}

	bad := next
	bad.Regions = nil
	if err := p.Update(bad); err == nil {
		t.Errorf("Update accepted a pool with no regions")
	}
	if got := len(p.Snapshot().Regions); got != 5 {
		t.Errorf("a refused update changed the pool: %d regions, want 5", got)
	}
}

// TestUpdateCapsEjections removes regions so that the ejected share would
// exceed maxEjectedPercent, and checks ejections are lifted to fit.
func TestUpdateCapsEjections(t *testing.T) {
	clk := newClock()
	tp := ejectPool(50)
	p := mustNew(t, tp, clk)
	report(p, 0, Failure, 10)
	clk.Advance(time.Second)
	report(p, 1, Failure, 10)
	next := tp
	next.Regions = append([]table.Region(nil), tp.Regions[:3]...)
	if err := p.Update(next); err != nil {
		t.Fatal(err)
	}
	snap := p.Snapshot()
	if !snap.Regions[1].Ejected || snap.Regions[0].Ejected {
		t.Errorf("after dropping to 3 regions at 50%%: %+v; want only the later ejection kept", snap.Regions)
	}
}

// TestAttemptAcrossUpdate reports an attempt on a region that an update has
// removed: the pool's in-flight count still returns to zero.
func TestAttemptAcrossUpdate(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0)), clk)
	c := p.Start(Request{})
	a, err := c.Pick()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Update(pool(shared("europe-west2", 0))); err != nil {
		t.Fatal(err)
	}
	a.Done(Failure)
	if snap := p.Snapshot(); snap.InFlight != 0 || snap.Regions[0].Name != "europe-west2" {
		t.Errorf("after the update: %+v", snap)
	}
}
