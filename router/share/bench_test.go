package share

import (
	"fmt"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/redisserver"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// BenchmarkApplyShare measures what a share change costs a router: scaling a
// pool of four regions and the policy's Update, which keeps live state. The
// controller does it at most a few times a second.
func BenchmarkApplyShare(b *testing.B) {
	p := testPool()
	p.Regions = append(p.Regions, table.Region{Name: "europe-southwest1", Capacity: table.Capacity{RequestsPerSecond: 4}})
	p.Default()
	pol, err := policy.New(p, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	parts := []Part{RankedPart(3, 1), RankedPart(2, 1)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := pol.Update(Scale(p, parts[i%2])); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSharedMeterTake measures what the shared meter adds to a request
// to a region with a quota: one round trip to a real Redis server on
// loopback and the script it runs, on one goroutine (-cpu for more).
func BenchmarkSharedMeterTake(b *testing.B) {
	srv := redisserver.ForTest(b)
	m, err := NewMeter(MeterOptions{URL: srv.URL(), ID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	tp := testPool()
	tp.Regions = append(tp.Regions, table.Region{Name: "bench", Capacity: table.Capacity{RequestsPerSecond: 1e8}})
	pm := &poolMeter{m: m}
	pm.set(&tp)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v := pm.TakeShared("bench", time.Now().UnixNano(), first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
				b.Fatalf("verdict %d", v)
			}
		}
	})
}

// BenchmarkDemandPart is one router's part from an epoch of 30 routers with
// shares in force, as each router computes it for each pool every exchange.
func BenchmarkDemandPart(b *testing.B) {
	var peers []Peer
	for i := range 30 {
		peers = append(peers, Peer{ID: fmt.Sprintf("r%02d", i), Replicas: 30, Demand: float64(10 + i%7), Share: 1.0 / 30, Calls: uint64(100 + 10*(i%7)), Counted: true})
	}
	for b.Loop() {
		if _, ok := DemandPart(peers, "r07"); !ok {
			b.Fatal("no part")
		}
	}
}
