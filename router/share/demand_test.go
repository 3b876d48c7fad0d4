package share

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when goroutines outlive them: a share
// controller, exchange or meter that left one behind (a store connection, an
// extender) would grow in a router until it failed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemandRate(t *testing.T) {
	var d Demand
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// 20 calls a second for twelve seconds.
	for i := range 240 {
		d.Add(t0 + int64(i)*int64(50*time.Millisecond))
	}
	now := t0 + int64(12*time.Second)
	if got := d.Rate(now); got < 19 || got > 21 {
		t.Errorf("rate = %v, want about 20", got)
	}
	if got := d.Rate(now + int64(DemandWindow)); got != 0 {
		t.Errorf("rate a window later = %v, want 0", got)
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
	if got, want := d.Rate(t0), 1/time.Duration(demandWidth).Seconds(); got != want {
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
