package gcp

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newClock is a fake clock at t0 that tests move by hand.
func newClock() *testingclock.FakeClock { return testingclock.NewFakeClock(t0) }

// startFake serves a fake Monitoring on loopback with the clock, and returns a
// MonitoringSource dialed to it with the same clock.
func startFake(tb testing.TB, clk *testingclock.FakeClock) (*gcpfake.MetricServer, *MonitoringSource) {
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
