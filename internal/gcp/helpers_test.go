package gcp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a fake clock that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startFake serves a fake Monitoring on loopback with the clock, and returns a
// MonitoringSource dialed to it with the same clock.
func startFake(tb testing.TB, clk *clock) (*gcpfake.MetricServer, *MonitoringSource) {
	tb.Helper()
	fake := gcpfake.NewMetricServer()
	fake.SetNow(clk.Now)
	addr, stop, err := gcpfake.Start(fake)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	src, err := NewMonitoringSource(context.Background(), Options{Endpoint: addr, Insecure: true, Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = src.Close() })
	return fake, src
}
