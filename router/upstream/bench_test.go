package upstream

import (
	"testing"

	"github.com/regionwarden/regionwarden/router/table"
)

// BenchmarkClientLookup measures finding a known endpoint's client, the only
// shared state a call touches.
func BenchmarkClientLookup(b *testing.B) {
	c := newClients(b)
	for _, ep := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"} {
		if _, err := c.get(ep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.get("127.0.0.1:3"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrepareRequest measures what a call adds before the client
// library: the request copy, the model name and the metadata.
func BenchmarkPrepareRequest(b *testing.B) {
	pool := &table.Pool{Project: "proj", Publisher: "google", Model: "gemini-2.5-flash"}
	region := table.Region{Name: "europe-west1", Tier: table.TierShared}
	req := userRequest()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		r := shallowCopy(req)
		r.Model = ModelName(pool, region)
		_ = outgoing(ctx, RequestType(pool, region))
	}
}

// BenchmarkGenerateContentLoopback measures one unary call through the real
// client to a fake region on loopback.
func BenchmarkGenerateContentLoopback(b *testing.B) {
	f := startFake(b)
	c := newClients(b)
	pool, _, shared := testPool(f, table.RequestTypeSpillover)
	req := userRequest()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GenerateContent(ctx, req, pool, shared); err != nil {
			b.Fatal(err)
		}
	}
}
