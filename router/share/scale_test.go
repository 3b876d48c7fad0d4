package share

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

func testPool() table.Pool {
	p := table.Pool{Project: "p", Model: "m", Regions: []table.Region{
		{Name: "europe-west1", Tier: table.TierProvisioned, Capacity: table.Capacity{GSUs: 6, TokensPerSecond: 15000}},
		{Name: "europe-west4", Capacity: table.Capacity{RequestsPerSecond: 6}},
		{Name: "europe-north1"},
	}, Policy: table.DefaultPolicy()}
	// Its PT counted over one second, a larger share applies after the
	// controller's grow delay (TestControllerGrowsAfterThePTWindow has a
	// PT's own window).
	p.Policy.Provisioned.Window = table.Duration{Duration: time.Second}
	p.Default()
	return p
}

func TestScale(t *testing.T) {
	p := testPool()
	got := Scale(p, StaticPart(3))
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	pt, w4, n1 := capacityOf(got, "europe-west1"), capacityOf(got, "europe-west4"), capacityOf(got, "europe-north1")
	if pt.TokensPerSecond != 5000 || pt.GSUs != 6 {
		t.Errorf("provisioned region scaled to %+v, want 5000 tokens/s and its 6 GSUs kept", pt)
	}
	if w4.RequestsPerSecond != 2 {
		t.Errorf("shared region scaled to %v requests/s, want 2", w4.RequestsPerSecond)
	}
	if n1 != (table.Capacity{}) {
		t.Errorf("a region of unknown capacity got %+v", n1)
	}
	c := got.Policy.Concurrency
	if c.RegionInitialLimit != 22 || c.RegionMaxLimit != 171 || c.MaxInFlight != table.DefaultMaxInFlight {
		t.Errorf("concurrency scaled to %+v, want region limits 22 and 171 and the pool cap kept", c)
	}
	if capacityOf(p, "europe-west4").RequestsPerSecond != 6 {
		t.Error("Scale modified its argument")
	}
	if one := Scale(p, StaticPart(1)); capacityOf(one, "europe-west4").RequestsPerSecond != 6 {
		t.Error("a share of one changed the pool")
	}
	tiny := Scale(p, Part{self: -1})
	if tiny.Policy.Concurrency.RegionInitialLimit != 1 || capacityOf(tiny, "europe-west4").RequestsPerSecond <= 0 {
		t.Errorf("a share of zero gave %+v: a router keeps some capacity and one call per region", tiny)
	}
}

func TestOf(t *testing.T) {
	p := testPool()
	p.Policy.CapacityShare = 60
	if got := Of(&p, 0.5); got != 0.3 {
		t.Errorf("60%% of a half = %v, want 0.3", got)
	}
	p.Policy.CapacityShare = 0
	if got := Of(&p, 0.25); got != 0.25 {
		t.Errorf("default cluster share of a quarter = %v, want 0.25", got)
	}
}

// capacityOf is the capacity of the named region of p.
func capacityOf(p table.Pool, name string) table.Capacity {
	for _, r := range p.Regions {
		if r.Name == name {
			return r.Capacity
		}
	}
	return table.Capacity{}
}

// TestScaleSpreadsLeftovers: routers of equal shares get equal totals over a
// pool's regions, within one call: the leftover call of each region goes to
// the next router in turn, not always to the first ranks. Three routers over
// regions of 6, 5 and 4 calls a second each get 5, and together exactly 15.
func TestScaleSpreadsLeftovers(t *testing.T) {
	p := testPool()
	p.Regions = []table.Region{
		{Name: "europe-west4", Capacity: table.Capacity{RequestsPerSecond: 6}},
		{Name: "europe-north1", Capacity: table.Capacity{RequestsPerSecond: 5}},
		{Name: "europe-southwest1", Capacity: table.Capacity{RequestsPerSecond: 4}},
		{Name: "europe-west3", Capacity: table.Capacity{RequestsPerSecond: 2}},
	}
	for _, n := range []int{2, 3, 4, 5} {
		var totals []float64
		perRegion := make([]float64, len(p.Regions))
		for rank := range n {
			var sum float64
			for i, r := range Scale(p, RankedPart(n, rank)).Regions {
				// A region left entirely to the others meters minRate.
				c := floor(r.Capacity.RequestsPerSecond)
				sum += c
				perRegion[i] += c
			}
			totals = append(totals, sum)
		}
		lo, hi := totals[0], totals[0]
		for _, s := range totals {
			lo, hi = min(lo, s), max(hi, s)
		}
		if hi-lo > 1 {
			t.Errorf("%d routers of equal shares meter %v calls a second in all: more than one call apart", n, totals)
		}
		for i, r := range p.Regions {
			if perRegion[i] != r.Capacity.RequestsPerSecond {
				t.Errorf("%d routers meter %v of %s's %v calls a second together", n, perRegion[i], r.Name, r.Capacity.RequestsPerSecond)
			}
		}
	}
}

// TestHeldCallsAddUp: three routers whose store stopped answering hold the
// parts of their last three epochs, in which the allocation moved from
// 60/25/15 to 70/20/10 at different reads for each; one epoch is among
// every router's reads. Over regions of 6, 5 and 4 calls a second the held
// calls add up to at most each region's, and keep more of them than
// rounding each held share down would.
func TestHeldCallsAddUp(t *testing.T) {
	epoch := func(ds ...float64) []Peer {
		var ps []Peer
		for i, d := range ds {
			ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: 3, Demand: d})
		}
		return ps
	}
	before, after := epoch(60, 25, 15), epoch(70, 20, 10)
	part := func(peers []Peer, i int) Part {
		p, ok := DemandPart(peers, fmt.Sprintf("r%d", i))
		if !ok {
			t.Fatal("router missing from its epoch")
		}
		return p
	}
	pool := table.Pool{Project: "p", Model: "m", Regions: []table.Region{
		{Name: "a", Capacity: table.Capacity{RequestsPerSecond: 6}},
		{Name: "b", Capacity: table.Capacity{RequestsPerSecond: 5}},
		{Name: "c", Capacity: table.Capacity{RequestsPerSecond: 4}},
	}, Policy: table.DefaultPolicy()}
	pool.Default()
	// Which of the three reads saw the new allocation, per router: the
	// epoch before the change is among them all.
	seen := [][3]bool{{false, false, true}, {false, true, true}, {false, false, false}}
	held, floored := map[string]float64{}, map[string]float64{}
	for i, s := range seen {
		ps := &poolShare{published: [2]float64{-1, -1}}
		for j, isAfter := range s {
			peers := before
			if isAfter {
				peers = after
			}
			r := part(peers, i)
			ps.reads = [3]Part{ps.reads[1], ps.reads[2], r}
			ps.nreads++
			if j > 0 {
				ps.published = [2]float64{ps.published[1], ps.reads[1].Share}
			}
		}
		hp, ok := ps.holdPart(StaticPart(3))
		if !ok {
			t.Fatal("no part held")
		}
		got, flat := Scale(pool, hp), Scale(pool, Part{Share: hp.Share, self: -1, n: 3})
		for _, r := range pool.Regions {
			held[r.Name] += capacityOf(got, r.Name).RequestsPerSecond
			floored[r.Name] += capacityOf(flat, r.Name).RequestsPerSecond
		}
	}
	var sumHeld, sumFloored float64
	for _, r := range pool.Regions {
		if held[r.Name] > r.Capacity.RequestsPerSecond {
			t.Errorf("region %s: held calls add up to %v, over its %v", r.Name, held[r.Name], r.Capacity.RequestsPerSecond)
		}
		sumHeld += held[r.Name]
		sumFloored += floored[r.Name]
	}
	t.Logf("held calls %v (%v in all), rounded down %v (%v)", held, sumHeld, floored, sumFloored)
	if sumHeld <= sumFloored {
		t.Errorf("held calls %v in all, no more than the %v of shares rounded down", sumHeld, sumFloored)
	}
}

// TestHeldCallsAddUpForAnyCount is TestHeldCallsAddUp over random counts of
// routers (2 to 6), demands, capacities and moments at which each router's
// last three reads saw the allocation move, one epoch being among every
// router's reads: the held calls never add up to more than a region's, nor
// the held shares to more than one.
func TestHeldCallsAddUpForAnyCount(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		n := 2 + rnd.IntN(5)
		epoch := func() []Peer {
			var ps []Peer
			for i := range n {
				ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: n, Demand: rnd.ExpFloat64() * 10})
			}
			return ps
		}
		before, after := epoch(), epoch()
		// How many of each router's last three reads saw the new
		// allocation: all at most two (the old one is common), or all at
		// least one (the new one is).
		lo, hi := 0, 2
		if rnd.IntN(2) == 0 {
			lo, hi = 1, 3
		}
		pool := table.Pool{Project: "p", Model: "m", Policy: table.DefaultPolicy()}
		for j := range 3 {
			pool.Regions = append(pool.Regions, table.Region{Name: fmt.Sprintf("q%d", j), Capacity: table.Capacity{RequestsPerSecond: float64(1 + rnd.IntN(12))}})
		}
		pool.Default()
		held := make([]float64, len(pool.Regions))
		shares := 0.0
		for i := range n {
			seen := lo + rnd.IntN(hi-lo+1)
			ps := &poolShare{published: [2]float64{-1, -1}}
			for j := range 3 {
				peers := before
				if j >= 3-seen {
					peers = after
				}
				r, ok := DemandPart(peers, fmt.Sprintf("r%d", i))
				if !ok {
					t.Fatal("router missing from its epoch")
				}
				if ps.nreads > 0 {
					ps.published = [2]float64{ps.published[1], ps.reads[2].Share}
				}
				ps.reads = [3]Part{ps.reads[1], ps.reads[2], r}
				ps.nreads++
			}
			hp, ok := ps.holdPart(StaticPart(n))
			if !ok {
				t.Fatal("no part held")
			}
			shares += hp.Share
			got := Scale(pool, hp)
			for j := range held {
				held[j] += math.Floor(got.Regions[j].Capacity.RequestsPerSecond + 1e-9)
			}
		}
		if shares > 1+1e-9 {
			t.Fatalf("%d routers hold shares adding up to %v", n, shares)
		}
		for j, r := range pool.Regions {
			if held[j] > r.Capacity.RequestsPerSecond {
				t.Fatalf("%d routers hold %v calls of region %s's %v", n, held[j], r.Name, r.Capacity.RequestsPerSecond)
			}
		}
	}
}
