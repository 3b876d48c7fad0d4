package gcp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

// BenchmarkMonitoringSource measures one project's fetch (three ListTimeSeries
// over loopback gRPC) by the number of PTs in the project.
func BenchmarkMonitoringSource(b *testing.B) {
	for _, pts := range []int{1, 30, 300} {
		b.Run(fmt.Sprintf("pts=%d", pts), func(b *testing.B) {
			clk := newClock()
			fake, src := startFake(b, clk)
			for i := range pts {
				fake.SetPT(gcpfake.PT{Project: "p", Location: fmt.Sprintf("region-%d", i%30), Publisher: "google",
					Model: fmt.Sprintf("model-%03d", i/30), GSUs: 1, TokensPerSecond: 1000,
					Consumed: map[string]float64{RequestTypeDedicated: 500, RequestTypeSpillover: 20}})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := src.ProvisionedThroughput(context.Background(), "p"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCachedSourceHit measures a lookup served from the cache: the copy
// of the facts each caller gets, by the number of entries in the project.
func BenchmarkCachedSourceHit(b *testing.B) {
	for _, entries := range []int{1, 30, 300} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			facts := &ProjectFacts{Project: "p", FetchedAt: t0}
			for i := range entries {
				facts.Entries = append(facts.Entries, Facts{Location: "europe-west1", Publisher: "google", Model: fmt.Sprintf("m-%03d", i),
					GSUs: 1, TokensPerSecond: 1000, Consumed: map[string]float64{RequestTypeDedicated: 1}})
			}
			clk := newClock()
			cached := NewCachedSource(staticSource{facts}, CacheOptions{TTL: time.Hour, Now: clk.Now})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cached.ProvisionedThroughput(ctx, "p"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// staticSource answers the same facts for every project.
type staticSource struct{ facts *ProjectFacts }

func (s staticSource) ProvisionedThroughput(context.Context, string) (*ProjectFacts, error) {
	return s.facts.clone(), nil
}
