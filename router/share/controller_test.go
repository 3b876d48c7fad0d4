package share

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// counter is a replica count a test moves.
type counter struct{ n atomic.Int64 }

func (c *counter) Replicas() int  { return int(c.n.Load()) }
func (c *counter) Source() string { return "test" }

// applied keeps the tables a controller applies.
type applied struct {
	mu   sync.Mutex
	last *table.Table
	n    int
}

func (a *applied) apply(t *table.Table) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last, a.n = t, a.n+1
	return nil
}

// rps is the requests per second of region europe-west4 in the last table.
func (a *applied) rps() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return capacityOf(a.last.Pools[0], "europe-west4").RequestsPerSecond
}

// TestControllerShrinksAtOnceAndGrowsLate moves the replica count and checks
// the capacity applied: a larger count shrinks it at the next recompute; a
// smaller one grows it only after the grow delay, and a growth of under 5%
// is not applied.
func TestControllerShrinksAtOnceAndGrowsLate(t *testing.T) {
	var n counter
	n.n.Store(2)
	var a applied
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Options{Apply: a.apply, Replicas: &n, Now: func() time.Time { return now }, GrowDelay: time.Second})
	tp := testPool()
	tbl := &table.Table{Version: table.Version, Pools: []table.Pool{tp}}
	if err := c.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	if got := a.rps(); got != 3 {
		t.Fatalf("2 replicas: europe-west4 metered at %v requests/s, want 3 of 6", got)
	}
	step := func(d time.Duration) {
		now = now.Add(d)
		_ = c.refresh(now)
	}
	n.n.Store(3) // a surge: a third router appears
	step(10 * time.Millisecond)
	if got := a.rps(); got != 2 {
		t.Fatalf("3 replicas: metered at %v, want 2 at once", got)
	}
	n.n.Store(2) // it leaves; the controller sees it at the next recompute
	step(500 * time.Millisecond)
	step(900 * time.Millisecond)
	if got := a.rps(); got != 2 {
		t.Fatalf("back to 2 replicas for 0.9s: metered at %v, want still 2 (the grow delay is 1s)", got)
	}
	step(200 * time.Millisecond)
	if got := a.rps(); got != 3 {
		t.Fatalf("back to 2 replicas for 1.1s: metered at %v, want 3", got)
	}
	// A new table keeps the share in force and applies at once.
	p := tp
	p.Policy.CapacityShare = 50
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{p}}); err != nil {
		t.Fatal(err)
	}
	// Half of 6 is 3 for the cluster, 1.5 for each of 2 routers; a router
	// that knows no ranks (a static share) rounds its calls down.
	if got := a.rps(); got != 1 {
		t.Fatalf("cluster share 50%% of 2 replicas: metered at %v, want 1 (1.5 rounded down)", got)
	}
	sh := c.Shares()
	if len(sh) != 1 || sh[0].Share != 0.25 || sh[0].CapacityShare != 50 || sh[0].Replicas != 2 || sh[0].Source != "test" {
		t.Errorf("Shares() = %+v", sh)
	}
	before := a.n
	step(time.Second)
	if a.n != before {
		t.Errorf("an unchanged share applied a table again")
	}
}

func TestControllerDemandMeter(t *testing.T) {
	var a applied
	c := New(Options{Apply: a.apply})
	p := testPool()
	if c.Demand(p.Key()) != nil {
		t.Fatal("a demand meter before the pool is in a table")
	}
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{p}}); err != nil {
		t.Fatal(err)
	}
	d := c.Demand(p.Key())
	if d == nil {
		t.Fatal("no demand meter for the table's pool")
	}
	d.Add(time.Now().UnixNano())
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{p}}); err != nil {
		t.Fatal(err)
	}
	if c.Demand(p.Key()) != d {
		t.Error("a new table replaced the pool's demand meter")
	}
	if sh := c.Shares()[0]; !(sh.Demand > 0) || math.IsInf(sh.Demand, 0) || sh.DemandCalls != 1 || sh.DemandWindow != "10s" {
		t.Errorf("after one call: demand %v of %d calls over %s, want one call over 10s", sh.Demand, sh.DemandCalls, sh.DemandWindow)
	}
	// The pool's PT is now an order of 2 GSUs, counted over 40 s: its
	// demand is counted over as long, afresh.
	p.Regions[0].Capacity.GSUs = 2
	p.Policy.Provisioned.Window = table.Duration{}
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{p}}); err != nil {
		t.Fatal(err)
	}
	if c.Demand(p.Key()) == d {
		t.Error("a pool whose PT window grew kept the demand meter of its old window")
	}
	if sh := c.Shares()[0]; sh.DemandCalls != 0 || sh.DemandWindow != "40s" {
		t.Errorf("a pool with a PT of 2 GSUs: %d calls over %s, want none yet over 40s", sh.DemandCalls, sh.DemandWindow)
	}
}
