package policy

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/table"
)

// burstToPT sends n calls of tokens tokens each, 1 ms apart, through a pool
// of a PT and a shared region, and returns how many the PT took. Every call
// succeeds and reports its tokens.
func burstToPT(t *testing.T, p *Pool, clk *fakeClock, n int, tokens int64) int {
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
	for _, tc := range []struct {
		name   string
		pool   table.Pool
		want   int    // calls the PT takes in the burst
		window string // as the snapshot shows it
	}{
		{"size default: 40 s", base, 40 * tps / tokens, "40s"},
		{"one-second window", oneSecond, tps / tokens, "1s"},
		{"half of a 40 s window", share.Scale(base, share.StaticPart(2)), 40 * tps / tokens / 2, "40s"},
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
			if rs.ProvisionedWindow != tc.window || rs.ProvisionedWindowUsed < 0.95 || rs.ProvisionedWindowUsed > 1 {
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
