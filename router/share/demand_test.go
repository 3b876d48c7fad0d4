package share

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestMain fails the package's tests when goroutines outlive them: a share
// controller, exchange or meter that left one behind (a store connection, an
// extender) would grow in a router until it failed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemandRate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, window := range []time.Duration{DemandWindow, 40 * time.Second} {
		d := NewDemand(window)
		// 20 calls a second for 1.2 windows, then 5 a second for half a
		// window: the rate counts the last window only.
		end := int64(window) * 12 / 10
		for at := int64(0); at < end; at += int64(50 * time.Millisecond) {
			d.Add(t0 + at)
		}
		now := t0 + end
		if got := d.Rate(now); got < 19 || got > 21 {
			t.Errorf("%v window: rate = %v, want about 20", window, got)
		}
		for at := end; at < end+int64(window)/2; at += int64(200 * time.Millisecond) {
			d.Add(t0 + at)
		}
		// At a bucket's start the window is its nine full buckets: four
		// at 20 calls a second, five at 5.
		now = t0 + end + int64(window)/2
		tenth := window.Seconds() / 10
		want := 4*tenth*20 + 5*tenth*5
		if got, n := d.Sample(now); float64(n) != want || got != want/(9*tenth) {
			t.Errorf("%v window: rate %v of %d calls, want %v calls over nine tenths of it", window, got, n, want)
		}
		if got := d.Rate(now + int64(window)); got != 0 {
			t.Errorf("%v window: rate a window later = %v, want 0", window, got)
		}
	}
}

// TestDemandWindowFor: a pool counts demand over DemandWindow, or over its
// longest PT window when longer.
func TestDemandWindowFor(t *testing.T) {
	pool := func(gsus ...int64) *table.Pool {
		p := &table.Pool{Regions: []table.Region{{Name: "paygo", Tier: table.TierShared}}}
		for i, g := range gsus {
			p.Regions = append(p.Regions, table.Region{Name: fmt.Sprintf("pt%d", i), Tier: table.TierProvisioned, Capacity: table.Capacity{GSUs: g}})
		}
		return p
	}
	for _, c := range []struct {
		pool *table.Pool
		want time.Duration
	}{
		{pool(), DemandWindow},
		{pool(100), DemandWindow},
		{pool(10), DemandWindow},
		{pool(100, 2), table.SmallPTWindow},
	} {
		if got := DemandWindowFor(c.pool); got != c.want {
			t.Errorf("%+v: %v, want %v", c.pool.Regions, got, c.want)
		}
	}
	p := pool(2)
	p.Policy.Provisioned.Window.Duration = 2 * time.Minute
	if got := DemandWindowFor(p); got != 2*time.Minute {
		t.Errorf("a pool that sets its PT window to 2m: %v, want 2m", got)
	}
}

// TestDemandRateOfAYoungWindow: a router counting for less than DemandWindow
// reports the rate of the time it has counted, at any moment it samples,
// and not that rate diluted over the whole window.
func TestDemandRateOfAYoungWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, started := range []time.Duration{1500 * time.Millisecond, 3 * time.Second, 7300 * time.Millisecond} {
		var d Demand
		// 20 calls a second since started.
		end := int64(started)
		for at := int64(0); at < end; at += int64(50 * time.Millisecond) {
			d.Add(t0 + at)
		}
		for _, after := range []time.Duration{0, 10 * time.Millisecond, 40 * time.Millisecond} {
			if got := d.Rate(t0 + end + int64(after)); got < 19 || got > 21 {
				t.Errorf("%v after the first call, %v after the last: rate = %.2f, want about 20", started, after, got)
			}
		}
	}
	// The first call alone is one call over a bucket, not over a nanosecond.
	var d Demand
	d.Add(t0)
	if got, want := d.Rate(t0), 1/(DemandWindow/demandBuckets).Seconds(); got != want {
		t.Errorf("rate right after the first call = %v, want %v", got, want)
	}
}

// TestDemandOfARestartedRouter: in a rolling update a router that started
// two seconds ago and one that has run for a minute, each at 20 calls a
// second, report the same demand, so they get the same share; over the
// whole window the new one would report a fifth of the old one's.
func TestDemandOfARestartedRouter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	now := t0 + int64(time.Minute)
	var old, young Demand
	for at := t0; at < now; at += int64(50 * time.Millisecond) {
		old.Add(at)
		if at >= now-int64(2*time.Second) {
			young.Add(at)
		}
	}
	o, y := old.Rate(now), young.Rate(now)
	if y < 0.95*o || y > 1.05*o {
		t.Errorf("a router running for a minute counts %.2f calls a second, one started 2 s ago %.2f; want the same", o, y)
	}
}
