package policy

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// burstToPT sends n calls of tokens tokens each, 1 ms apart, through a pool
// of a PT and a shared region, and returns how many the PT took. Every call
// succeeds and reports its tokens.
func burstToPT(t *testing.T, p *Pool, clk *clocktest.Clock, n int, tokens int64) int {
	t.Helper()
	pt := 0
	for range n {
		c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			t.Fatalf("pick: %v", err)
		}
		if a.Tier == table.TierProvisioned {
			pt++
		}
		a.DoneTokens(Success, tokens)
		clk.Advance(100 * time.Microsecond)
	}
	return pt
}

// TestPTMeteredOverItsWindow: a PT's tokens are metered over its window, so
// a burst onto an idle PT takes capacity × window of them (a 2-GSU order:
// 40 s of it by default), the pool's window when it sets one (1 s: one
// second of it), the router's share of that behind several routers, and
// nothing while Google says the PT is full.
func TestPTMeteredOverItsWindow(t *testing.T) {
	const tps, tokens = 1000, 100 // 10 calls a second of capacity
	base := pool(
		provisioned("europe-west1", table.Capacity{GSUs: 2, TokensPerSecond: tps}),
		shared("europe-west4", 10000),
	)
	oneSecond := base
	oneSecond.Policy.Provisioned.Window = table.Duration{Duration: time.Second}
	// Half the order's throughput, as router/share scales it for one of two
	// routers: the GSUs, and so the window, stay the order's.
	half := base
	half.Regions = append([]table.Region(nil), base.Regions...)
	half.Regions[0].Capacity.TokensPerSecond = tps / 2
	for _, tc := range []struct {
		name   string
		pool   table.Pool
		want   int    // calls the PT takes in the burst
		window string // as the snapshot shows it
	}{
		{"size default: 40 s", base, 40 * tps / tokens, "40s"},
		{"one-second window", oneSecond, tps / tokens, "1s"},
		{"half of a 40 s window", half, 40 * tps / tokens / 2, "40s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			p := mustNew(t, tc.pool, clk)
			// The first call teaches the router the tokens of a call; the
			// burst comes once it has left the window.
			burstToPT(t, p, clk, 1, tokens)
			clk.Advance(time.Hour)
			got := burstToPT(t, p, clk, 1000, tokens)
			// A window spans 9 to 10 of its buckets: one call either way.
			if got < tc.want-1 || got > tc.want {
				t.Errorf("the PT took %d calls of a burst, want %d", got, tc.want)
			}
			// Operators see the window and that it is full.
			rs := p.Snapshot().Regions[0]
			if rs.ProvisionedWindow.String() != tc.window || rs.ProvisionedWindowUsed < 0.95 || rs.ProvisionedWindowUsed > 1 {
				t.Errorf("snapshot: window %q, %.3f used; want %s and full", rs.ProvisionedWindow, rs.ProvisionedWindowUsed, tc.window)
			}
		})
	}

	t.Run("a full PT takes nothing", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, base, clk)
		burstToPT(t, p, clk, 1, tokens)
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil || a.Tier != table.TierProvisioned {
			t.Fatalf("first pick %+v, %v: want the PT", a, err)
		}
		a.Done(ProvisionedFull)
		// The window holds 39 s of room, yet Google's word stands.
		if got := burstToPT(t, p, clk, 500, tokens); got != 0 {
			t.Errorf("the PT took %d calls in the 50 ms after Google said it was full", got)
		}
	})
}

// TestLargePTWindowFitsTheMeter: a large order with a long window set is
// metered over a window short enough for a call to cost whole units (ten
// million tokens: 10 s at a million tokens a second), so a burst still stops
// at the window's capacity instead of never; a small one keeps its window.
func TestLargePTWindowFitsTheMeter(t *testing.T) {
	const tps, tokens = 1_000_000, 200
	p := pool(provisioned("europe-west1", table.Capacity{GSUs: 400, TokensPerSecond: tps}), shared("europe-west4", 1e6))
	p.Policy.Provisioned.Window = table.Duration{Duration: 2000 * time.Second}
	clk := newClock()
	r := mustNew(t, p, clk)
	if w := r.Snapshot().Regions[0].ProvisionedWindow.Duration; w != 10*time.Second {
		t.Errorf("window %s, want 10s", w)
	}
	burstToPT(t, r, clk, 1, tokens)
	clk.Advance(time.Hour)
	// 10 s × a million tokens a second is 50,000 calls of 200 tokens; the
	// burst lasts 8 s, within the window.
	if got := burstToPT(t, r, clk, 80_000, tokens); got < 49_500 || got > 50_000 {
		t.Errorf("the PT took %d calls of an 8 s burst, want about 50000", got)
	}
	for _, tc := range []struct {
		w    time.Duration
		tps  float64
		want time.Duration
	}{
		{40 * time.Second, 10_000, 40 * time.Second},
		{2000 * time.Second, 10_000, 1000 * time.Second},
		{5 * time.Second, 1e9, time.Second},
	} {
		if got := meterWindow(tc.w, tc.tps); got != tc.want {
			t.Errorf("meterWindow(%v, %v) = %v, want %v", tc.w, tc.tps, got, tc.want)
		}
	}
}

// TestPTWindowRetryAfter: when the only capacity is a PT whose window is
// full, the refusal's Retry-After is when the burst that filled it leaves the
// window, some 40 s later for a 2-GSU order, not the second that a
// one-second meter would say. The PT is called dedicated, so it has no
// overflow.
func TestPTWindowRetryAfter(t *testing.T) {
	const tps, tokens = 1000, 100
	tp := pool(provisioned("europe-west1", table.Capacity{GSUs: 2, TokensPerSecond: tps}))
	tp.Regions[0].Ejectable = false
	tp.Policy.Provisioned.RequestType = table.RequestTypeDedicated
	clk := newClock()
	p := mustNew(t, tp, clk)
	var err error
	n := 0
	for ; n < 1000; n++ {
		c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
		var a Attempt
		if a, err = c.Pick(); err != nil {
			break
		}
		a.DoneTokens(Success, tokens)
		clk.Advance(time.Millisecond)
	}
	d, ok := RetryAfter(err)
	if !ok || d < 39*time.Second || d > 41*time.Second {
		t.Fatalf("after %d calls of %d tokens into a PT of %d tokens/s over 40 s: %v (Retry-After %v); want over capacity, Retry-After about 40 s", n, tokens, tps, err, d)
	}
}
