package policy

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// benchPool is a 5-region pool: one provisioned region and four shared ones.
func benchPool() table.Pool {
	return pool(
		provisioned("europe-west4", table.Capacity{GSUs: 10}),
		shared("europe-west1", 100), shared("europe-west2", 100),
		shared("europe-west3", 50), shared("europe-north1", 0),
	)
}

// benchWindowPool is benchPool with the PT metered by its tokens over its
// window (2 GSUs: 40 s). The benchmark's calls report no tokens, so the
// window never fills: it measures the meter's cost on every call, not a
// refusal's.
func benchWindowPool() table.Pool {
	p := benchPool()
	p.Regions[0].Capacity = table.Capacity{GSUs: 2, TokensPerSecond: 5000}
	return p
}

// benchSharedPool is a 5-region pool of shared regions only, where every
// first attempt is a weighted draw.
func benchSharedPool() table.Pool {
	return pool(shared("europe-west1", 100), shared("europe-west2", 100),
		shared("europe-west3", 50), shared("europe-north1", 0), shared("europe-west9", 0))
}

// benchClocks are the clocks benchmarks run with: the injected clock shows the
// policy's own cost; time.Now adds two clock reads per call (Pick and Done),
// which cost what the machine's clock source costs.
var benchClocks = []struct {
	name string
	now  func() time.Time
}{
	{"clock=injected", newClock().Now},
	{"clock=time.Now", time.Now},
}

// BenchmarkPickDone measures one call's Pick and Done, serially. The
// deadline case gives each call a minute, as the server gives every call its
// request timeout at least: each region's time-left rule is then asked
// (quick.go).
func BenchmarkPickDone(b *testing.B) {
	for _, pc := range []struct {
		name     string
		pool     table.Pool
		deadline bool
	}{
		{"adaptive/provisioned+4shared", benchPool(), false},
		{"adaptive/provisioned+4shared/deadline", benchPool(), true},
		{"adaptive/provisioned-window+4shared", benchWindowPool(), false},
		{"adaptive/5shared", benchSharedPool(), false},
	} {
		for _, clk := range benchClocks {
			b.Run(pc.name+"/"+clk.name, func(b *testing.B) {
				r, err := New(pc.pool, Options{Now: clk.now, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				reportCPU(b, func() {
					for b.Loop() {
						var req Request
						if pc.deadline {
							req.Deadline = clk.now().Add(time.Minute)
						}
						c := r.Start(req)
						a, err := c.Pick()
						if err != nil {
							b.Fatal(err)
						}
						a.Done(Success)
					}
				})
			})
		}
	}
}

// BenchmarkPickDoneParallel measures Pick and Done from every P at once, on
// one pool: the hot path shares only atomics, so the time per call should not
// grow with the number of Ps.
func BenchmarkPickDoneParallel(b *testing.B) {
	for _, clk := range benchClocks {
		b.Run(clk.name, func(b *testing.B) {
			p, err := New(benchPool(), Options{Now: clk.now, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := p.Start(Request{})
					a, err := c.Pick()
					if err != nil {
						b.Error(err)
						return
					}
					a.Done(Success)
				}
			})
		})
	}
}
